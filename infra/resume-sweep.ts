/**
 * The scheduled resume sweep (docs/operations.md, "Resuming stalled items after an outage"): one
 * EventBridge rule per configured experiment, whose event is the resume handler's sweep
 * `{pipeline, experiment, stalledForMs}`. None unless experiments are configured (infra/config.ts,
 * `dgcl:resumeSweepExperiments`).
 */
import { Duration } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';
import { formatDuration } from '../lib/duration.ts';
import type { DgclConfig } from './config.ts';

export function addResumeSweeps(scope: Construct, resume: lambda.IFunction, sweep: DgclConfig['resumeSweep']): events.Rule[] {
  const rate = Duration.minutes(sweep.rateMinutes);
  return sweep.experiments.map(({ pipeline, experiment }, i) => {
    const rule = new events.Rule(scope, `ResumeSweepSchedule${i + 1}`, {
      description: `Resumes the items of ${pipeline}/${experiment} idle for more than ${formatDuration(sweep.stalledForMs)}, every ${sweep.rateMinutes} minutes`,
      schedule: events.Schedule.rate(rate),
    });
    // A sweep is idempotent (an instruction carries its item's lastSeq): a retried delivery, or
    // a tick overlapping the previous one, only sends instructions again.
    rule.addTarget(
      new targets.LambdaFunction(resume, {
        event: events.RuleTargetInput.fromObject({ pipeline, experiment, stalledForMs: sweep.stalledForMs }),
        retryAttempts: 2,
        maxEventAge: rate,
      }),
    );
    return rule;
  });
}
