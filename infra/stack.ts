/**
 * The datagen checkpoint log on AWS: the log bucket, the lease table, the four handlers with
 * their LanceDB layer, the queues (each with a DLQ), the maintenance schedule, the resume sweep
 * schedule (off by default), alarms, outputs.
 * See docs/design/deployment.md for the choices made here.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AssetHashType, CfnOutput, Duration, RemovalPolicy, Stack, Tags, type StackProps } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { LogLevel, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subs from 'aws-cdk-lib/aws-sns-subscriptions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { METRICS_NAMESPACE, RECORD_FAILURES_METRIC } from '../functions/shared/metric-names.ts';
import { DEFAULT_SLOTS } from '../lib/lease/slots.ts';
import type { DgclConfig } from './config.ts';
import { addResumeSweeps } from './resume-sweep.ts';

/** Packages the functions load from the layer instead of bundling them. */
export const LAYER_MODULES = ['@lancedb/lancedb', 'apache-arrow'];

const LAYER_SHIMS = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'functions', 'shared', 'layer');

/**
 * Every specifier of a layer package that lib/ imports, and the CommonJS shim the bundles load it
 * through instead (functions/shared/layer.ts: `require` from NODE_PATH / /opt/nodejs/node_modules).
 * A bare ESM `import` of a layer package would resolve only through the Lambda runtime's patched
 * loader, never on stock Node 22; test/infra/lambda-layout.test.ts runs the bundles that way.
 */
export const LAYER_ALIASES: Record<string, string> = {
  '@lancedb/lancedb': path.join(LAYER_SHIMS, 'lancedb.cjs'),
  'apache-arrow': path.join(LAYER_SHIMS, 'apache-arrow.cjs'),
  'apache-arrow/visitor/vectorassembler': path.join(LAYER_SHIMS, 'vectorassembler.cjs'),
};

/** Writer shard slots of an experiment (lib/lease/slots.ts); each append container holds one. */
export const WRITER_SLOTS = DEFAULT_SLOTS;

/** ESM bundles have no `require`; some bundled CommonJS code calls it (e.g. for Node built-ins). */
const REQUIRE_SHIM =
  "import { createRequire as __dgclCreateRequire } from 'node:module'; const require = __dgclCreateRequire(import.meta.url);";

/** What a writer or maintainer sends to the lease table (leases, item markers, claims). */
export const LEASE_TABLE_ACTIONS = ['dynamodb:BatchGetItem', 'dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'];

/**
 * What a read path sends to the lease table: a consistent GetItem of an item's marker before and
 * after a point read, and of the log's sentinel once per log object (lib/coord/dynamo.ts `get`);
 * stats() reads slot leases with GetItem too (lib/lease/dynamo.ts `read`). Only writes batch
 * their marker reads (BatchGetItem).
 */
export const READ_TABLE_ACTIONS = ['dynamodb:GetItem'];

/** The append queue's oldest message may be this old before the alarm fires. */
export const APPEND_QUEUE_AGE_ALARM = Duration.minutes(15);

export type HandlerName = 'append' | 'fold' | 'resume' | 'maintenance';

interface HandlerSpec {
  memoryMiB: number;
  timeout: Duration;
  /** Object access below `<prefix>/datagen_checkpoints/`. */
  s3: 'read' | 'readwrite';
  /**
   * Lease table access, on its ARN only: `lease` (LEASE_TABLE_ACTIONS) for the functions that
   * take writer or maintainer leases and write item markers and claims; `read`
   * (READ_TABLE_ACTIONS: GetItem) for the read paths, whose point reads check the item's marker
   * there (docs/design/invariants.md, "Reads"); `none`: no access.
   */
  table: 'lease' | 'read' | 'none';
  /** Environment variables the handler reads beyond DGCL_ROOT and the Powertools ones. */
  env: ReadonlyArray<'DGCL_LEASE_TABLE' | 'DGCL_COORDINATION' | 'DGCL_RESUME_QUEUE_URL'>;
  /** Publishes Powertools metrics (sets POWERTOOLS_METRICS_NAMESPACE). */
  metrics: boolean;
  description: string;
}

/**
 * Sizing: Lambda gives one full vCPU at 1,769 MiB; Lance (Arrow decoding, compaction) is
 * CPU-bound once objects are fetched, and the native module alone is most of the layer, mapped.
 */
export const HANDLERS: Record<HandlerName, HandlerSpec> = {
  append: {
    memoryMiB: 1769,
    timeout: Duration.seconds(60),
    s3: 'readwrite',
    table: 'lease',
    env: ['DGCL_LEASE_TABLE', 'DGCL_COORDINATION'],
    metrics: true,
    description: 'Appends checkpoint batches (direct invocation or the append FIFO queue)',
  },
  fold: {
    memoryMiB: 1769,
    timeout: Duration.seconds(30),
    s3: 'read',
    table: 'read',
    env: ['DGCL_LEASE_TABLE'],
    metrics: false,
    description: 'Folds items, lists items, returns trajectories (read-only)',
  },
  resume: {
    memoryMiB: 1024,
    timeout: Duration.seconds(60),
    s3: 'read',
    table: 'read',
    env: ['DGCL_LEASE_TABLE', 'DGCL_RESUME_QUEUE_URL'],
    metrics: true,
    description: 'Folds items and sends resume instructions to the resume queue',
  },
  maintenance: {
    memoryMiB: 3008,
    timeout: Duration.minutes(15),
    s3: 'readwrite',
    table: 'lease',
    env: ['DGCL_LEASE_TABLE', 'DGCL_COORDINATION'],
    metrics: true,
    description: 'Scheduled maintenance: merge orphaned shards, compact, index, clean up',
  },
};

export interface LayerSource {
  /** Folder holding `nodejs/node_modules/...` (see infra/lancedb-layer.ts). */
  dir: string;
  /** Content fingerprint; when given, CDK does not re-hash the layer's folder on every synth. */
  fingerprint?: string;
  description?: string;
}

export interface DgclStackProps extends StackProps {
  config: DgclConfig;
  /** The project root: holds package-lock.json, tsconfig.json and (by default) functions/. */
  projectRoot: string;
  layer: LayerSource;
}

export class DgclStack extends Stack {
  readonly bucket: s3.Bucket;
  readonly table: dynamodb.Table;
  readonly functions: Record<HandlerName, NodejsFunction>;
  readonly layer: lambda.LayerVersion;
  readonly appendQueue: sqs.Queue;
  readonly resumeTriggerQueue: sqs.Queue;
  readonly resumeQueue: sqs.Queue;
  readonly deadLetterQueues: Record<'append' | 'resumeTrigger' | 'resume', sqs.Queue>;
  readonly alarmTopic: sns.Topic;
  /** `s3://<bucket>/<prefix>` (a token until deployment). */
  readonly root: string;

  constructor(scope: Construct, id: string, props: DgclStackProps) {
    super(scope, id, {
      description: 'datagen-checkpoint-log: Lance checkpoint log on S3, lease table, handlers, queues',
      ...props,
    });
    const cfg = props.config;
    // Each concurrent append container holds a writer shard slot of every experiment it writes
    // to: more containers than slots would only queue on slot leases (and time out).
    if (!Number.isInteger(cfg.appendMaxConcurrency) || cfg.appendMaxConcurrency < 2 || cfg.appendMaxConcurrency > WRITER_SLOTS) {
      throw new Error(
        `dgcl:appendMaxConcurrency must be an integer in [2, ${WRITER_SLOTS}] (an experiment has ${WRITER_SLOTS} writer slots ` +
          `and every concurrent append invocation holds one), got ${cfg.appendMaxConcurrency}`,
      );
    }
    Tags.of(this).add('project', 'datagen-checkpoint-log');

    // ---------------------------------------------------------------- storage
    this.bucket = new s3.Bucket(this, 'LogBucket', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      minimumTLSVersion: 1.2,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      // Lance keeps its own versions (one manifest per commit) and deletes superseded files on
      // cleanup; S3 versioning would keep every compacted-away fragment as a noncurrent version.
      versioned: cfg.bucketVersioning,
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [
        // A Lambda that times out mid-upload leaves parts behind that are billed until aborted.
        { id: 'abort-incomplete-multipart-uploads', abortIncompleteMultipartUploadAfter: Duration.days(1) },
        ...(cfg.bucketVersioning
          ? [
              {
                id: 'expire-noncurrent-versions',
                noncurrentVersionExpiration: Duration.days(cfg.noncurrentVersionDays),
                expiredObjectDeleteMarker: true,
              },
            ]
          : []),
      ],
    });

    this.table = new dynamodb.Table(this, 'LeaseTable', {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: 'ttl',
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy: RemovalPolicy.RETAIN,
    });

    const keyRoot = cfg.prefix ? `${cfg.prefix}/datagen_checkpoints` : 'datagen_checkpoints';
    this.root = cfg.prefix ? `s3://${this.bucket.bucketName}/${cfg.prefix}` : `s3://${this.bucket.bucketName}`;

    // ---------------------------------------------------------------- queues
    const queueDefaults = {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    } as const;
    const dlq = (qid: string, fifo: boolean): sqs.Queue =>
      new sqs.Queue(this, qid, { ...queueDefaults, fifo: fifo || undefined, retentionPeriod: Duration.days(14) });

    const appendDlq = dlq('AppendDlq', true);
    this.appendQueue = new sqs.Queue(this, 'AppendQueue', {
      ...queueDefaults,
      // FIFO, MessageGroupId = root item id: one item's batches reach one invocation at a time
      // (one owner per item); high-throughput FIFO scopes dedup and throughput per group.
      fifo: true,
      contentBasedDeduplication: true,
      deduplicationScope: sqs.DeduplicationScope.MESSAGE_GROUP,
      fifoThroughputLimit: sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
      visibilityTimeout: Duration.seconds(HANDLERS.append.timeout.toSeconds() * 6),
      retentionPeriod: Duration.days(4),
      deadLetterQueue: { queue: appendDlq, maxReceiveCount: 5 },
    });

    const resumeTriggerDlq = dlq('ResumeTriggerDlq', false);
    this.resumeTriggerQueue = new sqs.Queue(this, 'ResumeTriggerQueue', {
      ...queueDefaults,
      visibilityTimeout: Duration.seconds(HANDLERS.resume.timeout.toSeconds() * 6),
      retentionPeriod: Duration.days(4),
      deadLetterQueue: { queue: resumeTriggerDlq, maxReceiveCount: 3 },
    });

    // Resume instructions for pipeline workers. Standard: the resume handler need not set a
    // MessageGroupId; duplicates are harmless (appends are idempotent per checkpoint).
    const resumeDlq = dlq('ResumeDlq', false);
    this.resumeQueue = new sqs.Queue(this, 'ResumeQueue', {
      ...queueDefaults,
      visibilityTimeout: Duration.minutes(5),
      retentionPeriod: Duration.days(4),
      deadLetterQueue: { queue: resumeDlq, maxReceiveCount: 5 },
    });
    this.deadLetterQueues = { append: appendDlq, resumeTrigger: resumeTriggerDlq, resume: resumeDlq };

    // ---------------------------------------------------------------- layer + functions
    this.layer = new lambda.LayerVersion(this, 'LancedbLayer', {
      code: lambda.Code.fromAsset(
        props.layer.dir,
        props.layer.fingerprint
          ? { assetHash: props.layer.fingerprint, assetHashType: AssetHashType.CUSTOM }
          : {},
      ),
      compatibleRuntimes: [lambda.Runtime.NODEJS_22_X],
      compatibleArchitectures: [lambda.Architecture.X86_64],
      description: props.layer.description ?? 'LanceDB (native linux-x64-gnu) + apache-arrow',
    });

    // docs/design/handlers.md, "Configuration (environment)": each function gets only the variables it reads (HANDLERS).
    const optionalEnv: Record<HandlerSpec['env'][number], string> = {
      DGCL_LEASE_TABLE: this.table.tableName,
      DGCL_COORDINATION: cfg.coordination,
      DGCL_RESUME_QUEUE_URL: this.resumeQueue.queueUrl,
    };
    const functionsDir = path.resolve(props.projectRoot, cfg.functionsDir);
    const depsLockFilePath = path.join(props.projectRoot, 'package-lock.json');

    const missing = (Object.keys(HANDLERS) as HandlerName[])
      .map((name) => path.join(functionsDir, `${name}.ts`))
      .filter((entry) => !fs.existsSync(entry));
    if (missing.length > 0) {
      throw new Error(
        `handler entries missing: ${missing.join(', ')} (functions/{append,fold,resume,maintenance}.ts each export \`handler\`)`,
      );
    }

    const make = (name: HandlerName): NodejsFunction => {
      const spec = HANDLERS[name];
      const entry = path.join(functionsDir, `${name}.ts`);
      const id = `${name[0]!.toUpperCase()}${name.slice(1)}Function`;
      const logGroup = new logs.LogGroup(this, `${id}Logs`, {
        retention: logs.RetentionDays.ONE_MONTH,
        removalPolicy: RemovalPolicy.DESTROY,
      });
      // Our own role instead of AWSLambdaBasicExecutionRole (logs on `*`): the function writes
      // only to its own log group.
      const role = new iam.Role(this, `${id}Role`, {
        assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
        description: `dgcl ${name} handler`,
      });
      logGroup.grantWrite(role);
      const environment: Record<string, string> = {
        DGCL_ROOT: this.root,
        // Read by the Powertools logger (and metrics) of functions/shared/observability.ts.
        POWERTOOLS_SERVICE_NAME: `dgcl-${name}`,
      };
      for (const v of spec.env) environment[v] = optionalEnv[v];
      if (spec.metrics) environment.POWERTOOLS_METRICS_NAMESPACE = METRICS_NAMESPACE;
      const fn = new NodejsFunction(this, id, {
        entry,
        handler: 'handler',
        runtime: lambda.Runtime.NODEJS_22_X,
        // The shipped native module is linux-x64-gnu.
        architecture: lambda.Architecture.X86_64,
        memorySize: spec.memoryMiB,
        timeout: spec.timeout,
        description: spec.description,
        projectRoot: props.projectRoot,
        depsLockFilePath: fs.existsSync(depsLockFilePath) ? depsLockFilePath : undefined,
        layers: [this.layer],
        role,
        environment,
        logGroup,
        // Append: caps direct invocations too (the event source's maxConcurrency caps only SQS).
        ...(name === 'append' ? { reservedConcurrentExecutions: cfg.appendMaxConcurrency } : {}),
        bundling: {
          // Local esbuild only. No `nodeModules` (it runs `npm ci`, which fails with LanceDB's
          // lock entries here): LanceDB and Arrow come from the layer.
          forceDockerBundling: false,
          format: OutputFormat.ESM,
          target: 'node22',
          mainFields: ['module', 'main'],
          // The AWS SDK v3 is bundled (the pinned version, not the runtime's). The layer's packages
          // are loaded through CommonJS shims (LAYER_ALIASES), never by a bare ESM import; they
          // stay external as a backstop, so nothing of them is ever bundled.
          externalModules: LAYER_MODULES,
          esbuildArgs: { '--alias': Object.entries(LAYER_ALIASES).map(([spec, file]) => `${spec}=${file}`) },
          banner: REQUIRE_SHIM,
          minify: false,
          sourceMap: false,
          logLevel: LogLevel.WARNING,
        },
      });

      // S3: objects below <prefix>/datagen_checkpoints/ only; listing only of that prefix. The
      // prefix-conditioned ListBucket also makes S3 answer 404 (not 403) for a missing key there,
      // which Lance relies on.
      const objects = this.bucket.arnForObjects(`${keyRoot}/*`);
      const objectActions =
        spec.s3 === 'readwrite'
          ? ['s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload']
          : ['s3:GetObject'];
      fn.addToRolePolicy(new iam.PolicyStatement({ actions: objectActions, resources: [objects] }));
      fn.addToRolePolicy(
        new iam.PolicyStatement({
          actions: ['s3:ListBucket'],
          resources: [this.bucket.bucketArn],
          conditions: { StringLike: { 's3:prefix': [keyRoot, `${keyRoot}/*`] } },
        }),
      );
      // The lease store sends GetItem and UpdateItem (conditional); the logs' item markers and
      // claims in the same table (lib/coord/dynamo.ts) add BatchGetItem, PutItem and DeleteItem.
      // Read paths take no lease and write nothing there: their point reads read the item's
      // marker, and the log's sentinel, with GetItem (refused, they would go without the check).
      if (spec.table !== 'none') {
        const actions = spec.table === 'lease' ? LEASE_TABLE_ACTIONS : READ_TABLE_ACTIONS;
        fn.addToRolePolicy(new iam.PolicyStatement({ actions, resources: [this.table.tableArn] }));
      }
      return fn;
    };

    this.functions = {
      append: make('append'),
      fold: make('fold'),
      resume: make('resume'),
      maintenance: make('maintenance'),
    };
    const { append, resume, maintenance } = this.functions;

    append.addEventSource(
      new SqsEventSource(this.appendQueue, {
        batchSize: 10,
        reportBatchItemFailures: true,
        // Each concurrent invocation holds a writer shard slot; reads union every shard.
        maxConcurrency: cfg.appendMaxConcurrency,
      }),
    );
    resume.addEventSource(
      new SqsEventSource(this.resumeTriggerQueue, {
        batchSize: 10,
        maxBatchingWindow: Duration.seconds(5),
        reportBatchItemFailures: true,
      }),
    );
    this.resumeQueue.grantSendMessages(resume);

    // ---------------------------------------------------------------- maintenance schedule
    const rate = Duration.minutes(cfg.maintenanceRateMinutes);
    const schedule = new events.Rule(this, 'MaintenanceSchedule', {
      description: `Runs dgcl maintenance every ${cfg.maintenanceRateMinutes} minutes`,
      schedule: events.Schedule.rate(rate),
    });
    schedule.addTarget(
      new targets.LambdaFunction(maintenance, {
        // {} = every experiment under the root.
        event: events.RuleTargetInput.fromObject({}),
        retryAttempts: 2,
        maxEventAge: rate,
      }),
    );
    // The next tick retries; no asynchronous retries that would pile up behind the lease.
    maintenance.configureAsyncInvoke({ retryAttempts: 0 });

    // ---------------------------------------------------------------- resume sweep schedule
    addResumeSweeps(this, resume, cfg.resumeSweep);

    // ---------------------------------------------------------------- alarms
    // A customer managed key: CloudWatch cannot publish to a topic under the AWS managed aws/sns key.
    const alarmKey = new kms.Key(this, 'AlarmTopicKey', {
      description: 'dgcl alarm topic',
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    alarmKey.addToResourcePolicy(
      new iam.PolicyStatement({
        principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'], // in a key policy, "*" is this key
        conditions: { StringEquals: { 'aws:SourceAccount': this.account } },
      }),
    );
    this.alarmTopic = new sns.Topic(this, 'AlarmTopic', { displayName: 'dgcl alarms', enforceSSL: true, masterKey: alarmKey });
    if (cfg.alarmEmail) this.alarmTopic.addSubscription(new subs.EmailSubscription(cfg.alarmEmail));
    const notify = new cwActions.SnsAction(this.alarmTopic);

    const dlqLabels: Record<keyof DgclStack['deadLetterQueues'], string> = {
      append: 'Append',
      resumeTrigger: 'ResumeTrigger',
      resume: 'Resume',
    };
    for (const [key, queue] of Object.entries(this.deadLetterQueues) as [keyof typeof dlqLabels, sqs.Queue][]) {
      const alarm = new cloudwatch.Alarm(this, `${dlqLabels[key]}DlqNotEmpty`, {
        alarmDescription: `Messages in the ${dlqLabels[key]} dead-letter queue`,
        metric: queue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(5), statistic: 'Maximum' }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      alarm.addAlarmAction(notify);
    }
    for (const [name, fn] of Object.entries(this.functions)) {
      const label = `${name[0]!.toUpperCase()}${name.slice(1)}`;
      const alarm = new cloudwatch.Alarm(this, `${label}Errors`, {
        alarmDescription: `Errors of the ${name} handler`,
        metric: fn.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      alarm.addAlarmAction(notify);
    }

    const alarmOn = (aid: string, description: string, metric: cloudwatch.IMetric, threshold = 0): void => {
      new cloudwatch.Alarm(this, aid, {
        alarmDescription: description,
        metric,
        threshold,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }).addAlarmAction(notify);
    };
    for (const [name, fn] of Object.entries(this.functions)) {
      const label = `${name[0]!.toUpperCase()}${name.slice(1)}`;
      alarmOn(`${label}Throttles`, `Throttled invocations of the ${name} handler`, fn.metricThrottles({ period: Duration.minutes(5), statistic: 'Sum' }));
    }
    alarmOn(
      'AppendQueueAge',
      `The append queue's oldest message is older than ${APPEND_QUEUE_AGE_ALARM.toMinutes()} minutes (appends are not keeping up or are failing)`,
      this.appendQueue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(5), statistic: 'Maximum' }),
      APPEND_QUEUE_AGE_ALARM.toSeconds(),
    );
    // Record failures at once, not ~maxReceiveCount x visibility timeout later via the DLQ.
    alarmOn(
      'AppendRecordFailures',
      'SQS records the append handler reported failed (invalid or not durable; they are redelivered)',
      new cloudwatch.Metric({
        namespace: METRICS_NAMESPACE,
        metricName: RECORD_FAILURES_METRIC,
        dimensionsMap: { service: 'dgcl-append' },
        period: Duration.minutes(5),
        statistic: 'Sum',
      }),
    );

    // ---------------------------------------------------------------- outputs
    const out = (oid: string, value: string, description: string): void => {
      new CfnOutput(this, oid, { value, description });
    };
    out('BucketName', this.bucket.bucketName, 'Log bucket');
    out('Root', this.root, 'DGCL_ROOT for clients (s3://bucket/prefix)');
    out('LeaseTableName', this.table.tableName, 'DGCL_LEASE_TABLE. Logs written with another table (a redeploy, another account) are made writable with it by `dgcl repair` (docs/operations.md, "Repairing a log")');
    out('AppendQueueUrl', this.appendQueue.queueUrl, 'Append queue (FIFO; MessageGroupId = root item id)');
    out('AppendDlqUrl', appendDlq.queueUrl, 'Append dead-letter queue');
    out('ResumeTriggerQueueUrl', this.resumeTriggerQueue.queueUrl, 'Resume trigger queue');
    out('ResumeTriggerDlqUrl', resumeTriggerDlq.queueUrl, 'Resume trigger dead-letter queue');
    out('ResumeQueueUrl', this.resumeQueue.queueUrl, 'DGCL_RESUME_QUEUE_URL: resume instructions');
    out('ResumeDlqUrl', resumeDlq.queueUrl, 'Resume instructions dead-letter queue');
    for (const [name, fn] of Object.entries(this.functions)) {
      out(`${name[0]!.toUpperCase()}${name.slice(1)}FunctionName`, fn.functionName, `The ${name} handler`);
    }
    out('AlarmTopicArn', this.alarmTopic.topicArn, 'SNS topic the alarms notify');
  }
}
