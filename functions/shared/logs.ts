/**
 * The warm container's open logs, one per experiment (module-level, so they outlive an
 * invocation). An append container keeps its `CheckpointLog`, hence its writer shard slot:
 * the log renews the slot lease every ttl/3 while the container runs, and the next invocation
 * appends to the same shard with no lease round trip and no new epoch. Readers keep their Lance
 * handles (a warm re-read costs one GET instead of a LIST + one GET per fragment).
 *
 * One lease store per root is shared by every log of the container (one DynamoDB client).
 * At most `maxOpen` logs stay open between invocations: `trim()` (run after every invocation by
 * the middy chain) closes the least recently used ones beyond that (close merges the shard and
 * releases the slot). Nothing is closed during an invocation, which may be using every log it
 * opened.
 */
import { randomUUID } from 'node:crypto';
import { systemClock } from '../../lib/clock.ts';
import { defaultLeaseStore, openLog } from '../../lib/index.ts';
import type { LeaseStore } from '../../lib/lease/types.ts';
import type { CheckpointLog } from '../../lib/api.ts';
import type { HandlerConfig } from './config.ts';

export interface CachedLog {
  readonly key: string;
  readonly pipeline: string;
  readonly experiment: string;
  readonly log: CheckpointLog;
  readonly leaseTtlMs: number;
  readonly openedAtMs: number;
  /** When this container last merged the log's shard (or opened it). */
  lastMergeAtMs: number;
  /** Commits since then, as counted by the handler (acks that were not duplicates). */
  appendsSinceMerge: number;
}

export interface GetLogOptions {
  /** Writer/maintainer lease duration; only used when the log is opened now. */
  leaseTtlMs: number;
}

export class LogCache {
  private readonly logs = new Map<string, Promise<CachedLog>>();
  private readonly leaseStores = new Map<string, LeaseStore>();

  constructor(private readonly maxOpen = 16) {}

  /** The open log of an experiment, opening it if needed. */
  async get(config: HandlerConfig, pipeline: string, experiment: string, options: GetLogOptions): Promise<CachedLog> {
    const key = [config.root, config.leaseTable ?? '', pipeline, experiment].join('\u0000');
    const hit = this.logs.get(key);
    if (hit) {
      // Map order is the LRU order: move to the end.
      this.logs.delete(key);
      this.logs.set(key, hit);
      return hit;
    }
    const opening = this.open(config, key, pipeline, experiment, options);
    this.logs.set(key, opening);
    opening.catch(() => {
      if (this.logs.get(key) === opening) this.logs.delete(key);
    });
    return opening;
  }

  private async open(config: HandlerConfig, key: string, pipeline: string, experiment: string, options: GetLogOptions): Promise<CachedLog> {
    const log = await openLog({
      root: config.root,
      pipeline,
      experiment,
      env: config.env,
      // A reader on an s3:// root without a lease table opens the log without a lease store, as
      // reads take no lease; its point reads then go without the item-marker check.
      ...(config.location.kind === 's3' && config.leaseTable === undefined ? {} : { leases: this.leaseStoreFor(config) }),
      leaseTtlMs: options.leaseTtlMs,
      // No idle merge: its timer could start a merge just after the handler returned, and a
      // container frozen mid-merge is a stalled merger (docs/design/deletion.md). The handler
      // merges by age itself, inside invocations (maybeMerge, DGCL_MERGE_EVERY_MS).
      mergeIdleMs: 0,
      ...(containerOwner(config.env) ? { owner: containerOwner(config.env)! } : {}),
    });
    const now = systemClock.nowMs();
    return { key, pipeline, experiment, log, leaseTtlMs: options.leaseTtlMs, openedAtMs: now, lastMergeAtMs: now, appendsSinceMerge: 0 };
  }

  /** The container's lease store for the configured root (shared by every log it opens). */
  leaseStoreFor(config: HandlerConfig): LeaseStore {
    const key = `${config.root}\u0000${config.leaseTable ?? ''}`;
    let store = this.leaseStores.get(key);
    if (!store) {
      store = defaultLeaseStore(config.location, config.env, systemClock).store; // lives as long as the container
      this.leaseStores.set(key, store);
    }
    return store;
  }

  /** Closes the least recently used logs beyond `maxOpen` (between invocations only). */
  async trim(): Promise<void> {
    while (this.logs.size > this.maxOpen) {
      const [oldest, entry] = this.logs.entries().next().value as [string, Promise<CachedLog>];
      this.logs.delete(oldest);
      await entry.then((c) => c.log.close()).catch(() => undefined);
    }
  }

  /** How many logs are open (tests). */
  get size(): number {
    return this.logs.size;
  }

  /** Close every log (merging shards, releasing slots) and lease store. */
  async closeAll(): Promise<void> {
    const entries = [...this.logs.values()];
    this.logs.clear();
    await Promise.all(entries.map((p) => p.then((c) => c.log.close()).catch(() => undefined)));
    const stores = [...this.leaseStores.values()];
    this.leaseStores.clear();
    await Promise.all(stores.map((s) => s.close().catch(() => undefined)));
  }
}

/** The container-wide cache every handler module uses. */
export const logCache = new LogCache();

let ownerCache: string | undefined;

/**
 * Lease owner of this container: function name + log stream name (which names the execution
 * environment in CloudWatch) + a random suffix, so `heldBy` in a report leads to the logs.
 * Outside Lambda: undefined (the lib's host/pid/random default).
 */
export function containerOwner(env: Record<string, string | undefined>): string | undefined {
  const stream = env.AWS_LAMBDA_LOG_STREAM_NAME;
  if (!stream) return undefined;
  ownerCache ??= `${env.AWS_LAMBDA_FUNCTION_NAME ?? 'lambda'}/${stream}/${randomUUID().slice(0, 8)}`.slice(0, 500);
  return ownerCache;
}
