/**
 * `openLog`: one experiment's log from a root, a pipeline and an experiment name. Apart from
 * lib/index.ts (which re-exports it) so that a program that only opens logs (the CLI) does not
 * load the report, the export and, for a local root, the AWS SDK: S3 and DynamoDB clients are
 * loaded on the first s3:// root (lib/open-aws.ts).
 */
import './runtime.ts';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { CheckpointLog, DeleteOptions, DeleteResult, ForkOptions, ForkResult, MaintainOptions, MaintenanceReport } from './api.ts';
import { systemClock, type Clock } from './clock.ts';
import type { CoordPreference } from './coord/choose.ts';
import { InternalError, InvalidInputError } from './errors.ts';
import { localLeaseStore } from './lease/default-local.ts';
import { MissingLeaseStore } from './lease/missing.ts';
import type { SlotWaitListener } from './lease/slots.ts';
import type { LeaseStore } from './lease/types.ts';
import { LanceCheckpointLog, type LanceLogOptions } from './log/log.ts';
import type { MergeHooks } from './log/maintain/merge.ts';
import { logFolderExists, logNotFound } from './log/read/missing.ts';
import type { WriterHooks } from './log/write/writer.ts';
import { validateName } from './names.ts';
import { closeOnSignals, CLOSE_SIGNALS } from './signals.ts';
import { LocalObjectStore } from './storage/local.ts';
import { formatLocation, lanceStorageOptions, logLocation, logUri, parseRoot, type Env, type Location } from './storage/location.ts';
import type { ObjectStore } from './storage/objects.ts';
import type { Ack } from './types.ts';

export interface OpenLogOptions {
  /** `file:///abs/dir`, a local path, or `s3://bucket/prefix`. */
  root: string;
  pipeline: string;
  experiment: string;
  /**
   * Writer epochs and maintainer election. Default: for local roots a lease folder beside the
   * logs (`<root>/.dgcl/leases`); for S3 roots DynamoDB table `DGCL_LEASE_TABLE`, and without
   * it none: the log reads, while append and maintain fail with INVALID_INPUT naming it.
   */
  leases?: LeaseStore;
  /** Identity of this process in leases (default: host/pid/random). */
  owner?: string;
  /** Shard slots per experiment, i.e. concurrent writers (default 16). */
  slots?: number;
  /** Take exactly this slot instead of any free one. */
  slot?: number;
  /** Writer and maintainer lease duration; renewed every third of it (default 60 s). */
  leaseTtlMs?: number;
  /** Merge the own shard into the base after this many commits (default 64). */
  mergeEveryCommits?: number;
  /** ... or once its commits' rows reach this many bytes, as encoded for them (default 32 MiB). */
  mergeEveryBytes?: number;
  /**
   * ... or once this long passed without a commit (default 30 s; 0: never). Default 0 on a host
   * that freezes processes between requests (`freezingHost`): a merge that starts after the
   * request returned may stall mid-way (docs/design/deletion.md, "Stalled mergers").
   */
  mergeIdleMs?: number;
  /** Most batches combined into one Lance commit (default 512). */
  maxBatchesPerCommit?: number;
  /** Items whose state a writer keeps in memory between their batches (default 100,000). */
  cachedItems?: number;
  /** Base versions younger than this survive maintenance (default 1 h). */
  versionRetentionMs?: number;
  /** Claims older than this are deleted (by maintenance, or the lease table's TTL) (default 1 h). */
  claimRetentionMs?: number;
  /**
   * Deleted items' rows are purged by maintenance once the deletion is this old (default 1 h),
   * and the tombstone stays this long after their last removal (docs/design/deletion.md,
   * "Stalled mergers").
   */
  deletionRetentionMs?: number;
  /**
   * Where a new log keeps its item markers and claims: 'table' (default; env `DGCL_COORDINATION`):
   * in the lease table when it is DynamoDB, in one SQLite file beside a log on a local root; or
   * 'objects': one object (file) per record beside the log, what versions before 0.2.0 (S3) and
   * 0.3.0 (local roots) do, for while such processes still write the log (on S3 one request per
   * batch more). A log keeps what its first writer chose (docs/design/leases.md, "Other records
   * in the table: item markers and claims"); this only decides for a new log.
   */
  coordination?: CoordPreference;
  clock?: Clock;
  env?: Env;
  /**
   * On SIGINT / SIGTERM, close() the log (serve the queued appends, merge this writer's shard,
   * release its slot), then let the signal end the process: the next writer starts at once
   * (lib/signals.ts). `true`: both signals; or the signals to handle. Default off: it changes how
   * the whole process stops (an application with handlers of its own calls close() in them).
   */
  closeOnSignals?: boolean | readonly NodeJS.Signals[];
  /**
   * Told when this log's writer starts waiting for a slot because every slot it may take is held
   * (who holds them, until when); it waits up to one lease ttl, then fails with LEASE_HELD.
   */
  onSlotWait?: SlotWaitListener;
  /** Fault injection for crash tests. */
  hooks?: WriterHooks & MergeHooks;
}

/** Longest timer Node keeps (a longer one fires at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Environment variables of function hosts that freeze (or throttle to nothing) a process between
 * requests: AWS Lambda, Vercel, Azure Functions, Google Cloud Functions and Cloud Run (Cloud Run
 * throttles CPU outside requests unless told otherwise; the idle merge is off there too).
 */
const FREEZING_HOST_VARS = ['AWS_LAMBDA_FUNCTION_NAME', 'VERCEL', 'FUNCTIONS_WORKER_RUNTIME', 'FUNCTION_TARGET', 'K_SERVICE'] as const;

/** True when `env` says the process runs on a host that freezes it between requests. */
export function freezingHost(env: Env): boolean {
  return FREEZING_HOST_VARS.some((k) => (env[k] ?? '') !== '');
}

export const DEFAULTS = {
  slots: 16,
  leaseTtlMs: 60_000,
  mergeEveryCommits: 64,
  mergeEveryBytes: 32 * 2 ** 20,
  mergeIdleMs: 30_000,
  maxBatchesPerCommit: 512,
  cachedItems: 100_000,
  versionRetentionMs: 3_600_000,
  claimRetentionMs: 3_600_000,
  deletionRetentionMs: 3_600_000,
} as const;

/** Open one experiment's log (nothing is created until the first append). */
export async function openLog(o: OpenLogOptions): Promise<CheckpointLog> {
  const pipeline = validateName('pipeline', o.pipeline);
  const experiment = validateName('experiment', o.experiment);
  const env = o.env ?? process.env;
  const root = parseRoot(o.root);
  const loc = logLocation(root, pipeline, experiment);
  const clock = o.clock ?? systemClock;
  const slots = o.slots ?? DEFAULTS.slots;
  if (!Number.isSafeInteger(slots) || slots < 1 || slots > 99) {
    throw new InvalidInputError(`slots must be an integer from 1 to 99, got ${slots}`, { field: 'slots' });
  }
  if (o.slot !== undefined && (!Number.isSafeInteger(o.slot) || o.slot < 0 || o.slot >= slots)) {
    throw new InvalidInputError(`slot must be an integer from 0 to ${slots - 1}, got ${o.slot}`, { field: 'slot' });
  }
  // 0 is allowed where it means "at once"; a claim must outlive its own commit.
  for (const [field, min] of [['versionRetentionMs', 0], ['claimRetentionMs', 1], ['deletionRetentionMs', 0]] as const) {
    const v = o[field];
    if (v !== undefined && (!Number.isSafeInteger(v) || v < min)) {
      throw new InvalidInputError(`${field} must be a whole number of milliseconds >= ${min}, got ${v}`, { field });
    }
  }
  for (const [field, min, max] of [['mergeEveryCommits', 1, Number.MAX_SAFE_INTEGER], ['mergeEveryBytes', 1, Number.MAX_SAFE_INTEGER], ['mergeIdleMs', 0, MAX_TIMER_MS]] as const) {
    const v = o[field];
    if (v !== undefined && (!Number.isSafeInteger(v) || v < min || v > max)) {
      throw new InvalidInputError(`${field} must be a whole number from ${min} to ${max}, got ${v}`, { field });
    }
  }
  const coordination = o.coordination ?? (env.DGCL_COORDINATION || 'table');
  if (coordination !== 'table' && coordination !== 'objects') {
    throw new InvalidInputError(`coordination must be 'table' or 'objects', got ${JSON.stringify(coordination)}`, { field: o.coordination !== undefined ? 'coordination' : 'DGCL_COORDINATION' });
  }
  const { objects, rootObjects } = await objectStores(root, loc, env);
  const uri = logUri(root, pipeline, experiment);
  const { store: leases, close: closeStore } = o.leases ? { store: o.leases, close: undefined } : await defaultLeases(root, env, clock);
  let stopListening: (() => void) | undefined;
  const onClose = async () => {
    stopListening?.();
    await closeStore?.();
  };
  const options: LanceLogOptions = {
    pipeline,
    experiment,
    uri,
    objects,
    storageOptions: lanceStorageOptions(root, env),
    leases,
    owner: o.owner ?? `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`,
    clock,
    slots,
    ...(o.slot !== undefined ? { slot: o.slot } : {}),
    leaseTtlMs: o.leaseTtlMs ?? DEFAULTS.leaseTtlMs,
    mergeEveryCommits: o.mergeEveryCommits ?? DEFAULTS.mergeEveryCommits,
    mergeEveryBytes: o.mergeEveryBytes ?? DEFAULTS.mergeEveryBytes,
    mergeIdleMs: o.mergeIdleMs ?? (freezingHost(env) ? 0 : DEFAULTS.mergeIdleMs),
    maxBatchesPerCommit: o.maxBatchesPerCommit ?? DEFAULTS.maxBatchesPerCommit,
    cachedItems: o.cachedItems ?? DEFAULTS.cachedItems,
    versionRetentionMs: o.versionRetentionMs ?? DEFAULTS.versionRetentionMs,
    claimRetentionMs: o.claimRetentionMs ?? DEFAULTS.claimRetentionMs,
    deletionRetentionMs: o.deletionRetentionMs ?? DEFAULTS.deletionRetentionMs,
    coordination,
    ...(o.hooks ? { hooks: o.hooks } : {}),
    ...(o.onSlotWait ? { onSlotWait: o.onSlotWait } : {}),
    onClose,
    missingLog: () => logNotFound({ root, pipeline, experiment, uri, rootObjects }),
    fork: async (f) =>
      (await import('./fork.ts')).forkLog(log, f, {
        root: o.root,
        pipeline,
        experiment,
        env,
        clock,
        ...(o.leases ? { leases: o.leases } : {}),
        openLog: (other) => openLog({ ...o, experiment: other, closeOnSignals: false }),
      }),
    logFolderExists: () => logFolderExists({ root, pipeline, experiment, uri, rootObjects }),
  };
  const log = leases instanceof MissingLeaseStore ? new LeaselessLog(options, leases) : new LanceCheckpointLog(options);
  if (o.closeOnSignals) stopListening = closeOnSignals(() => log.close(), o.closeOnSignals === true ? CLOSE_SIGNALS : o.closeOnSignals);
  return log;
}

/**
 * The object stores of the log's folder and of the root (whose listing says what exists near a
 * log that does not: lib/log/read/missing.ts); on S3 both on one client.
 */
async function objectStores(root: Location, loc: Location, env: Env): Promise<{ objects: ObjectStore; rootObjects: ObjectStore }> {
  if (loc.kind === 'file' && root.kind === 'file') return { objects: new LocalObjectStore(loc.dir), rootObjects: new LocalObjectStore(root.dir) };
  if (loc.kind === 's3' && root.kind === 's3') return (await import('./open-aws.ts')).s3ObjectStores(root, loc, env);
  throw new InternalError(`root ${formatLocation(root)} and its log's place differ in kind`);
}

/** The lease store a root uses when none is given, and how to close what it opened. */
async function defaultLeases(root: Location, env: Env, clock: Clock): Promise<{ store: LeaseStore; close: () => Promise<void> }> {
  return root.kind === 'file' ? localLeaseStore(root.dir, clock) : (await import('./open-aws.ts')).defaultLeaseStore(root, env, clock);
}

/**
 * A log with no lease store (an s3:// root without DGCL_LEASE_TABLE). Reads never take a lease;
 * append and maintain would (a writer slot, the maintainer), so they fail at once, before the
 * writer reads the items it would sequence: no request is sent and nothing is written.
 */
class LeaselessLog extends LanceCheckpointLog {
  constructor(
    o: LanceLogOptions,
    private readonly missing: MissingLeaseStore,
  ) {
    super(o);
  }

  override append(_batches: unknown[]): Promise<Ack[]> {
    return Promise.reject(this.missing.error());
  }

  override deleteItem(_itemId: string, _options?: DeleteOptions): Promise<DeleteResult> {
    return Promise.reject(this.missing.error());
  }

  override maintain(_options: MaintainOptions = {}): Promise<MaintenanceReport> {
    return Promise.reject(this.missing.error());
  }

  override fork(_options: ForkOptions): Promise<ForkResult> {
    return Promise.reject(this.missing.error());
  }
}

