/**
 * Which leases fence a log's writers and maintenance: the keys `drop` takes before it deletes
 * anything, and what it does with each record afterwards. The one place that knows how those
 * keys are named for a log: change `leaseKeysOf` when they change.
 */
import { DEFAULT_SLOTS, MAX_SLOTS, maintainerKey, slotKey } from '../../lease/slots.ts';
import { parseMetaNames, parseShardName } from '../layout.ts';

export interface LeaseKey {
  key: string;
  /** For messages: `writer slot 3`, `maintainer`. */
  what: string;
  /**
   * Whether the key belongs to this log alone (it names the log's id): its record is deleted
   * with the log. A key named by the pipeline and experiment alone is shared by every log of
   * those names using the same lease store (another root, the same DynamoDB table), and by the
   * log made again at this place: its record is only released, never deleted (its epoch
   * counter must not restart under a log that still uses it).
   */
  scoped: boolean;
}

/**
 * The lease keys of the log of `pipeline`/`experiment`: scoped by `logId` when its record scopes
 * its leases (`scoped`), else named by the pipeline and experiment alone; with `slots` writer slots
 * (`slotsToTake`).
 */
export function leaseKeysOf(log: { pipeline: string; experiment: string; logId: string | null; scoped: boolean }, slots: number): LeaseKey[] {
  const id = log.scoped ? log.logId : null;
  const keys: LeaseKey[] = [];
  for (let s = 0; s < slots; s++) keys.push({ key: slotKey(log.pipeline, log.experiment, s, id), what: `writer slot ${s}`, scoped: id !== null });
  keys.push({ key: maintainerKey(log.pipeline, log.experiment, id), what: 'maintainer', scoped: id !== null });
  return keys;
}

/**
 * How many writer slots to take: the default count, or more when the log was written with
 * more (a writer's `slots` option): one above the highest slot any name in the meta folder
 * shows (generations, seals, fences, retired generations). A writer of a slot above every name
 * that has not written yet is not seen.
 */
export function slotsToTake(metaNames: readonly string[]): number {
  const meta = parseMetaNames(metaNames);
  let highest = -1;
  const shards = [...meta.gens, ...meta.retired];
  const epochs = [...meta.sealEpochs, ...meta.fenceEpochs];
  for (const name of [...shards, ...epochs.map((e) => `${e}-g000000`)]) {
    const s = parseShardName(name);
    if (s) highest = Math.max(highest, s.slot);
  }
  return Math.min(MAX_SLOTS, Math.max(DEFAULT_SLOTS, highest + 1));
}
