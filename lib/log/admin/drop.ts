/**
 * `dropLog`: deletes a log whole: its objects (everything under `log.lance`, a local log's
 * SQLite coordination file included), its records in the lease table (item markers, claims, the
 * sentinel) and its lease records (docs/operations.md, "Dropping a log").
 *
 * Safety rule: refused while the log is in use. Before deleting anything, drop takes every
 * lease that fences the log's processes (lib/log/admin/lease-keys.ts: each writer slot and the
 * maintainer), waiting up to `waitMs` (one lease ttl) for each; one still held then is
 * LEASE_HELD naming its holder, and nothing was deleted. Held by drop, the leases keep new
 * writers and maintenance out while it deletes, and a writer whose lease had expired (a paused
 * process) finds its epoch superseded at its next commit (FENCED).
 *
 * Order, each step done before the next, so a rerun after a crash finds what is left:
 *   1. every object but `_dgcl/coordination` (the meta folder last: its names tell a rerun
 *      which slots the log used);
 *   2. the log's records in the lease table but the sentinels (lib/log/admin/record-sweep.ts);
 *   3. the sentinels;
 *   4. the lease records scoped by the log's id: released, then deleted;
 *   5. `_dgcl/coordination` (it names the log's id: until then a rerun finds the records);
 *   6. the shared lease records (named by pipeline and experiment alone): released only. Logs
 *      of the same names under another root may use them, and a log made again here continues
 *      their epochs.
 * A log that is gone (no object, no record of this place) is "nothing to drop": all counts 0.
 */
import { promises as fs } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { systemClock, type Clock } from '../../clock.ts';
import { CHOICE_KEY, SENTINEL_KEY } from '../../coord/choose.ts';
import { CorruptError, InvalidInputError } from '../../errors.ts';
import { errCode } from '../../fsutil.ts';
import { LocalObjectStore } from '../../storage/local.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { META_DIR } from '../layout.ts';
import { checkLeaseStore, parseCoordination, type Coordination } from './coordination.ts';
import { HeldLeases } from './held-leases.ts';
import { leaseKeysOf, slotsToTake, type LeaseKey } from './lease-keys.ts';
import type { AdminPlace } from './place.ts';
import { RecordSweep } from './record-sweep.ts';

/** As openLog's default lease ttl (lib/open.ts DEFAULTS.leaseTtlMs). */
export const DROP_LEASE_TTL_MS = 60_000;

export interface DropOptions {
  /** The identity drop holds the leases under (default: host/pid/drop-<random>). */
  owner?: string;
  /** The ttl of the leases drop holds (renewed every third of it). Default 60 s. */
  leaseTtlMs?: number;
  /** How long to wait for a held lease to free before LEASE_HELD. Default: one `leaseTtlMs`. */
  waitMs?: number;
  clock?: Clock;
}

export interface DropResult {
  /** Objects deleted under `log.lance`. */
  objects: number;
  /** Records deleted from the lease table (markers, claims, sentinels). */
  records: number;
  /** Lease records taken, then released or deleted. */
  leases: number;
}

/** What drop would delete, without deleting it (`dgcl drop` without `--yes`). */
export interface DropPlan {
  uri: string;
  /** Whether anything of the log is there: an object under `log.lance`, or a record of this place in the lease table. */
  exists: boolean;
  /** The log's coordination record, or null. */
  coordination: string | null;
  /** The lease table holding the log's records (and leases), or null (local lease files). */
  table: string | null;
  /** The scope of the log's records in the table (`<pipeline>/<experiment>/<logId>/`), or null. */
  scope: string | null;
  /** Set when the log is a copy of another log (this place): the original's records stay. */
  copyOf: string | null;
  /** The lease keys drop takes, and whether each record is deleted (scoped) or only released. */
  leases: LeaseKey[];
}

export async function dropPlan(place: AdminPlace): Promise<DropPlan> {
  const s = await survey(place);
  return {
    uri: place.uri,
    exists: s.top.length > 0 || (await s.sweep?.any()) === true,
    coordination: s.coord.body,
    table: place.records?.table ?? null,
    scope: s.coord.id !== null && s.sweep && s.copyOf === null ? s.sweep.scopeOf(s.coord.id) : null,
    copyOf: s.copyOf,
    leases: s.keys,
  };
}

interface Survey {
  /** The names directly under `log.lance`. */
  top: string[];
  coord: Coordination;
  copyOf: string | null;
  sweep: RecordSweep | null;
  keys: LeaseKey[];
}

/** What is there, checked: refused (nothing deleted) when the lease store does not fit the log. */
async function survey(place: AdminPlace): Promise<Survey> {
  const top = await place.objects.list('');
  const coord = parseCoordination(await place.objects.get(CHOICE_KEY), place.uri);
  checkLeaseStore(place, coord, 'drop');
  const copyOf = await checkSentinel(place, coord, top);
  const sweep = place.records ? new RecordSweep(place.records, place.pipeline, place.experiment, place.location, coord.id === null ? null : { id: coord.id, owned: copyOf === null }) : null;
  // A copy's id is the original's: its scoped leases are the original's too, and stay.
  const keys = leaseKeysOf({ pipeline: place.pipeline, experiment: place.experiment, logId: coord.id, scoped: coord.scoped }, slotsToTake(await place.objects.list(META_DIR))).filter((k) => copyOf === null || !k.scoped);
  return { top, coord, copyOf, sweep, keys };
}

export async function dropLog(place: AdminPlace, o: DropOptions = {}): Promise<DropResult> {
  const clock = o.clock ?? systemClock;
  const ttlMs = o.leaseTtlMs ?? DROP_LEASE_TTL_MS;
  const waitMs = o.waitMs ?? ttlMs;
  if (!Number.isSafeInteger(ttlMs) || ttlMs < 1) throw new InvalidInputError(`must be a whole number of milliseconds >= 1, got ${ttlMs}`, { field: 'leaseTtlMs' });
  if (!Number.isSafeInteger(waitMs) || waitMs < 0) throw new InvalidInputError(`must be a whole number of milliseconds >= 0, got ${waitMs}`, { field: 'waitMs' });
  const owner = o.owner ?? `${hostname()}/${process.pid}/drop-${randomUUID().slice(0, 8)}`;

  const { top, sweep, keys } = await survey(place);
  if (top.length === 0 && !(await sweep?.any())) return { objects: 0, records: 0, leases: 0 };

  const held = await HeldLeases.take(place.leases, keys, { owner, ttlMs, waitMs, clock });
  const check = () => held.check();
  try {
    let objects = await deleteObjectsButRecord(place.objects, check);
    let records = 0;
    if (sweep) {
      records += await sweep.sweep(new Set(keys.map((k) => k.key)), check);
      check();
      records += await sweep.deleteSentinels();
    }
    const leases = await held.end(place.records, (k) => k.scoped);
    check();
    if ((await place.objects.get(CHOICE_KEY)) !== null) {
      await place.objects.delete(CHOICE_KEY);
      objects++;
    }
    await pruneLocalFolders(place);
    return { objects, records, leases: leases + (await held.end(place.records, () => true)) };
  } catch (e) {
    await held.abandon();
    throw e;
  }
}

/**
 * For a log whose records are in the lease table: null when its sentinel names this place, the
 * place it names when this log is a copy of another (whose records drop leaves alone). No
 * sentinel while the log still holds more than its coordination record: another table than the
 * log's (CORRUPT, nothing deleted); with nothing else left, a rerun after the sentinel went.
 */
async function checkSentinel(place: AdminPlace, coord: Coordination, top: readonly string[]): Promise<string | null> {
  if (coord.id === null || !place.records) return null;
  const sentinel = await place.records.body(`${place.pipeline}/${place.experiment}/${coord.id}/${SENTINEL_KEY}`);
  if (sentinel === null) {
    const rest = top.length === 1 && top[0] === '_dgcl' ? await place.objects.list('_dgcl') : top;
    if (rest.length === 1 && rest[0] === CHOICE_KEY.slice('_dgcl/'.length)) return null;
    throw new CorruptError(
      `the lease table ${place.records.table} holds no record of the log ${place.uri} (id ${coord.id}): is it another table than the one the log was written with? Its leases there would not fence the log's writers; nothing was deleted`,
    );
  }
  return sentinel === place.location ? null : sentinel;
}

/**
 * Deletes every object under the log's folder but its coordination record: the Lance dataset's
 * folders first, then `_dgcl`'s, its meta folder last. Calls `check` before each folder.
 */
async function deleteObjectsButRecord(objects: ObjectStore, check: () => void): Promise<number> {
  let n = 0;
  const one = async (key: string) => {
    check();
    n += await deleteEntry(objects, key);
  };
  for (const name of await objects.list('')) if (name !== '_dgcl') await one(name);
  const dgcl = await objects.list('_dgcl');
  for (const name of dgcl) if (`_dgcl/${name}` !== CHOICE_KEY && `_dgcl/${name}` !== META_DIR) await one(`_dgcl/${name}`);
  if (dgcl.includes(META_DIR.slice('_dgcl/'.length))) await one(META_DIR);
  return n;
}

/** Deletes the folder or object `key`; returns how many objects went. */
async function deleteEntry(objects: ObjectStore, key: string): Promise<number> {
  const below = await objects.deletePrefix(key);
  if (below > 0) return below;
  // Nothing below: an object, or (local) an empty folder, which deletePrefix removed.
  if (objects instanceof LocalObjectStore && (await fs.stat(path.join(objects.dir, ...key.split('/'))).catch(() => null)) === null) return 0;
  await objects.delete(key);
  return 1;
}

/** A local log's emptied folders, up to its pipeline's (an object store has no folders). */
async function pruneLocalFolders(place: AdminPlace): Promise<void> {
  if (!(place.objects instanceof LocalObjectStore)) return;
  let dir = place.objects.dir;
  for (let i = 0; i < 3; i++) {
    try {
      await fs.rmdir(dir);
    } catch (e) {
      if (errCode(e) !== 'ENOENT') return; // not empty: another log's, or something else's
    }
    dir = path.dirname(dir);
  }
}
