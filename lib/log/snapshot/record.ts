/**
 * A snapshot's record (`_dgcl/snapshots/records/<name>.json`, lib/log/layout.ts): what a read of
 * the snapshot needs (the base version and the Lance tag that keeps it, the dataset holding the
 * rows it copied from unmerged generations, the tombstones in force then) and what tells whether
 * the log still shows that state (the generations it copied, at their versions). Written last and
 * once: a snapshot exists when its record does. Pure but for `readRecord` (one read of the store).
 */
import type { SnapshotInfo } from '../../api.ts';
import { CorruptError, InvalidInputError } from '../../errors.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { snapshotRecordKey } from '../layout.ts';

/** 1-128 characters of [A-Za-z0-9._-]: a file name on every store, and safe on a command line. */
const NAME_RE = /^[A-Za-z0-9._-]{1,128}$/;

/** `name` if it is a valid snapshot name; INVALID_INPUT (field `field`) otherwise. */
export function checkSnapshotName(name: unknown, field = 'name'): string {
  if (typeof name !== 'string' || !NAME_RE.test(name)) {
    throw new InvalidInputError(`a snapshot name is 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-', got ${JSON.stringify(name)}`, { field });
  }
  return name;
}

export interface SnapshotRecord {
  format: 1;
  name: string;
  /** The log's id when it was taken (lib/log/layout.ts `logIdKey`). */
  logId: string;
  /** The attempt that made it: names its tag and tail (another attempt's are leftovers). */
  nonce: string;
  createdAtMs: number;
  /** The base version it reads, and the tag keeping it; both null when there was no base. */
  baseVersion: number | null;
  baseTag: string | null;
  /** The tail dataset in SNAPSHOT_TAILS_DIR (null: no unmerged rows), and its rows. */
  tail: string | null;
  tailRows: number;
  /** Events the snapshot shows (each once, deleted items' hidden). */
  events: number;
  /** The unmerged generations it copied, each at the version it copied. */
  gens: Record<string, number>;
  /** The tombstones in force: hash of an item id -> the highest seq deleted (lib/log/deleted.ts). */
  tombstones: Record<string, number>;
}

const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
const isCounts = (o: unknown): o is Record<string, number> => typeof o === 'object' && o !== null && !Array.isArray(o) && Object.values(o).every(isCount);

/** The record stored at `key`, checked (CORRUPT when it is not one, or not the one its name says). */
export function parseRecord(body: string, key: string, name: string): SnapshotRecord {
  let r: Partial<SnapshotRecord>;
  try {
    r = JSON.parse(body) as Partial<SnapshotRecord>;
  } catch (e) {
    throw new CorruptError(`snapshot record ${key} is not valid JSON`, { cause: e });
  }
  const ok =
    typeof r === 'object' &&
    r !== null &&
    r.format === 1 &&
    r.name === name &&
    typeof r.logId === 'string' &&
    typeof r.nonce === 'string' &&
    typeof r.createdAtMs === 'number' &&
    (r.baseVersion === null ? r.baseTag === null : isCount(r.baseVersion) && typeof r.baseTag === 'string') &&
    (r.tail === null || typeof r.tail === 'string') &&
    isCount(r.tailRows) &&
    isCount(r.events) &&
    isCounts(r.gens) &&
    isCounts(r.tombstones);
  if (!ok) throw new CorruptError(`snapshot record ${key} is not a snapshot record of ${JSON.stringify(name)}`);
  return r as SnapshotRecord;
}

/** The record of snapshot `name`, or null when there is none. */
export async function readRecord(c: { objects: ObjectStore }, name: string): Promise<SnapshotRecord | null> {
  const key = snapshotRecordKey(name);
  const body = await c.objects.get(key);
  return body === null ? null : parseRecord(body, key, name);
}

export function infoOf(r: SnapshotRecord): SnapshotInfo {
  return { name: r.name, createdAtMs: r.createdAtMs, baseVersion: r.baseVersion, tailRows: r.tailRows, events: r.events };
}

/** A tail dataset's name: the attempt's nonce and the read (1, 2...) that filled it. */
export const tailName = (nonce: string, read: number) => `${nonce}-${read}`;

/** The attempt nonce of a tail dataset folder (`<nonce>-<n>.lance`), or null when it is not one. */
export function nonceOfTail(entry: string): string | null {
  const m = /^([0-9a-f]{16})-\d+\.lance\/?$/.exec(entry);
  return m ? m[1]! : null;
}

/** A fresh attempt nonce's shape (16 hex digits). */
export const NONCE_RE = /^[0-9a-f]{16}$/;
