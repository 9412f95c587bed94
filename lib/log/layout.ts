/**
 * Where things live inside one experiment's `log.lance` (see docs/design/shards.md):
 *
 *   log.lance/                                  base Lance dataset
 *   log.lance/_dgcl/shards/<shard>.lance        writer shard generations (plain Lance datasets)
 *   log.lance/_dgcl/meta/base                   the base dataset exists
 *   log.lance/_dgcl/meta/gen.<shard>            a shard generation exists (written before its first commit)
 *   log.lance/_dgcl/meta/fence.<writerEpoch>   an epoch is being sealed (written before its versions are read)
 *   log.lance/_dgcl/meta/seal.<writerEpoch>.json    an epoch's seal: which generations, which versions
 *   log.lance/_dgcl/meta/retired.<shard>        a generation merged into base (readers skip it)
 *   log.lance/_dgcl/meta/tomb.<hash of itemId>.<seq>  the item's events up to seq are deleted
 *                                               (docs/design/deletion.md; body: itemId, time)
 *
 * Readers learn everything but the data from ONE listing of the flat meta folder (listing the
 * shard folders would list every data file on servers without delimiter skipping).
 *   log.lance/_dgcl/claims/<checkpointId>.json  first acknowledgement of a checkpoint (dup detection)
 *   log.lance/_dgcl/coordination               where the log keeps item markers and claims: `objects`
 *                                              (these folders) or `table <id>` (the lease table,
 *                                              same keys under `<pipeline>/<experiment>/<id>/`)
 *   log.lance/_dgcl/items/<hash of itemId>      the writer epoch that last began writing the item
 *   log.lance/_dgcl/deleted/<hash>/<seq>        a delete of the item through seq (kept for good)
 *   log.lance/_dgcl/purged/<tomb name>/<ms>     a purge removed the tombstone's rows at ms (maintenance only)
 *   log.lance/_dgcl/snapshots/records/<name>.json  a snapshot (lib/log/snapshot/): its base version and tag,
 *                                              its tail, the tombstones in force; written last
 *   log.lance/_dgcl/snapshots/tails/<nonce>.lance  rows of the generations a snapshot saw unmerged
 *   log.lance/_dgcl/snapshots/attempts/<nonce>.json  a snapshot being made (until its record is written)
 *   log.lance/_refs/tags/dgcl-snap-<nonce>.json     Lance's tag of a snapshot's base version
 *
 * `<shard>` is `<writerEpoch>-g<generation>`, e.g. `s03-e000007-g000002`.
 */
import { createHash } from 'node:crypto';
import { CLAIMS_DIR } from '../coord/keys.ts';

export { CLAIMS_DIR };

export const SHARDS_DIR = '_dgcl/shards';
export const META_DIR = '_dgcl/meta';
export const ITEMS_DIR = '_dgcl/items';
/**
 * Written by a fork into its log (lib/log/admin/fork.ts): says the log holds lineage events, so
 * item listings look their lineage up (a log without it costs them nothing). Its body names the
 * source, for people.
 */
export const FORK_MARKER = '_dgcl/forked-from';
/**
 * Per deleted item, one empty object per delete named by the seq it deleted through (kept after
 * the purge; only sequencing lists it, for items without visible rows). Immutable names: a PUT
 * that lands late can only add a lower seq, never lower the highest.
 */
export const DELETED_DIR = '_dgcl/deleted';
/**
 * Per tombstone whose item's rows the purge removed from the base, one empty object per removal
 * named by the maintainer's time of it (`<tomb name>/<ms>`): the tombstone stays until the latest
 * is a grace old, so that a merger stalled across the purge cannot bring the rows back unseen
 * (docs/design/deletion.md, "Stalled mergers"). Immutable names, like DELETED_DIR's: a PUT that
 * lands late only adds an earlier time, never moves the latest back.
 */
export const PURGED_DIR = '_dgcl/purged';

/** Snapshots (lib/log/snapshot/): records, tails and attempts in their own folders. */
export const SNAPSHOTS_DIR = '_dgcl/snapshots';
export const SNAPSHOT_RECORDS_DIR = `${SNAPSHOTS_DIR}/records`;
export const SNAPSHOT_TAILS_DIR = `${SNAPSHOTS_DIR}/tails`;
export const SNAPSHOT_ATTEMPTS_DIR = `${SNAPSHOTS_DIR}/attempts`;
export const snapshotRecordKey = (name: string) => `${SNAPSHOT_RECORDS_DIR}/${name}.json`;
export const snapshotAttemptKey = (nonce: string) => `${SNAPSHOT_ATTEMPTS_DIR}/${nonce}.json`;
/** The Lance tag of a snapshot attempt's base version (tags are the base dataset's: log.lance/_refs). */
export const SNAPSHOT_TAG_PREFIX = 'dgcl-snap-';
export const snapshotTag = (nonce: string) => `${SNAPSHOT_TAG_PREFIX}${nonce}`;

export interface ShardName {
  name: string;
  writerEpoch: string;
  slot: number;
  epoch: number;
  generation: number;
}

const SHARD_RE = /^s(\d{2,})-e(\d{6,})-g(\d{6,})$/;

export function shardName(writerEpoch: string, generation: number): string {
  return `${writerEpoch}-g${String(generation).padStart(6, '0')}`;
}

export function parseShardName(name: string): ShardName | null {
  const m = SHARD_RE.exec(name);
  if (!m) return null;
  return {
    name,
    writerEpoch: `s${m[1]}-e${m[2]}`,
    slot: Number(m[1]),
    epoch: Number(m[2]),
    generation: Number(m[3]),
  };
}

export const shardPrefix = (name: string) => `${SHARDS_DIR}/${name}.lance`;
export const sealKey = (writerEpoch: string) => `${META_DIR}/seal.${writerEpoch}.json`;
export const fenceKey = (writerEpoch: string) => `${META_DIR}/fence.${writerEpoch}`;
export const retiredKey = (shard: string) => `${META_DIR}/retired.${shard}`;
export const genKey = (shard: string) => `${META_DIR}/gen.${shard}`;
export const BASE_KEY = `${META_DIR}/base`;
/**
 * The log's id: a marker `log.<nonce>` put by the first process to write the log (before the
 * first generation's marker or the base's: lib/log/tables.ts `ensureLogId`). A log deleted and
 * made again at the same place gets another, so a process that outlived the old log does not
 * take what it kept of it for the new one's: base versions are numbered from the start again,
 * and so are generations when the lease records went too. The smallest
 * such name counts when writers raced.
 */
export const logIdKey = (nonce: string) => `${META_DIR}/log.${nonce}`;
export const claimKey = (checkpointId: string) => `${CLAIMS_DIR}/${checkpointId}.json`;
/** Item ids may hold any character: markers and tombstones are named by a hash of it. */
export const itemHash = (itemId: string) => createHash('sha256').update(itemId).digest('hex').slice(0, 40);
export const itemKey = (itemId: string) => `${ITEMS_DIR}/${itemHash(itemId)}`;
/** Seqs in tombstone names are zero-padded so names sort by seq. */
export const floorDir = (itemId: string) => `${DELETED_DIR}/${itemHash(itemId)}`;
export const floorKey = (itemId: string, throughSeq: number) => `${floorDir(itemId)}/${String(throughSeq).padStart(12, '0')}`;
export const purgedDir = (tombName: string) => `${PURGED_DIR}/${tombName}`;
export const tombKey = (itemId: string, throughSeq: number) => `${META_DIR}/tomb.${itemHash(itemId)}.${String(throughSeq).padStart(12, '0')}`;

/** A tombstone's body: which item, through which seq, when (the deleter's clock). */
export interface Tombstone {
  itemId: string;
  throughSeq: number;
  deletedAtMs: number;
}

/** An epoch's seal: generations of that epoch readers may see, each up to a version. */
export interface Seal {
  writerEpoch: string;
  /** generation -> last visible Lance version of that generation's dataset. */
  gens: Record<string, number>;
  sealedBy: string;
  sealedAtMs: number;
}

/** Parse a META_DIR listing (names only); seal bodies are loaded lazily by the caller. */
export interface MetaNames {
  baseExists: boolean;
  /** The log's id (the smallest `log.<nonce>` marker), '' for a log written before ids were. */
  logId: string;
  gens: string[];
  sealEpochs: string[];
  fenceEpochs: string[];
  retired: Set<string>;
  /** Item hash -> highest seq deleted (every tombstone of the item; the highest covers the rest). */
  tombstones: Map<string, number>;
  /** Names of the tombstone objects (below META_DIR). */
  tombNames: string[];
}

export function parseMetaNames(names: readonly string[]): MetaNames {
  const sealEpochs: string[] = [];
  const fenceEpochs: string[] = [];
  const gens: string[] = [];
  const retired = new Set<string>();
  const tombstones = new Map<string, number>();
  const tombNames: string[] = [];
  let baseExists = false;
  let logId = '';
  for (const n of names) {
    if (n === 'base') baseExists = true;
    else if (n.startsWith('log.')) logId = logId === '' || n.slice(4) < logId ? n.slice(4) : logId;
    else if (n.startsWith('gen.')) gens.push(n.slice(4));
    else if (n.startsWith('seal.') && n.endsWith('.json')) sealEpochs.push(n.slice(5, -5));
    else if (n.startsWith('fence.')) fenceEpochs.push(n.slice(6));
    else if (n.startsWith('retired.')) retired.add(n.slice(8));
    else if (n.startsWith('tomb.')) {
      const m = /^tomb\.([0-9a-f]{40})\.(\d{12})$/.exec(n);
      if (!m) continue;
      tombNames.push(n);
      tombstones.set(m[1]!, Math.max(tombstones.get(m[1]!) ?? 0, Number(m[2])));
    }
  }
  return { baseExists, logId, gens, sealEpochs, fenceEpochs, retired, tombstones, tombNames };
}

/** The highest epoch of each slot among these writer epochs (`s00-e000001` names). */
export function maxEpochPerSlot(writerEpochs: readonly string[]): Map<number, number> {
  const max = new Map<number, number>();
  for (const e of writerEpochs) {
    const p = parseShardName(`${e}-g000000`);
    if (p) max.set(p.slot, Math.max(max.get(p.slot) ?? 0, p.epoch));
  }
  return max;
}
