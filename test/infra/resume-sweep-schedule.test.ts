/**
 * The resume sweep schedule of the CDK stack (infra/resume-sweep.ts): absent by default, one
 * rule per configured experiment when set, sending the resume handler's sweep event. The stack
 * is synthesized from the real handlers without bundling them (`aws:cdk:bundling-stacks: []`,
 * as `cdk deploy -e` does for the stacks it skips) and a stand-in layer folder; context comes
 * from the real cdk.json.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, readConfig } from '../../infra/config.ts';
import { DgclStack } from '../../infra/stack.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const CDK_CONTEXT = (JSON.parse(fs.readFileSync(path.join(REPO, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> }).context;

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dgcl-sweep-infra-'));
  fs.mkdirSync(path.join(tmp, 'layer', 'nodejs', 'node_modules'), { recursive: true });
});
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

function synth(context: Record<string, unknown>, id: string): { stack: DgclStack; template: Template } {
  const app = new App({ outdir: path.join(tmp, `cdk.out-${id}`), context: { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [], ...context } });
  const stack = new DgclStack(app, id, { config: readConfig(app.node), projectRoot: REPO, layer: { dir: path.join(tmp, 'layer'), fingerprint: 'stub-layer' } });
  return { stack, template: Template.fromStack(stack) };
}

/** The rules whose target is the resume function, with their schedule and target input. */
function sweepRules(stack: DgclStack, template: Template): Array<{ schedule: string; input: unknown; state: string }> {
  const resumeId = stack.getLogicalId(stack.functions.resume.node.defaultChild as never);
  const rules = Object.values(template.findResources('AWS::Events::Rule')) as Array<{ Properties: { ScheduleExpression: string; State: string; Targets: Array<{ Arn: unknown; Input: string }> } }>;
  return rules
    .filter((r) => r.Properties.Targets.some((t) => JSON.stringify(t.Arn) === JSON.stringify({ 'Fn::GetAtt': [resumeId, 'Arn'] })))
    .map((r) => ({ schedule: r.Properties.ScheduleExpression, input: JSON.parse(r.Properties.Targets[0]!.Input), state: r.Properties.State }));
}

describe('resume sweep schedule', () => {
  it('is off by default: no rule invokes the resume function', () => {
    const { stack, template } = synth({}, 'Default');
    expect(sweepRules(stack, template)).toEqual([]);
    template.resourceCountIs('AWS::Events::Rule', 1); // maintenance only
    expect(readConfig(new App({ context: CDK_CONTEXT }).node).resumeSweep).toEqual(DEFAULT_CONFIG.resumeSweep);
    expect(DEFAULT_CONFIG.resumeSweep.experiments).toEqual([]);
  });

  it('configured: one rule per experiment, at the rate, sending the sweep event; events may invoke resume', () => {
    const { stack, template } = synth(
      { 'dgcl:resumeSweepExperiments': 'gen/exp-1, gen/exp-2', 'dgcl:resumeSweepStalledFor': '2h', 'dgcl:resumeSweepRateMinutes': '10' },
      'Configured',
    );
    expect(sweepRules(stack, template)).toEqual([
      { schedule: 'rate(10 minutes)', state: 'ENABLED', input: { pipeline: 'gen', experiment: 'exp-1', stalledForMs: 7_200_000 } },
      { schedule: 'rate(10 minutes)', state: 'ENABLED', input: { pipeline: 'gen', experiment: 'exp-2', stalledForMs: 7_200_000 } },
    ]);
    const resumeId = stack.getLogicalId(stack.functions.resume.node.defaultChild as never);
    template.hasResourceProperties('AWS::Lambda::Permission', { Principal: 'events.amazonaws.com', FunctionName: { 'Fn::GetAtt': [resumeId, 'Arn'] } });
    template.hasResourceProperties('AWS::Events::Rule', {
      Targets: [Match.objectLike({ RetryPolicy: { MaximumRetryAttempts: 2, MaximumEventAgeInSeconds: 600 } })],
      ScheduleExpression: 'rate(10 minutes)',
    });
  });

  it('reads a JSON array from cdk.json the same as a comma-separated list, with the default duration and rate', () => {
    const c = readConfig(new App({ context: { 'dgcl:resumeSweepExperiments': ['p/e'] } }).node);
    expect(c.resumeSweep).toEqual({ experiments: [{ pipeline: 'p', experiment: 'e' }], stalledForMs: 3_600_000, rateMinutes: 30 });
  });

  it('refuses bad settings, naming the key and the value', () => {
    const read = (context: Record<string, unknown>) => () => readConfig(new App({ context }).node);
    expect(read({ 'dgcl:resumeSweepExperiments': 'p' })).toThrow(/dgcl:resumeSweepExperiments: "p": expected pipeline\/experiment/);
    expect(read({ 'dgcl:resumeSweepExperiments': 'p/e/x' })).toThrow(/dgcl:resumeSweepExperiments: "p\/e\/x"/);
    expect(read({ 'dgcl:resumeSweepExperiments': 'p/bad name' })).toThrow(/dgcl:resumeSweepExperiments: "p\/bad name": .*invalid experiment name/);
    expect(read({ 'dgcl:resumeSweepExperiments': 'p/e,p/e' })).toThrow(/names "p\/e" twice/);
    expect(read({ 'dgcl:resumeSweepStalledFor': '30' })).toThrow(/context dgcl:resumeSweepStalledFor: must be a duration .*got "30"/);
    expect(read({ 'dgcl:resumeSweepRateMinutes': '0' })).toThrow(/dgcl:resumeSweepRateMinutes/);
  });
});
