/**
 * The CDK stack, synthesized once with stub handlers (in a temporary project outside the repo)
 * and a tiny stand-in layer, so the test is fast and does not depend on the real handlers or
 * the ~170 MB layer. Context comes from the real cdk.json.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import type { CloudAssembly } from 'aws-cdk-lib/cx-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, normalizePrefix, readConfig } from '../../infra/config.ts';
import { assertFits, formatSizes, LAMBDA_UNZIPPED_LIMIT_BYTES, measureAssembly } from '../../infra/sizes.ts';
import { METRICS_NAMESPACE, RECORD_FAILURES_METRIC } from '../../functions/shared/metric-names.ts';
import { LAYER_SPECIFIERS } from '../../infra/lancedb-layer.ts';
import { APPEND_QUEUE_AGE_ALARM, DgclStack, HANDLERS, LAYER_ALIASES, LAYER_MODULES, WRITER_SLOTS } from '../../infra/stack.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const CDK_CONTEXT = (JSON.parse(fs.readFileSync(path.join(REPO, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> })
  .context;
const NAMES = ['append', 'fold', 'resume', 'maintenance'] as const;

type Resource = { Type: string; Properties?: Record<string, any>; DeletionPolicy?: string; UpdateReplacePolicy?: string };
type Statement = { Effect: string; Action: string | string[]; Resource: unknown; Condition?: Record<string, any> };

let tmp: string;

/** A throwaway project: stub handlers + the repo's node_modules (symlinked) + a stand-in layer. */
let project: { projectRoot: string; layerDir: string } | undefined;
function makeProject(): { projectRoot: string; layerDir: string } {
  if (project) return project;
  const projectRoot = path.join(tmp, 'project');
  fs.mkdirSync(path.join(projectRoot, 'functions'), { recursive: true });
  fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(projectRoot, 'node_modules'), 'dir');
  fs.copyFileSync(path.join(REPO, 'package.json'), path.join(projectRoot, 'package.json'));
  fs.copyFileSync(path.join(REPO, 'package-lock.json'), path.join(projectRoot, 'package-lock.json'));
  for (const name of NAMES) {
    fs.writeFileSync(
      path.join(projectRoot, 'functions', `${name}.ts`),
      [
        "import { connect } from '@lancedb/lancedb';",
        "import { tableFromArrays } from 'apache-arrow';",
        "import { VectorAssembler } from 'apache-arrow/visitor/vectorassembler';",
        'export const handler = async (event: unknown) =>',
        `  ({ name: '${name}', connect: typeof connect, arrow: typeof tableFromArrays, v: typeof VectorAssembler, event });`,
        '',
      ].join('\n'),
    );
  }
  const layerDir = path.join(tmp, 'layer');
  const pkg = path.join(layerDir, 'nodejs', 'node_modules', '@lancedb', 'lancedb');
  fs.mkdirSync(pkg, { recursive: true });
  fs.writeFileSync(path.join(pkg, 'package.json'), '{"name":"@lancedb/lancedb","version":"0.0.0-stub"}\n');
  fs.writeFileSync(path.join(pkg, 'index.js'), 'module.exports = {};\n');
  project = { projectRoot, layerDir };
  return project;
}

function synth(context: Record<string, unknown>, id: string): { stack: DgclStack; template: Template; assembly: CloudAssembly } {
  const { projectRoot, layerDir } = makeProject();
  const app = new App({ outdir: path.join(tmp, `cdk.out-${id}`), context: { ...CDK_CONTEXT, ...context } });
  const stack = new DgclStack(app, id, {
    config: readConfig(app.node),
    projectRoot,
    layer: { dir: layerDir, fingerprint: 'stub-layer' },
  });
  const template = Template.fromStack(stack);
  return { stack, template, assembly: app.synth() };
}

let stack: DgclStack;
let template: Template;
let assembly: CloudAssembly;
let resources: Record<string, Resource>;

function ofType(type: string): [string, Resource][] {
  return Object.entries(resources).filter(([, r]) => r.Type === type);
}
function logicalIdOf(construct: { node: { defaultChild?: unknown } }): string {
  return stack.getLogicalId(construct.node.defaultChild as never);
}
function actions(s: Statement): string[] {
  return Array.isArray(s.Action) ? s.Action : [s.Action];
}
function resourceList(s: Statement): unknown[] {
  return Array.isArray(s.Resource) ? s.Resource : [s.Resource];
}
/** Statements of the policies attached to a function's role. */
function statementsOf(fnName: (typeof NAMES)[number]): Statement[] {
  const fnRes = resources[logicalIdOf(stack.functions[fnName])]!;
  const roleId = (fnRes.Properties!.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  return ofType('AWS::IAM::Policy')
    .filter(([, p]) => (p.Properties!.Roles as { Ref: string }[]).some((r) => r.Ref === roleId))
    .flatMap(([, p]) => p.Properties!.PolicyDocument.Statement as Statement[]);
}
/** Every IAM statement anywhere in the template (policies, roles' inline policies, managed policies). */
function allStatements(): Statement[] {
  const out: Statement[] = [];
  for (const [, r] of Object.entries(resources)) {
    if (r.Type === 'AWS::IAM::Policy' || r.Type === 'AWS::IAM::ManagedPolicy') {
      out.push(...(r.Properties!.PolicyDocument.Statement as Statement[]));
    }
    if (r.Type === 'AWS::IAM::Role') {
      for (const p of (r.Properties!.Policies as { PolicyDocument: { Statement: Statement[] } }[] | undefined) ?? []) {
        out.push(...p.PolicyDocument.Statement);
      }
    }
  }
  return out;
}

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dgcl-infra-test-'));
  ({ stack, template, assembly } = synth({}, 'TestStack'));
  resources = template.toJSON().Resources as Record<string, Resource>;
});

afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

describe('resources', () => {
  it('has the expected resources and counts', () => {
    template.resourceCountIs('AWS::S3::Bucket', 1);
    template.resourceCountIs('AWS::DynamoDB::Table', 1);
    template.resourceCountIs('AWS::Lambda::Function', 4);
    template.resourceCountIs('AWS::Lambda::LayerVersion', 1);
    template.resourceCountIs('AWS::SQS::Queue', 6);
    template.resourceCountIs('AWS::Lambda::EventSourceMapping', 2);
    template.resourceCountIs('AWS::Events::Rule', 1);
    // 3 DLQs + 4 x (errors, throttles) + append queue age + append record failures.
    template.resourceCountIs('AWS::CloudWatch::Alarm', 13);
    template.resourceCountIs('AWS::SNS::Topic', 1);
    template.resourceCountIs('AWS::KMS::Key', 1);
    template.resourceCountIs('AWS::Logs::LogGroup', 4);
  });

  it('has the outputs clients need', () => {
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    for (const o of [
      'BucketName',
      'Root',
      'LeaseTableName',
      'AppendQueueUrl',
      'AppendDlqUrl',
      'ResumeTriggerQueueUrl',
      'ResumeTriggerDlqUrl',
      'ResumeQueueUrl',
      'ResumeDlqUrl',
      'AppendFunctionName',
      'FoldFunctionName',
      'ResumeFunctionName',
      'MaintenanceFunctionName',
      'AlarmTopicArn',
    ]) {
      expect(outputs[o], o).toBeDefined();
    }
    const bucketId = logicalIdOf(stack.bucket);
    expect(outputs.Root!.Value).toEqual({ 'Fn::Join': ['', ['s3://', { Ref: bucketId }, '/dgcl']] });
    expect(outputs.LeaseTableName!.Value).toEqual({ Ref: logicalIdOf(stack.table) });
    expect(outputs.ResumeQueueUrl!.Value).toEqual({ Ref: logicalIdOf(stack.resumeQueue) });
  });
});

describe('functions', () => {
  it('run on Node.js 22, x86_64, with the LanceDB layer and only the environment each handler reads', () => {
    const layerId = logicalIdOf(stack.layer);
    const fns = ofType('AWS::Lambda::Function');
    expect(fns).toHaveLength(4);
    for (const [id, fn] of fns) {
      const p = fn.Properties!;
      expect(p.Runtime, id).toBe('nodejs22.x');
      expect(p.Architectures, id).toEqual(['x86_64']);
      expect(p.Handler, id).toBe('index.handler');
      expect(p.Layers, id).toEqual([{ Ref: layerId }]);
      expect(p.MemorySize, id).toBeGreaterThanOrEqual(1024);
      expect(p.LoggingConfig?.LogGroup, id).toBeDefined();
    }
    const root = { 'Fn::Join': ['', ['s3://', { Ref: logicalIdOf(stack.bucket) }, '/dgcl']] };
    const table = { Ref: logicalIdOf(stack.table) };
    const queue = { Ref: logicalIdOf(stack.resumeQueue) };
    const expectedEnv: Record<(typeof NAMES)[number], Record<string, unknown>> = {
      // Every function gets the table: the writers for leases, markers and claims, the readers
      // for the item-marker check of point reads; only the writers choose a coordination store.
      append: { DGCL_ROOT: root, DGCL_LEASE_TABLE: table, DGCL_COORDINATION: 'table', POWERTOOLS_SERVICE_NAME: 'dgcl-append', POWERTOOLS_METRICS_NAMESPACE: 'dgcl' },
      // Fold publishes no metrics.
      fold: { DGCL_ROOT: root, DGCL_LEASE_TABLE: table, POWERTOOLS_SERVICE_NAME: 'dgcl-fold' },
      resume: { DGCL_ROOT: root, DGCL_LEASE_TABLE: table, DGCL_RESUME_QUEUE_URL: queue, POWERTOOLS_SERVICE_NAME: 'dgcl-resume', POWERTOOLS_METRICS_NAMESPACE: 'dgcl' },
      maintenance: { DGCL_ROOT: root, DGCL_LEASE_TABLE: table, DGCL_COORDINATION: 'table', POWERTOOLS_SERVICE_NAME: 'dgcl-maintenance', POWERTOOLS_METRICS_NAMESPACE: 'dgcl' },
    };
    for (const name of NAMES) {
      const p = resources[logicalIdOf(stack.functions[name])]!.Properties!;
      expect(p.Environment.Variables, name).toEqual(expectedEnv[name]);
      expect(p.Timeout).toBe(HANDLERS[name].timeout.toSeconds());
      expect(p.MemorySize).toBe(HANDLERS[name].memoryMiB);
    }
    template.hasResourceProperties('AWS::Lambda::LayerVersion', {
      CompatibleRuntimes: ['nodejs22.x'],
      CompatibleArchitectures: ['x86_64'],
    });
  });

  it('are ESM bundles that load LanceDB and Arrow from the layer through CommonJS, never by bare ESM import', () => {
    const assets = JSON.parse(
      fs.readFileSync(path.join(assembly.directory, 'TestStack.assets.json'), 'utf8'),
    ) as { files: Record<string, { source: { path: string } }> };
    for (const name of NAMES) {
      const key = resources[logicalIdOf(stack.functions[name])]!.Properties!.Code.S3Key as string;
      const dir = path.join(assembly.directory, assets.files[key.replace(/\.zip$/, '')]!.source.path);
      expect(fs.readdirSync(dir)).toEqual(['index.mjs']);
      const code = fs.readFileSync(path.join(dir, 'index.mjs'), 'utf8');
      // Stock Node's ESM loader ignores NODE_PATH: a bare import would not find the layer.
      for (const m of LAYER_MODULES) {
        // Neither the package nor any subpath of it.
        expect(code).not.toMatch(new RegExp(`(from|import)\\s*\\(?\\s*"${m}(/[^"]*)?"`));
      }
      for (const spec of LAYER_SPECIFIERS) expect(code).toContain(`loadLayerModule("${spec}")`); // functions/shared/layer.ts
      expect(code).toContain('createRequire');
      expect(code).not.toContain('RecordBatchReader'); // nothing of Arrow's code
    }
  });

  it('have a CommonJS shim for every layer specifier lib/ imports (the ones the layer builder traces)', () => {
    expect(Object.keys(LAYER_ALIASES).sort()).toEqual([...LAYER_SPECIFIERS].sort());
    for (const file of Object.values(LAYER_ALIASES)) expect(fs.existsSync(file), file).toBe(true);
  });

  it('fit under the unzipped size limit with their layer, and the check catches a breach', () => {
    const sizes = measureAssembly(assembly);
    expect(sizes).toHaveLength(1);
    const fns = sizes[0]!.functions;
    expect(fns).toHaveLength(4);
    for (const f of fns) {
      expect(f.codeBytes).toBeGreaterThan(0);
      expect(f.layerBytes).toBeGreaterThan(0);
      expect(f.totalBytes).toBe(f.codeBytes + f.layerBytes);
    }
    expect(() => assertFits(sizes)).not.toThrow();
    expect(formatSizes(sizes)).toMatch(/largest function \w+: code .* MB \+ layers .* MB = .* MB unzipped \(limit 262\.1 MB/);
    expect(() => assertFits(sizes, 100)).toThrow(/unzipped size limit/);
    expect(LAMBDA_UNZIPPED_LIMIT_BYTES).toBe(262_144_000);
  });
});

describe('IAM', () => {
  it('never grants s3 or dynamodb actions on "*" or wildcard actions', () => {
    const statements = allStatements();
    const data = statements.filter((s) => actions(s).some((a) => /^(s3|dynamodb):/.test(a)));
    expect(data.length).toBeGreaterThan(0);
    for (const s of data) {
      for (const a of actions(s)) expect(a, JSON.stringify(s)).not.toMatch(/^(s3|dynamodb):\*$|^\*$/);
      for (const r of resourceList(s)) {
        expect(r, JSON.stringify(s)).not.toBe('*');
        expect(JSON.stringify(r), JSON.stringify(s)).not.toMatch(/"arn:aws:(s3|dynamodb):[^"]*\*"$/);
      }
    }
    // Nothing grants *all* actions anywhere.
    for (const s of statements) expect(actions(s)).not.toContain('*');
  });

  it('scopes S3 objects to <prefix>/datagen_checkpoints/* and listing to that prefix', () => {
    const bucketArn = { 'Fn::GetAtt': [logicalIdOf(stack.bucket), 'Arn'] };
    const objects = { 'Fn::Join': ['', [bucketArn, '/dgcl/datagen_checkpoints/*']] };
    for (const name of NAMES) {
      const s3 = statementsOf(name).filter((s) => actions(s).some((a) => a.startsWith('s3:')));
      expect(s3.length, name).toBeGreaterThan(0);
      for (const s of s3) {
        if (actions(s).includes('s3:ListBucket')) {
          expect(actions(s)).toEqual(['s3:ListBucket']);
          expect(s.Resource).toEqual(bucketArn);
          expect(s.Condition).toEqual({
            StringLike: { 's3:prefix': ['dgcl/datagen_checkpoints', 'dgcl/datagen_checkpoints/*'] },
          });
        } else {
          expect(s.Resource, name).toEqual(objects);
        }
      }
      const all = s3.flatMap(actions);
      expect(all).toContain('s3:GetObject');
      expect(all).toContain('s3:ListBucket');
      const writes = HANDLERS[name].s3 === 'readwrite';
      expect(all.includes('s3:PutObject'), name).toBe(writes);
      expect(all.includes('s3:DeleteObject'), name).toBe(writes);
    }
  });

  it('grants the lease table actions (leases, item markers, claims) to append and maintenance, and only GetItem on it to fold and resume', () => {
    const tableArn = { 'Fn::GetAtt': [logicalIdOf(stack.table), 'Arn'] };
    expect(NAMES.filter((n) => HANDLERS[n].table === 'lease')).toEqual(['append', 'maintenance']);
    expect(NAMES.filter((n) => HANDLERS[n].table === 'read')).toEqual(['fold', 'resume']);
    const lease = [{ Effect: 'Allow', Action: ['dynamodb:BatchGetItem', 'dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'], Resource: tableArn }];
    // The item-marker check of point reads (and the log's sentinel): one read action, nothing written.
    const read = [{ Effect: 'Allow', Action: 'dynamodb:GetItem', Resource: tableArn }];
    const expected = { append: lease, fold: read, resume: read, maintenance: lease };
    for (const name of NAMES) {
      const ddb = statementsOf(name).filter((s) => actions(s).some((a) => a.startsWith('dynamodb:')));
      expect(ddb, name).toEqual(expected[name]);
      // No other statement names the table.
      const naming = statementsOf(name).filter((s) => JSON.stringify(s).includes(logicalIdOf(stack.table)));
      expect(naming, name).toEqual(expected[name]);
    }
  });

  it('writes logs only to the function\'s own log group, with no managed policy', () => {
    for (const name of NAMES) {
      const fn = resources[logicalIdOf(stack.functions[name])]!;
      const roleId = (fn.Properties!.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
      expect(resources[roleId]!.Properties!.ManagedPolicyArns, name).toBeUndefined();
      const logGroupId = (fn.Properties!.LoggingConfig.LogGroup as { Ref: string }).Ref;
      const logStatements = statementsOf(name).filter((s) => actions(s).some((a) => a.startsWith('logs:')));
      expect(logStatements, name).toEqual([
        { Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: { 'Fn::GetAtt': [logGroupId, 'Arn'] } },
      ]);
    }
    for (const [, r] of ofType('AWS::IAM::Role')) expect(JSON.stringify(r.Properties)).not.toContain('AWSLambdaBasicExecutionRole');
  });

  it('names no "*" resource in any IAM or resource policy (a KMS key policy\'s "*" is the key itself)', () => {
    const policyTypes = ['AWS::IAM::Policy', 'AWS::IAM::ManagedPolicy', 'AWS::IAM::Role', 'AWS::S3::BucketPolicy', 'AWS::SQS::QueuePolicy', 'AWS::SNS::TopicPolicy', 'AWS::KMS::Key'];
    const seen = new Set<string>();
    let checked = 0;
    for (const [id, r] of Object.entries(resources)) {
      seen.add(r.Type);
      const docs: { Statement: Statement[] }[] = [];
      if (r.Type === 'AWS::IAM::Role') docs.push(...((r.Properties!.Policies as { PolicyDocument: { Statement: Statement[] } }[] | undefined) ?? []).map((p) => p.PolicyDocument));
      else if (r.Type === 'AWS::KMS::Key') continue; // below
      else if (r.Properties?.PolicyDocument) docs.push(r.Properties.PolicyDocument);
      for (const s of docs.flatMap((d) => d.Statement)) {
        checked++;
        for (const res of resourceList(s)) {
          expect(res, `${id}: ${JSON.stringify(s)}`).not.toBe('*');
          expect(JSON.stringify(res), id).not.toMatch(/^"(arn:[^"]*:)?\*"$/);
        }
      }
    }
    expect(checked).toBeGreaterThanOrEqual(4 * 3 + 6 + 1 + 2); // functions' policies, queue, topic and bucket policies
    // Every policy-bearing type is covered by the check above.
    for (const t of seen) if (/::(Policy|ManagedPolicy|BucketPolicy|QueuePolicy|TopicPolicy)$/.test(t)) expect(policyTypes).toContain(t);
    // A key policy cannot name its own key ("*" there means this key); it may grant only the
    // account (CDK's default) and CloudWatch, which needs the key to publish alarms.
    const [[, key]] = ofType('AWS::KMS::Key') as [[string, Resource]];
    const keyStatements = key.Properties!.KeyPolicy.Statement as (Statement & { Principal: Record<string, unknown> })[];
    expect(keyStatements.map((s) => Object.keys(s.Principal)[0])).toEqual(['AWS', 'Service']);
    expect(keyStatements[1]).toMatchObject({ Principal: { Service: 'cloudwatch.amazonaws.com' }, Action: ['kms:Decrypt', 'kms:GenerateDataKey*'] });
  });

  it('lets only the resume function send, and only to the resume queue', () => {
    const senders = NAMES.filter((n) => statementsOf(n).some((s) => actions(s).includes('sqs:SendMessage')));
    expect(senders).toEqual(['resume']);
    const send = statementsOf('resume').filter((s) => actions(s).includes('sqs:SendMessage'));
    expect(send).toHaveLength(1);
    expect(send[0]!.Resource).toEqual({ 'Fn::GetAtt': [logicalIdOf(stack.resumeQueue), 'Arn'] });
    for (const s of allStatements()) {
      for (const a of actions(s)) expect(a).not.toBe('sqs:*');
    }
  });
});

describe('storage', () => {
  it('bucket: encrypted, no public access, retained, unversioned, multipart clean-up', () => {
    const [[, bucket]] = ofType('AWS::S3::Bucket') as [[string, Resource]];
    expect(bucket.DeletionPolicy).toBe('Retain');
    expect(bucket.UpdateReplacePolicy).toBe('Retain');
    const p = bucket.Properties!;
    expect(p.BucketEncryption.ServerSideEncryptionConfiguration[0].ServerSideEncryptionByDefault.SSEAlgorithm).toBe('AES256');
    expect(p.PublicAccessBlockConfiguration).toEqual({
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    });
    expect(p.VersioningConfiguration).toBeUndefined();
    expect(p.LifecycleConfiguration.Rules).toContainEqual(
      expect.objectContaining({ AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 }, Status: 'Enabled' }),
    );
  });

  it('bucket policy denies requests without TLS (and TLS < 1.2)', () => {
    const bucketId = logicalIdOf(stack.bucket);
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      Bucket: { Ref: bucketId },
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: 'Deny',
            Action: 's3:*',
            Principal: { AWS: '*' },
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
          }),
          Match.objectLike({
            Effect: 'Deny',
            Action: 's3:*',
            Condition: { NumericLessThan: { 's3:TlsVersion': 1.2 } },
          }),
        ]),
      },
    });
  });

  it('lease table: on demand, pk String, TTL on ttl, point-in-time recovery, retained', () => {
    const [[, table]] = ofType('AWS::DynamoDB::Table') as [[string, Resource]];
    expect(table.DeletionPolicy).toBe('Retain');
    expect(table.Properties).toMatchObject({
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    });
  });
});

describe('queues, schedule, alarms', () => {
  it('every work queue has a DLQ with a redrive policy; append is FIFO', () => {
    const dlqIds = new Set(Object.values(stack.deadLetterQueues).map((q) => logicalIdOf(q)));
    const work = [stack.appendQueue, stack.resumeTriggerQueue, stack.resumeQueue].map((q) => logicalIdOf(q));
    for (const id of work) {
      const rp = resources[id]!.Properties!.RedrivePolicy as { deadLetterTargetArn: { 'Fn::GetAtt': [string, string] }; maxReceiveCount: number };
      expect(rp, id).toBeDefined();
      expect(dlqIds.has(rp.deadLetterTargetArn['Fn::GetAtt'][0]), id).toBe(true);
      expect(rp.maxReceiveCount).toBeGreaterThanOrEqual(3);
    }
    for (const id of dlqIds) {
      expect(resources[id]!.Properties!.RedrivePolicy).toBeUndefined();
      expect(resources[id]!.Properties!.MessageRetentionPeriod).toBe(14 * 24 * 3600);
    }
    const append = resources[logicalIdOf(stack.appendQueue)]!.Properties!;
    expect(append).toMatchObject({ FifoQueue: true, ContentBasedDeduplication: true });
    expect(resources[logicalIdOf(stack.deadLetterQueues.append)]!.Properties!.FifoQueue).toBe(true);
    // Visibility timeout covers retries of a whole invocation.
    expect(append.VisibilityTimeout).toBeGreaterThanOrEqual(HANDLERS.append.timeout.toSeconds() * 6);
    for (const [, q] of ofType('AWS::SQS::Queue')) expect(q.Properties!.SqsManagedSseEnabled).toBe(true);
  });

  it('append and resume consume their queues with partial batch responses', () => {
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [logicalIdOf(stack.appendQueue), 'Arn'] },
      FunctionName: { Ref: logicalIdOf(stack.functions.append) },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      ScalingConfig: { MaximumConcurrency: DEFAULT_CONFIG.appendMaxConcurrency },
    });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [logicalIdOf(stack.resumeTriggerQueue), 'Arn'] },
      FunctionName: { Ref: logicalIdOf(stack.functions.resume) },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
  });

  it('reserves append\'s concurrency (direct invocations too) at the cap, and only append\'s', () => {
    for (const name of NAMES) {
      const p = resources[logicalIdOf(stack.functions[name])]!.Properties!;
      expect(p.ReservedConcurrentExecutions, name).toBe(name === 'append' ? DEFAULT_CONFIG.appendMaxConcurrency : undefined);
    }
    expect(DEFAULT_CONFIG.appendMaxConcurrency).toBeLessThanOrEqual(WRITER_SLOTS);
  });

  it('refuses an append concurrency above the writer slots of an experiment, naming both', () => {
    const { projectRoot, layerDir } = makeProject();
    const build = (n: unknown) => {
      const app = new App({ outdir: path.join(tmp, `cdk.out-conc-${String(n)}`), context: { ...CDK_CONTEXT, 'dgcl:appendMaxConcurrency': n, 'aws:cdk:bundling-stacks': [] } });
      return new DgclStack(app, 'Conc', { config: readConfig(app.node), projectRoot, layer: { dir: layerDir } });
    };
    expect(() => build(WRITER_SLOTS + 1)).toThrow(`dgcl:appendMaxConcurrency must be an integer in [2, ${WRITER_SLOTS}] (an experiment has ${WRITER_SLOTS} writer slots`);
    expect(() => build(WRITER_SLOTS + 1)).toThrow(/got 17$/);
    const ok = build(WRITER_SLOTS);
    Template.fromStack(ok).hasResourceProperties('AWS::Lambda::Function', { ReservedConcurrentExecutions: WRITER_SLOTS });
    Template.fromStack(ok).hasResourceProperties('AWS::Lambda::EventSourceMapping', { ScalingConfig: { MaximumConcurrency: WRITER_SLOTS } });
  });

  it('runs maintenance every 15 minutes with an empty (all experiments) event', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(15 minutes)',
      State: 'ENABLED',
      Targets: [
        Match.objectLike({
          Arn: { 'Fn::GetAtt': [logicalIdOf(stack.functions.maintenance), 'Arn'] },
          Input: '{}',
        }),
      ],
    });
    template.hasResourceProperties('AWS::Lambda::Permission', {
      Principal: 'events.amazonaws.com',
      FunctionName: { 'Fn::GetAtt': [logicalIdOf(stack.functions.maintenance), 'Arn'] },
    });
  });

  it('alarms on every DLQ holding messages, every function error and throttle, the append queue age and record failures, notifying the topic', () => {
    const alarms = ofType('AWS::CloudWatch::Alarm').map(([, a]) => a.Properties!);
    const topic = { Ref: logicalIdOf(stack.alarmTopic) };
    for (const a of alarms) {
      expect(a.Threshold).toBe(a.MetricName === 'ApproximateAgeOfOldestMessage' ? APPEND_QUEUE_AGE_ALARM.toSeconds() : 0);
      expect(a.ComparisonOperator).toBe('GreaterThanThreshold');
      expect(a.AlarmActions).toEqual([topic]);
    }
    const throttles = alarms.filter((a) => a.MetricName === 'Throttles' && a.Namespace === 'AWS/Lambda');
    expect(throttles.map((a) => a.Dimensions[0].Value.Ref).sort()).toEqual(NAMES.map((n) => logicalIdOf(stack.functions[n])).sort());
    const age = alarms.filter((a) => a.MetricName === 'ApproximateAgeOfOldestMessage');
    expect(age).toHaveLength(1);
    expect(age[0]).toMatchObject({ Namespace: 'AWS/SQS', Statistic: 'Maximum', Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [logicalIdOf(stack.appendQueue), 'QueueName'] } }] });
    // The custom metric functions/append.ts publishes (Powertools: dimension service = POWERTOOLS_SERVICE_NAME).
    const records = alarms.filter((a) => a.MetricName === RECORD_FAILURES_METRIC);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ Namespace: METRICS_NAMESPACE, Statistic: 'Sum', Dimensions: [{ Name: 'service', Value: 'dgcl-append' }] });
    const appendEnv = resources[logicalIdOf(stack.functions.append)]!.Properties!.Environment.Variables;
    expect([appendEnv.POWERTOOLS_METRICS_NAMESPACE, appendEnv.POWERTOOLS_SERVICE_NAME]).toEqual([METRICS_NAMESPACE, 'dgcl-append']);
    const dlqAlarms = alarms.filter((a) => a.MetricName === 'ApproximateNumberOfMessagesVisible');
    expect(dlqAlarms.map((a) => a.Dimensions[0].Value['Fn::GetAtt'][0]).sort()).toEqual(
      Object.values(stack.deadLetterQueues)
        .map((q) => logicalIdOf(q))
        .sort(),
    );
    const errAlarms = alarms.filter((a) => a.MetricName === 'Errors' && a.Namespace === 'AWS/Lambda');
    expect(errAlarms.map((a) => a.Dimensions[0].Value.Ref).sort()).toEqual(
      NAMES.map((n) => logicalIdOf(stack.functions[n])).sort(),
    );
  });
});

describe('alarm topic', () => {
  it('is encrypted with a rotating customer managed key that CloudWatch may use', () => {
    const [[keyId, key]] = ofType('AWS::KMS::Key') as [[string, Resource]];
    expect(key.Properties!.EnableKeyRotation).toBe(true);
    template.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: { 'Fn::GetAtt': [keyId, 'Arn'] } });
    expect(key.Properties!.KeyPolicy.Statement).toContainEqual(
      expect.objectContaining({ Effect: 'Allow', Principal: { Service: 'cloudwatch.amazonaws.com' }, Action: ['kms:Decrypt', 'kms:GenerateDataKey*'] }),
    );
  });
});

describe('configuration', () => {
  it('reads context values (strings from -c) and rejects bad ones', () => {
    const app = new App({
      context: {
        'dgcl:prefix': 'team/a',
        'dgcl:maintenanceRateMinutes': '5',
        'dgcl:bucketVersioning': 'true',
        'dgcl:appendMaxConcurrency': 4,
        'dgcl:coordination': 'objects',
      },
    });
    const c = readConfig(app.node);
    expect(c).toMatchObject({ prefix: 'team/a', maintenanceRateMinutes: 5, bucketVersioning: true, appendMaxConcurrency: 4, coordination: 'objects' });
    expect(() => readConfig(new App({ context: { 'dgcl:coordination': 'dynamo' } }).node)).toThrow(/coordination/);
    expect(readConfig(new App().node)).toEqual(DEFAULT_CONFIG);
    expect(() => readConfig(new App({ context: { 'dgcl:maintenanceRateMinutes': '0' } }).node)).toThrow(/maintenanceRateMinutes/);
    expect(() => readConfig(new App({ context: { 'dgcl:bucketVersioning': 'yes' } }).node)).toThrow(/bucketVersioning/);
    expect(normalizePrefix('')).toBe('');
    for (const bad of ['/a', 'a/', 'a//b', 'a/../b', 'a b']) expect(() => normalizePrefix(bad)).toThrow(/prefix/);
  });

  it('honours prefix, schedule and versioning from context', () => {
    const other = synth(
      {
        'dgcl:prefix': '',
        'dgcl:maintenanceRateMinutes': '5',
        'dgcl:bucketVersioning': 'true',
        // No stack is bundled (what `cdk deploy -e` does for the stacks it skips): faster.
        'aws:cdk:bundling-stacks': [],
      },
      'OtherStack',
    );
    const res = other.template.toJSON().Resources as Record<string, Resource>;
    const bucketId = other.stack.getLogicalId(other.stack.bucket.node.defaultChild as never);
    other.template.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(5 minutes)' });
    other.template.hasResourceProperties('AWS::S3::Bucket', {
      VersioningConfiguration: { Status: 'Enabled' },
      LifecycleConfiguration: {
        Rules: Match.arrayWith([Match.objectLike({ NoncurrentVersionExpiration: { NoncurrentDays: 7 } })]),
      },
    });
    const fn = Object.values(res).find((r) => r.Type === 'AWS::Lambda::Function')!;
    expect(fn.Properties!.Environment.Variables.DGCL_ROOT).toEqual({ 'Fn::Join': ['', ['s3://', { Ref: bucketId }]] });
    const st = Object.values(res)
      .filter((r) => r.Type === 'AWS::IAM::Policy')
      .flatMap((p) => p.Properties!.PolicyDocument.Statement as Statement[]);
    expect(st.find((s) => actions(s).includes('s3:ListBucket'))!.Condition).toEqual({
      StringLike: { 's3:prefix': ['datagen_checkpoints', 'datagen_checkpoints/*'] },
    });
    expect(st.find((s) => actions(s).includes('s3:GetObject'))!.Resource).toEqual({
      'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, '/datagen_checkpoints/*']],
    });
  });

  it('names the missing handler entries before bundling anything', () => {
    const { projectRoot, layerDir } = makeProject();
    fs.mkdirSync(path.join(projectRoot, 'empty'), { recursive: true });
    const app = new App({ outdir: path.join(tmp, 'cdk.out-missing'), context: { ...CDK_CONTEXT, 'dgcl:functionsDir': 'empty' } });
    expect(
      () => new DgclStack(app, 'Missing', { config: readConfig(app.node), projectRoot, layer: { dir: layerDir } }),
    ).toThrow(/handler entries missing: .*empty\/append\.ts, .*empty\/fold\.ts, .*empty\/resume\.ts, .*empty\/maintenance\.ts/);
  });

  it('cdk.json runs the app with tsx', () => {
    const cdkJson = JSON.parse(fs.readFileSync(path.join(REPO, 'cdk.json'), 'utf8')) as { app: string };
    expect(cdkJson.app).toBe('npx tsx infra/app.ts');
  });
});
