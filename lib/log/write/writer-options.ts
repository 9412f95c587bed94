/**
 * The options of a ShardWriter (lib/log/write/writer.ts, which re-exports them) and its test
 * hooks.
 */
import type { Clock } from '../../clock.ts';
import type { SlotWaitListener } from '../../lease/slots.ts';
import type { MergeHooks } from '../maintain/merge.ts';

export interface WriterOptions {
  pipeline: string;
  experiment: string;
  owner: string;
  /** Number of shard slots of the experiment (writers beyond it wait for a free slot). */
  slots: number;
  /** Take this slot (tests, takeovers); default: any free one. */
  slot?: number;
  leaseTtlMs: number;
  /** Merge the own shard into the base after this many commits to one generation. */
  mergeEveryCommits: number;
  /** ... or once its commits' rows (as encoded for them) reach this many bytes. */
  mergeEveryBytes: number;
  /** ... or once this long went by without a commit (0: never); merged between commits. */
  mergeIdleMs: number;
  /** Upper bound of batches combined into one commit (one request is never split). */
  maxBatchesPerCommit: number;
  /** Items whose state the writer keeps in memory between batches. */
  cachedItems: number;
  /** Claims only matter while duplicates of a batch are in flight: kept this long. */
  claimRetentionMs: number;
  clock: Clock;
  hooks?: WriterHooks;
  /** Told when the writer starts waiting for a slot (every one it may take is held). */
  onSlotWait?: SlotWaitListener;
}

export interface WriterHooks extends MergeHooks {
  /**
   * Called after the items were read and seqs assigned, before the shard commit (tests), with the
   * generation the commit goes to if it exists already (null: it is made after this call) and
   * the writer epoch it belongs to.
   */
  beforeCommit?(itemIds: readonly string[], shard: string | null, writerEpoch: string): void | Promise<void>;
  /** Called after the shard commit, before its fsync, the epoch check and the claims (tests: crash here). */
  afterCommit?(shard: string, version: number): void | Promise<void>;
}
