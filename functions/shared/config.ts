/**
 * Handler configuration from the environment (docs/design/handlers.md):
 *  - DGCL_ROOT: `s3://bucket/prefix`, `file:///abs/dir` or a local path (required);
 *  - DGCL_LEASE_TABLE: DynamoDB lease table (required by append and maintenance on s3:// roots,
 *    which take writer / maintainer leases; the read paths fold and resume take none, but are
 *    given it for the item-marker check of their point reads, and read without the check when it
 *    is not set; local roots keep their leases beside the logs);
 *  - DGCL_COORDINATION: where new logs keep item markers and claims, `table` (default) or
 *    `objects` (append and maintenance; read by openLog itself, README "Configuration");
 *  - DGCL_RESUME_QUEUE_URL: where the resume handler sends instructions (resume only);
 *  - the AWS standard variables (region, credentials, AWS_ENDPOINT_URL_S3/_DYNAMODB/_SQS).
 * Tuning (optional, milliseconds): DGCL_LEASE_TTL_MS, DGCL_MERGE_EVERY_MS.
 *
 * Read on every invocation (a few string checks): nothing is cached across a change of
 * environment, which keeps tests and the local invoke script honest.
 */
import { DgclError } from '../../lib/errors.ts';
import { parseRoot, type Env, type Location } from '../../lib/storage/location.ts';

/**
 * The deployment is wrong (a variable is missing or malformed): no retry helps, and the input
 * was not at fault. `code` is INTERNAL on purpose: Step Functions `Catch` rules written for
 * InvalidInputError must not swallow it.
 */
export class ConfigurationError extends DgclError {
  override readonly name = 'ConfigurationError';
  readonly code = 'INTERNAL' as const;
  readonly retryable = false;
  /** The environment variable at fault. */
  readonly variable: string;
  constructor(variable: string, message: string, options?: { cause?: unknown }) {
    super(`${variable}: ${message}`, options);
    this.variable = variable;
  }
}

export interface HandlerConfig {
  /** DGCL_ROOT as given. */
  root: string;
  location: Location;
  /** DGCL_LEASE_TABLE (always set for s3:// roots when `leases` was asked for). */
  leaseTable: string | undefined;
  /** DGCL_RESUME_QUEUE_URL, if set (`requireResumeQueueUrl` checks it). */
  resumeQueueUrl: string | undefined;
  /** Upper bound of writer and maintainer lease durations (default 60 s). */
  leaseTtlMaxMs: number;
  /** A warm append container merges its own shard when its last merge is older than this. */
  mergeEveryMs: number;
  env: Env;
}

export const CONFIG_DEFAULTS = {
  leaseTtlMaxMs: 60_000,
  mergeEveryMs: 5 * 60_000,
} as const;

export interface ReadConfigOptions {
  /** The handler takes leases (append, maintenance): an s3:// root then needs DGCL_LEASE_TABLE. */
  leases?: boolean;
}

export function readConfig(env: Env = process.env, options: ReadConfigOptions = {}): HandlerConfig {
  const root = nonEmpty(env.DGCL_ROOT);
  if (root === undefined) {
    throw new ConfigurationError('DGCL_ROOT', 'is not set (expected s3://bucket/prefix, file:///abs/dir or a local path)');
  }
  let location: Location;
  try {
    location = parseRoot(root);
  } catch (e) {
    throw new ConfigurationError('DGCL_ROOT', e instanceof Error ? e.message : String(e), { cause: e });
  }
  const coordination = nonEmpty(env.DGCL_COORDINATION);
  if (coordination !== undefined && coordination !== 'table' && coordination !== 'objects') {
    // openLog would refuse it too, but as bad input: the append handler would count every record invalid.
    throw new ConfigurationError('DGCL_COORDINATION', `must be table or objects, got ${JSON.stringify(coordination)}`);
  }
  const leaseTable = nonEmpty(env.DGCL_LEASE_TABLE);
  if (options.leases === true && location.kind === 's3' && leaseTable === undefined) {
    throw new ConfigurationError('DGCL_LEASE_TABLE', `is not set; the s3:// root ${root} needs a DynamoDB lease table (partition key pk String, TTL attribute ttl)`);
  }
  return {
    root,
    location,
    leaseTable,
    resumeQueueUrl: nonEmpty(env.DGCL_RESUME_QUEUE_URL),
    leaseTtlMaxMs: positiveMs(env, 'DGCL_LEASE_TTL_MS', CONFIG_DEFAULTS.leaseTtlMaxMs),
    mergeEveryMs: positiveMs(env, 'DGCL_MERGE_EVERY_MS', CONFIG_DEFAULTS.mergeEveryMs),
    env,
  };
}

/** DGCL_RESUME_QUEUE_URL, or a ConfigurationError saying what is missing. */
export function requireResumeQueueUrl(config: HandlerConfig): string {
  const url = config.resumeQueueUrl;
  if (url === undefined) {
    throw new ConfigurationError('DGCL_RESUME_QUEUE_URL', 'is not set; the resume handler sends its instructions to this SQS queue URL');
  }
  if (!/^https?:\/\/[^/]+\/.+/.test(url)) {
    throw new ConfigurationError('DGCL_RESUME_QUEUE_URL', `is not an SQS queue URL: ${JSON.stringify(url)}`);
  }
  return url;
}

function positiveMs(env: Env, name: string, def: number): number {
  const v = nonEmpty(env[name]);
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new ConfigurationError(name, `must be a positive integer (milliseconds), got ${JSON.stringify(v)}`);
  return n;
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}
