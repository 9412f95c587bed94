/**
 * Repair and adoption (docs/operations.md, "Repairing a log"): everything a log keeps beside its
 * events, rebuilt from its events and `_dgcl/meta`, under a new log id:
 *  - item markers (one per item with events or a delete), claims (one per checkpoint), in a new
 *    store: the lease table under the new id's scope, or a new `_dgcl/coord.sqlite` on a local root;
 *  - the sentinel naming the log's location (table logs), and the lease epoch counters of the new
 *    scope, raised above every epoch the log's shards and seals name;
 *  - the coordination record naming all of it (the switch), and a new `_dgcl/meta/log.<id>` (the
 *    log's identity: processes that read it before reload what they kept of it).
 *
 * Why a rebuilt record cannot make a writer trust a stale cached track or answer a duplicate
 * twice (docs/design/invariants.md, "Repair and adoption"): the old scope's writers are stopped
 * first (every slot lease and the maintainer lease of the old scope taken; a running writer makes
 * the repair wait up to a lease ttl and then refuse), every epoch with generations is sealed, so
 * the events read afterwards are all the log will ever show of them; markers are rebuilt with
 * bodies no writer ever put, so every writer reads each item from the log before it writes it
 * again; and a process that takes a lease of the old scope later reads the record again and moves
 * to the new scope (lib/log/write/slot.ts).
 */
import { mapLimit } from '../../map-limit.ts';
import { randomBytes, randomUUID } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import path from 'node:path';
import type { RehomeReport } from '../../api.ts';
import type { Clock } from '../../clock.ts';
import { CHOICE_KEY, canonicalLocation, formatCoordRecord, readCoordRecord, SENTINEL_KEY, type CoordRecord } from '../../coord/choose.ts';
import { coordDbKey, SqliteCoordStore } from '../../coord/sqlite.ts';
import type { CoordStore, CoordTable } from '../../coord/types.ts';
import { CorruptError, InvalidInputError, UnavailableError } from '../../errors.ts';
import { guard } from '../../guards.ts';
import { formatWriterEpoch, parseWriterEpoch, slotKey } from '../../lease/slots.ts';
import type { LeaseStore } from '../../lease/types.ts';
import { LocalObjectStore } from '../../storage/local.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { claimKey, DELETED_DIR, ITEMS_DIR, itemHash, logIdKey, SNAPSHOT_RECORDS_DIR, maxEpochPerSlot, META_DIR, parseMetaNames } from '../layout.ts';
import { PROJECTION_DIR } from '../projection/stored.ts';
import type { LogReader } from '../read/reader.ts';
import { scanEvents } from '../read/stream.ts';
import type { LanceTables } from '../tables.ts';
import { writeSeal } from '../write-seal.ts';
import { SWITCH_HOLD_MS, SWITCH_LANDS_WITHIN_MS, SwitchOutcomeUnknownError, takeOldScope, type OldScope } from './old-scope.ts';
import { Int64Column, Utf8Column } from '../columns.ts';

/** `repair`: the log at its own place; `adopt`: a copy or a restore made by other tools; `init`: a new copy's records. */
export type RehomeMode = 'repair' | 'adopt' | 'init';

/** What a mode is called in messages. */
const WHAT: Record<RehomeMode, string> = { repair: 'repair', adopt: 'adoption', init: 'copy' };

export interface RehomeContext {
  objects: ObjectStore;
  leases: LeaseStore;
  coordTable: CoordTable | null;
  tables: LanceTables;
  reader: LogReader;
  pipeline: string;
  experiment: string;
  owner: string;
  clock: Clock;
  leaseTtlMs: number;
  claimRetentionMs: number;
  /** How long the old scope's leases stay held after the switch (tests only; default RETIRED_LEASE_TTL_MS). */
  retiredLeaseTtlMs?: number;
}

export type { RehomeReport };

/** Concurrent record writes to the lease table (each a request) and the lease store. */
const WRITE_CONCURRENCY = 32;
/**
 * Record writes to a SQLite file per transaction: the writes queued in one turn of the event loop
 * are one transaction (lib/coord/sqlite.ts), and the per-transaction cost was most of the rebuild's
 * time. Nothing else writes the new file meanwhile, so a long lock keeps nobody waiting.
 */
const SQLITE_TRANSACTION = 16_384;

/**
 * How far the new scope's epoch counters start above the highest epoch the log or the old scope's
 * leases name. A writer of a lost lease table that took an epoch and froze before its first
 * generation is named nowhere that survived; its epoch is at most this far above the log's, unless
 * its slot was taken that many times since its last generation.
 */
const EPOCH_GAP = 1000;

/**
 * What a log's records are rebuilt from: its items' hashes (markers) and each checkpoint's seqs
 * (claims). A fork knows them from what it wrote (lib/log/admin/fork.ts) and hands them to its
 * `init`, which then reads no events; every other rebuild reads them from the events.
 */
export interface RehomeRecords {
  items: Set<string>;
  checkpoints: Map<string, CheckpointSpan>;
}

export async function rehome(ctx: RehomeContext, mode: RehomeMode, known?: RehomeRecords): Promise<RehomeReport> {
  const logName = `${ctx.pipeline}/${ctx.experiment}`;
  const current = await readCoordRecord(ctx.objects);
  const kind = newKind(ctx);
  const copyOf = current ? await originOf(ctx, logName, current.record) : null;
  if (mode === 'repair' && copyOf !== null) {
    throw new InvalidInputError(`the log ${ctx.objects.baseUri} is a copy of ${copyOf}: its records are the original's, not its own; run \`dgcl adopt\` to make it a log of its own`, { field: 'root' });
  }
  // A copy's old scope is its origin's: those leases fence the origin's writers, not this log's.
  const held = mode === 'init' || copyOf !== null ? null : await takeOldScope(ctx, current?.record ?? null);
  let switched = false;
  try {
    const sealedEpochs = await sealAll(ctx, held);
    const { items, checkpoints } = mode === 'init' && known ? await withDeleted(ctx, known) : await readRecords(ctx);
    const id = randomUUID();
    const store = await newStore(ctx, kind, logName, id);
    try {
      const markerBody = `rebuilt ${randomUUID()}`;
      const claimedBy = `rebuilt/${randomUUID()}`;
      const claim = ([checkpointId, c]: [string, CheckpointSpan]) => JSON.stringify({ checkpointId, events: c.events, firstSeq: c.firstSeq, lastSeq: c.lastSeq, claimedBy });
      // In key order: in a SQLite file each insert lands beside the last in the key index, not on a random page.
      const sqlite = kind === 'sqlite';
      await putAll([...items].sort(), sqlite, (hash) => store.put(`${ITEMS_DIR}/${hash}`, markerBody));
      const spans = [...checkpoints].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      await putAll(spans, sqlite, (e) => store.putIfAbsent(claimKey(e[0]), claim(e), { expiresAfterMs: ctx.claimRetentionMs }));
      // Last: a record naming a store without its sentinel is refused, so a repair that stopped
      // half way is never taken for a finished one.
      await store.put(SENTINEL_KEY, canonicalLocation(ctx.objects.baseUri));
      await store.sync?.();
    } finally {
      store.close?.();
    }
    await raiseEpochs(ctx, id, held?.slots ?? new Map());
    // The record read at the start is still the log's: an earlier repair's switch that landed late
    // meanwhile made other records the log's, which these were not rebuilt over.
    const now = (await readCoordRecord(ctx.objects))?.body ?? null;
    if (now !== (current?.body ?? null)) {
      throw new UnavailableError(`the coordination record of ${ctx.objects.baseUri} changed while the ${WHAT[mode]} ran (from ${JSON.stringify(current?.body ?? null)} to ${JSON.stringify(now)}: an earlier repair's switch landed late, or a writer made the log's record); nothing was switched: run it again`);
    }
    // Every lease of the old scope still ours: nobody wrote with the old records since they were read.
    if (held) await held.confirm();
    const record = formatCoordRecord({ kind, id, scoped: true });
    // The switch: from here on every process that opens the log, or takes a lease of it, uses the new records.
    await ctx.objects.put(CHOICE_KEY, record).catch((e: unknown) => {
      const what = held
        ? `The old records stay locked (their leases held) for ${SWITCH_HOLD_MS / 60_000} minutes, so nothing is written under them if the PUT lands late; keep the writers stopped and run the ${WHAT[mode]} again after that`
        : `Start no writer of the log; run this again after ${SWITCH_LANDS_WITHIN_MS / 60_000} minutes (the PUT may land until then)`;
      throw new SwitchOutcomeUnknownError(`the switch of ${ctx.objects.baseUri} to its new records (the PUT of ${CHOICE_KEY}) failed, its outcome unknown: ${e instanceof Error ? e.message : String(e)}. ${what}`, { cause: e });
    });
    switched = true;
    const identity = await renewIdentity(ctx.objects);
    // The log's snapshots are of this history: they name its new id (lib/log/snapshot/catalog.ts).
    await carrySnapshots(ctx.objects, identity);
    // Processes still using the old records fail their next group and move (lib/log/write/plan.ts).
    if (current && copyOf === null) await dropOldRecords(ctx, logName, current.record);
    // Disposable, and possibly of another history (a restore): the next maintenance pass builds it.
    await ctx.objects.deletePrefix(PROJECTION_DIR);
    return { logId: id, record, previous: current?.body ?? null, markers: items.size, claims: checkpoints.size, sealedEpochs, fencedLeases: held?.leases.length ?? 0 };
  } finally {
    await held?.end(switched);
  }
}

/** Where the new records go: the lease table when the process has one, else a local root's SQLite file. */
function newKind(ctx: RehomeContext): CoordRecord['kind'] {
  if (ctx.coordTable) return 'table';
  if (ctx.objects instanceof LocalObjectStore) return 'sqlite';
  throw new InvalidInputError(`the log ${ctx.objects.baseUri} can be repaired only with a DynamoDB lease table (DGCL_LEASE_TABLE) or on a local root`, { field: 'leases' });
}

/** The location a table log's sentinel names when it is not this one (a copy), else null. */
async function originOf(ctx: RehomeContext, logName: string, r: CoordRecord): Promise<string | null> {
  if (r.id === null) return null;
  let sentinel: string | null = null;
  if (r.kind === 'sqlite') {
    if (!(ctx.objects instanceof LocalObjectStore)) return null;
    const db = await SqliteCoordStore.open(ctx.objects.dir, { create: false }).catch(() => null); // lost: nothing to compare
    try {
      sentinel = (await db?.get(SENTINEL_KEY)) ?? null;
    } finally {
      db?.close();
    }
  } else if (ctx.coordTable) sentinel = await ctx.coordTable.coordStore(`${logName}/${r.id}`).get(SENTINEL_KEY);
  return sentinel !== null && sentinel !== canonicalLocation(ctx.objects.baseUri) ? sentinel : null;
}

/**
 * Seal every epoch with generations (or a fence) and no seal, at the versions its generations have
 * now; and, per slot of the old scope whose previous holder never released its lease, the epoch
 * before the one the repair holds, even without generations: a writer of it frozen before its
 * first generation makes one that stays invisible.
 */
async function sealAll(ctx: RehomeContext, held: OldScope | null): Promise<string[]> {
  const listing = await ctx.reader.listShards();
  const sealed = new Set(listing.sealedEpochs);
  const open = new Set<string>();
  for (const v of listing.visible) if (!v.sealed) open.add(v.writerEpoch);
  for (const p of listing.pending) open.add(p.writerEpoch);
  for (const f of listing.fencedEpochs) if (!sealed.has(f)) open.add(f);
  for (const [slot, epoch] of held?.sealPrevious ?? []) if (epoch > 1) open.add(formatWriterEpoch(slot, epoch - 1));
  const out = [...open].filter((e) => !sealed.has(e)).sort(byEpoch);
  // Only epochs below the one the repair holds are over: a writer that took the slot after a lease
  // of the repair ran out holds a later epoch, live, and sealing it would hide its acked commits.
  for (const e of out) {
    const { slot, epoch } = parseWriterEpoch(e);
    const mine = held?.slots.get(slot);
    if (mine !== undefined && epoch >= mine && guard('repair-seals-below-held')) {
      throw new UnavailableError(`writer epoch ${e} of ${ctx.pipeline}/${ctx.experiment} began after the repair took slot ${slot} (epoch ${mine}): a writer took it once the repair's lease ran out; nothing was sealed or switched: stop the writers and run it again`);
    }
  }
  for (const e of out) await writeSeal(ctx, e, `rehome/${ctx.owner}`, ctx.clock);
  return out;
}

/** Writer epochs by slot, then epoch as a number (`e1000000` after `e999999`). */
function byEpoch(a: string, b: string): number {
  const x = parseWriterEpoch(a);
  const y = parseWriterEpoch(b);
  return x.slot - y.slot || x.epoch - y.epoch;
}

export interface CheckpointSpan {
  events: number;
  firstSeq: number;
  lastSeq: number;
}

/** `write` of every record: to a SQLite file SQLITE_TRANSACTION per transaction, else WRITE_CONCURRENCY at once. */
async function putAll<T>(records: readonly T[], sqlite: boolean, write: (r: T) => Promise<unknown>): Promise<void> {
  if (!sqlite) {
    await mapLimit(records, WRITE_CONCURRENCY, write);
    return;
  }
  for (let i = 0; i < records.length; i += SQLITE_TRANSACTION) await Promise.all(records.slice(i, i + SQLITE_TRANSACTION).map(write));
}

/** Item hashes with events or deletes, and each checkpoint's seqs, from one pass over the events. */
async function readRecords(ctx: RehomeContext): Promise<RehomeRecords> {
  const { items, checkpoints } = await scanEvents(ctx.reader, ctx.tables, { columns: ['item_id', 'checkpoint_id', 'item_seq'] }, () => {
    const items = new Set<string>();
    const ids = new Set<string>();
    const checkpoints = new Map<string, CheckpointSpan>();
    return {
      batch(b, keep) {
        const item = new Utf8Column(b, 'item_id');
        const checkpoint = new Utf8Column(b, 'checkpoint_id');
        const seq = new Int64Column(b, 'item_seq');
        for (let i = 0; i < b.numRows; i++) {
          if (!keep(i)) continue;
          const id = item.get(i);
          const c = checkpoint.get(i);
          const s = seq.get(i);
          if (id === null || c === null || s === null) throw new CorruptError(`an event of ${ctx.objects.baseUri} has no item id, checkpoint id or seq`);
          if (!ids.has(id)) {
            ids.add(id);
            items.add(itemHash(id));
          }
          const span = checkpoints.get(c);
          if (span) {
            span.events++;
            span.firstSeq = Math.min(span.firstSeq, s);
            span.lastSeq = Math.max(span.lastSeq, s);
          } else checkpoints.set(c, { events: 1, firstSeq: s, lastSeq: s });
        }
      },
      done: () => ({ items, checkpoints }),
    };
  });
  return withDeleted(ctx, { items, checkpoints });
}

/** The records with a marker added for each item with a deleted-seq record. */
async function withDeleted(ctx: RehomeContext, { items, checkpoints }: RehomeRecords): Promise<RehomeRecords> {
  // Deleted items keep their deleted-seq records: their markers keep writers from taking them for new.
  for (const hash of await ctx.objects.list(DELETED_DIR)) {
    if (!/^[0-9a-f]{40}$/.test(hash)) throw new CorruptError(`${DELETED_DIR}/${hash} of ${ctx.objects.baseUri} is not an item's deleted-seq folder`);
    items.add(hash);
  }
  return { items, checkpoints };
}

/** An empty store for the new records. */
async function newStore(ctx: RehomeContext, kind: CoordRecord['kind'], logName: string, id: string): Promise<CoordStore> {
  if (kind === 'table') return ctx.coordTable!.coordStore(`${logName}/${id}`);
  // A file of its own, beside the old one: the record's PUT is the switch.
  return SqliteCoordStore.open((ctx.objects as LocalObjectStore).dir, { create: true, clock: ctx.clock, id });
}

/**
 * The new scope's slot epochs start EPOCH_GAP above every epoch the log names (shards, fences,
 * seals, retirements) and every epoch the old scope gave (the leases the repair holds).
 */
async function raiseEpochs(ctx: RehomeContext, id: string, held: ReadonlyMap<number, number>): Promise<void> {
  const meta = parseMetaNames(await ctx.objects.list(META_DIR));
  const epochs = [...meta.gens, ...[...meta.retired]].map((g) => g.replace(/-g\d+$/, ''));
  const max = maxEpochPerSlot([...epochs, ...meta.sealEpochs, ...meta.fenceEpochs]);
  for (const [slot, epoch] of held) max.set(slot, Math.max(max.get(slot) ?? 0, epoch));
  await mapLimit([...max], WRITE_CONCURRENCY, ([slot, epoch]) => ctx.leases.raiseEpoch(slotKey(ctx.pipeline, ctx.experiment, slot, id), epoch + EPOCH_GAP));
}

/**
 * After the switch, what the log's previous records were: the table scope's location record (a
 * process still using that scope then fails its next group and moves to the new one), or the
 * SQLite file (and its write-ahead log). Best effort: the log is already switched.
 */
async function dropOldRecords(ctx: RehomeContext, logName: string, r: CoordRecord): Promise<void> {
  if (r.kind === 'sqlite' && ctx.objects instanceof LocalObjectStore) {
    const file = path.join(ctx.objects.dir, ...coordDbKey(r.id).split('/'));
    for (const f of [file, `${file}-wal`, `${file}-shm`]) await fsp.rm(f, { force: true }).catch(() => undefined);
  } else if (r.id !== null && ctx.coordTable) {
    await ctx.coordTable.coordStore(`${logName}/${r.id}`).delete(SENTINEL_KEY).catch(() => undefined);
  }
}

/** A new `_dgcl/meta/log.<id>`, the old ones deleted: every process that kept something of the log reloads it. */
async function renewIdentity(objects: ObjectStore): Promise<string> {
  const old = (await objects.list(META_DIR)).filter((n) => n.startsWith('log.'));
  const id = randomBytes(8).toString('hex');
  await objects.putIfAbsent(logIdKey(id), '');
  for (const n of old) await objects.delete(`${META_DIR}/${n}`);
  return id;
}

/** Each snapshot record rewritten with the log's new id (its other contents as they were). */
async function carrySnapshots(objects: ObjectStore, logId: string): Promise<void> {
  for (const file of await objects.list(SNAPSHOT_RECORDS_DIR)) {
    if (!file.endsWith('.json')) continue;
    const key = `${SNAPSHOT_RECORDS_DIR}/${file}`;
    const body = await objects.get(key);
    if (body === null) continue; // dropped meanwhile
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(body) as Record<string, unknown>;
    } catch (e) {
      throw new CorruptError(`snapshot record ${key} of ${objects.baseUri} is not JSON`, { cause: e });
    }
    await objects.put(key, JSON.stringify({ ...record, logId }));
  }
}
