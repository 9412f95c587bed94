/**
 * The snapshots a log holds (docs/usage.md, "Snapshots"): their records, listed and read; opening
 * one to read; dropping one; and sweeping what attempts that never made a record left behind (a
 * Lance tag, which holds back the base's version clean-up, and a tail dataset).
 */
import type { Table } from '@lancedb/lancedb';
import type { SnapshotInfo } from '../../api.ts';
import type { Clock } from '../../clock.ts';
import { NotFoundError, UnavailableError } from '../../errors.ts';
import type { LeaseStore } from '../../lease/types.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { SNAPSHOT_ATTEMPTS_DIR, SNAPSHOT_RECORDS_DIR, SNAPSHOT_TAG_PREFIX, SNAPSHOT_TAILS_DIR, snapshotAttemptKey, snapshotRecordKey } from '../layout.ts';
import type { LogReader } from '../read/reader.ts';
import type { LanceTables } from '../tables.ts';
import { checkSnapshotName, infoOf, NONCE_RE, nonceOfTail, readRecord, type SnapshotRecord } from './record.ts';
import { SnapshotView, type Track } from './view.ts';

export interface SnapshotContext {
  uri: string;
  pipeline: string;
  experiment: string;
  /** The log's owner id; a snapshot takes the maintainer lease as `<owner>/snapshot`. */
  owner: string;
  leaseTtlMs: number;
  tables: LanceTables;
  objects: ObjectStore;
  reader: LogReader;
  leases: LeaseStore;
  clock: Clock;
  track: Track;
}

/**
 * How long an attempt's marker protects its tag and tail from the sweep: longer than any attempt
 * takes, with room for clocks that disagree.
 */
export const ATTEMPT_GRACE_MS = 6 * 3600 * 1000;

/** Existing names shown by a NOT_FOUND. */
const NAMES_SHOWN = 10;

async function recordNames(c: { objects: ObjectStore }): Promise<string[]> {
  return (await c.objects.list(SNAPSHOT_RECORDS_DIR)).filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -'.json'.length));
}

async function allRecords(c: { objects: ObjectStore }): Promise<SnapshotRecord[]> {
  const out: SnapshotRecord[] = [];
  for (const name of await recordNames(c)) {
    const r = await readRecord(c, name);
    if (r) out.push(r); // dropped since the listing
  }
  return out;
}

/** Every snapshot, by name (UTF-8 bytes: names are ASCII). */
export async function listSnapshots(c: SnapshotContext): Promise<SnapshotInfo[]> {
  await c.reader.read(async () => undefined); // a log that does not exist: LOG_NOT_FOUND, not "none"
  return (await allRecords(c)).map(infoOf).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** NOT_FOUND for snapshot `name`, naming the ones that exist (up to NAMES_SHOWN). */
async function notFound(c: SnapshotContext, name: string): Promise<NotFoundError> {
  const names = (await recordNames(c)).sort();
  const shown = names.slice(0, NAMES_SHOWN).map((n) => JSON.stringify(n)).join(', ');
  const more = names.length > NAMES_SHOWN ? ` and ${names.length - NAMES_SHOWN} more (dgcl snapshot --list)` : '';
  return new NotFoundError(`no snapshot ${JSON.stringify(name)} in ${c.uri}; ${names.length === 0 ? 'the log has no snapshots' : `its snapshots: ${shown}${more}`}`);
}

/** Snapshot `name` to read (INVALID_INPUT for a bad name, NOT_FOUND for an unknown one). */
export async function openSnapshot(c: SnapshotContext, name: string, field = 'snapshot'): Promise<SnapshotView> {
  checkSnapshotName(name, field);
  // The listing refuses a log that does not exist (LOG_NOT_FOUND) and gives the log's id.
  const listing = await c.reader.read(async (l) => l);
  const record = await readRecord(c, name);
  // A log deleted and made again at the same place, all but its snapshot records: not its snapshot.
  if (!record || (record.logId !== '' && listing.logId !== '' && record.logId !== listing.logId)) throw await notFound(c, name);
  return new SnapshotView(c, record, { recorded: true });
}

/**
 * Delete snapshot `name`: its record first (from then on it does not exist), then its tag (the
 * base versions it kept may be pruned by the next maintenance pass) and its tail.
 */
export async function dropSnapshot(c: SnapshotContext, name: string): Promise<void> {
  checkSnapshotName(name);
  await c.reader.read(async () => undefined);
  const record = await readRecord(c, name);
  if (!record) throw await notFound(c, name);
  await c.objects.delete(snapshotRecordKey(name));
  // Its tag and tail are leftovers now, which any later sweep deletes.
  await sweepLeftovers(c).catch((e: unknown) => {
    throw new UnavailableError(`snapshot ${JSON.stringify(name)} was dropped, but its base tag or tail could not be deleted yet (the next snapshot or drop deletes them): ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  });
}

/**
 * Delete the tags and tail datasets no snapshot record names, unless an attempt still making its
 * record protects them (its marker, younger than ATTEMPT_GRACE_MS); then the markers of attempts
 * that are over. Listed in this order on purpose: tags and tails, then markers, then records. An
 * attempt puts its marker before its tag and tail and deletes it after its record, so what was
 * listed first is named by a marker or by a record listed after it, unless it is a leftover.
 * Returns the nonces whose leftovers it deleted. A snapshot, a drop and each maintenance pass
 * (lib/log/maintain/maintain.ts, before its prune) run it.
 */
export async function sweepLeftovers(c: Pick<SnapshotContext, 'tables' | 'objects' | 'reader' | 'clock'>): Promise<string[]> {
  const base = await c.tables.base((await c.reader.listShards()).baseExists);
  const tags = base ? Object.keys(await (await base.tags()).list()).filter((t) => t.startsWith(SNAPSHOT_TAG_PREFIX) && NONCE_RE.test(t.slice(SNAPSHOT_TAG_PREFIX.length))) : [];
  const tails = (await c.objects.list(SNAPSHOT_TAILS_DIR)).map((e) => ({ entry: e.replace(/\/$/, ''), nonce: nonceOfTail(e) })).filter((t) => t.nonce !== null);
  const attempts = new Map<string, number>();
  for (const n of await c.objects.list(SNAPSHOT_ATTEMPTS_DIR)) {
    const nonce = n.replace(/\.json$/, '');
    if (!NONCE_RE.test(nonce)) continue;
    const body = await c.objects.get(snapshotAttemptKey(nonce));
    if (body === null) continue; // its attempt just ended: its record is listed below
    attempts.set(nonce, attemptStart(body));
  }
  const records = await allRecords(c);
  const namedTags = new Set(records.map((r) => r.baseTag));
  const namedTails = new Set(records.map((r) => r.tail && `${r.tail}.lance`));
  const recorded = new Set(records.map((r) => r.nonce));
  const now = c.clock.nowMs();
  const running = (nonce: string) => attempts.has(nonce) && now - attempts.get(nonce)! < ATTEMPT_GRACE_MS;
  const swept = new Set<string>();
  for (const tag of tags) {
    const nonce = tag.slice(SNAPSHOT_TAG_PREFIX.length);
    if (namedTags.has(tag) || running(nonce)) continue;
    await deleteTag(base!, tag);
    swept.add(nonce);
  }
  for (const t of tails) {
    if (namedTails.has(t.entry) || running(t.nonce!)) continue;
    await c.objects.deletePrefix(`${SNAPSHOT_TAILS_DIR}/${t.entry}`);
    swept.add(t.nonce!);
  }
  for (const [nonce] of attempts) {
    if (recorded.has(nonce) || !running(nonce)) await c.objects.delete(snapshotAttemptKey(nonce));
  }
  return [...swept];
}

/** Deletes `tag`; one another sweep (a drop's, a maintenance pass's) deleted first is no failure. */
async function deleteTag(base: Table, tag: string): Promise<void> {
  try {
    await (await base.tags()).delete(tag);
  } catch (e) {
    if (tag in (await (await base.tags()).list())) throw e;
  }
}

/** When an attempt began (its marker's body); an unreadable one counts as long over. */
function attemptStart(body: string): number {
  try {
    const t = (JSON.parse(body) as { startedAtMs?: unknown }).startedAtMs;
    return typeof t === 'number' ? t : 0;
  } catch {
    return 0;
  }
}
