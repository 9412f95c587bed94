/**
 * Streaming reads over the whole log: Arrow record batches of chosen columns from the base and
 * every visible shard generation, each event exactly once, in bounded memory (the base is never
 * held whole; only the unmerged tail is). What listings, reports and exports aggregate over.
 *
 * Exactly once: reads keep one copy per event_id, the one with the smallest item_seq (fold's
 * rule, lib/fold.ts). Copies come from merges (base + a shard not yet retired) and from duplicate
 * deliveries through several writers. The shards' rows are read first (they are the small
 * unmerged tail); their ids are looked up in the base with one indexed query, and the rare base
 * copy that loses to a shard copy is excluded by the base query's filter, so base rows reach the
 * visitor with no per-row check in JavaScript.
 */
import type * as arrow from 'apache-arrow';
import { rowsFromArrow } from '../../schema.ts';
import type { EventRow } from '../../types.ts';
import type { LogReader, ShardListing } from './reader.ts';
import { readTail } from './tail-cut.ts';
import { projection, sqlIn, type LanceTables, type Table } from '../tables.ts';
import { Utf8Column, Int64Column } from '../columns.ts';
import { deletedThrough } from '../deleted.ts';
import { releaseBatch } from './release.ts';

export interface EventVisitor<T> {
  /**
   * Rows for which `keep(row)` is false are duplicate copies of events met elsewhere: skip them.
   * `b`'s memory is released when this returns (lib/log/read/release.ts): copy out what you keep
   * (strings, numbers, copied bytes), never `b`, its columns or views of its buffers.
   */
  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void;
  done(): T;
}

export interface ScanOptions {
  /** What the visitor reads: every batch holds these (some hold more; read nothing else). */
  columns: readonly string[];
  /** A Lance SQL predicate, or null for every event. */
  filter?: string | null;
  /**
   * Keep the unmerged generations' rows in the reader for the next unfiltered scan with these
   * columns (lib/log/read/tail-cache.ts): for listings, which repeat; one-off passes keep nothing.
   */
  keepTail?: boolean;
}

const ALL = (): boolean => true;
/** Ids per base lookup query (the SQL text stays well below any limit). */
const LOOKUP_CHUNK = 1000;
/** Base rows an `itemsFirst` query reads before it takes the rest of its items as held. */
const ITEMS_FIRST_ROWS = 20_000;

/**
 * Feed every visible event matching `o.filter` to a visitor made by `make()`, through the
 * consistent read (LogReader.read): when the read starts over, `make()` is called again.
 */
export function scanEvents<T>(reader: LogReader, tables: LanceTables, o: ScanOptions, make: () => EventVisitor<T>): Promise<T> {
  return reader.read(async (listing) => {
    const visitor = make();
    // One base version for the lookup and the stream: a merge committing between them would
    // put into the stream copies the lookup did not see (events delivered twice).
    await streamListing(reader, listing, await pinnedBase(tables, listing), o, visitor);
    return visitor.done();
  });
}

/** The base at its current version, pinned (null while it does not exist). */
export async function pinnedBase(tables: LanceTables, listing: ShardListing): Promise<Table | null> {
  const latest = await tables.base(listing.baseExists);
  return latest ? tables.baseAt(await latest.version()) : null;
}

export interface StreamExtras {
  /** Also required of the base's streamed rows (not of the tail, nor of the copy lookup). */
  baseWhere?: string;
  /** Stream none of the base's rows (the caller counted them); the lookup still uses it. */
  skipBase?: boolean;
  /**
   * Before looking tail events up in the base, ask which of their items the base holds at all
   * (`item_id IN (...)`, 1,000 at a time) and look up only theirs: a live writer's new items
   * cost one query instead of one per 1,000 of their events (the projection's listings).
   */
  itemsFirst?: boolean;
  /** Hand on deleted items' rows too (the caller applies the tombstones itself). */
  keepDeleted?: boolean;
}

/**
 * One consistent read's stream (call it inside `LogReader.read`) over `base` (pinned) and the
 * listing's visible generations. Returns the items of events whose base copy lost to a tail
 * copy (a lower seq): the base stream skips that copy, and a caller that counted the base's rows
 * some other way (lib/log/projection/projection.ts) must count those items again.
 */
export function streamListing(
  reader: LogReader,
  listing: ShardListing,
  base: Table | null,
  o: ScanOptions,
  visitor: EventVisitor<unknown>,
  extras: StreamExtras = {},
): Promise<Set<string>> {
  // Unfiltered: whole generations taken by offset (one take per generation costs about half a
  // scan of its fragments), kept by the reader for listings (shared: not released after); each
  // item as it was at one moment (lib/log/read/tail-cut.ts).
  const tail: TailRead = (columns, filter) => readTail(reader, listing, columns, filter, o.keepTail === true);
  return streamUnion(tail, extras.keepDeleted ? new Map() : listing.tombstones, base, o, visitor, extras);
}

/**
 * The unmerged tail's rows with `columns` matching `filter` (null: all), with per batch the rows
 * to take (`masks`, absent or null: all); `shared` batches (all, or per batch) are kept by someone
 * else (the reader's tail cache): never released.
 */
export type TailRead = (
  columns: readonly string[],
  filter: string | null,
) => Promise<{ batches: arrow.RecordBatch[]; masks?: ReadonlyArray<((row: number) => boolean) | null>; shared: boolean | readonly boolean[] }>;

/**
 * `streamListing` over any base and tail: a consistent read's (the base pinned, the visible
 * generations) or a snapshot's (the base at its tag, the rows it copied: lib/log/snapshot/),
 * with the tombstones in force for it.
 */
export async function streamUnion(
  tail: TailRead,
  tombs: ReadonlyMap<string, number>,
  base: Table | null,
  o: ScanOptions,
  visitor: EventVisitor<unknown>,
  extras: StreamExtras = {},
): Promise<Set<string>> {
  const filter = o.filter ?? null;
  // Deleted items' rows are dropped by the keep functions (docs/design/deletion.md).
  const forTombs = tombs.size > 0 ? ['item_id', 'item_seq'] : [];
  // The tail's rows also carry what picks one copy per event, and their items (a read takes each
  // item's rows at one moment: lib/log/read/tail-cut.ts); the base's only what the visitor and
  // tombstones read: event ids are the widest column, and a pass over item ids alone (a listing
  // page) read them for nothing, doubling its peak memory (docs/design/performance.md, "Memory of
  // whole-log reads").
  const tailColumns = [...new Set([...o.columns, 'event_id', 'item_seq', 'item_id', ...forTombs])];
  const baseColumns = [...new Set([...o.columns, ...forTombs])];
  const alive = (b: arrow.RecordBatch): ((row: number) => boolean) | null => (tombs.size === 0 ? null : aliveRows(b, tombs));

  // 1. The unmerged tail, whole, with the copy of each event it should contribute.
  const { batches: shardBatches, masks, shared } = await tail(tailColumns, filter);
  /** event_id -> [batch index, row, seq] of the tail's lowest-seq copy. */
  const chosen = new Map<string, [number, number, number]>();
  shardBatches.forEach((b, bi) => {
    const ids = new Utf8Column(b, 'event_id');
    const seqs = new Int64Column(b, 'item_seq');
    const taken = masks?.[bi] ?? null;
    for (let r = 0; r < b.numRows; r++) {
      if (taken && !taken(r)) continue;
      const id = ids.get(r)!;
      const seq = seqs.get(r)!;
      const prev = chosen.get(id);
      if (!prev || seq < prev[2]) chosen.set(id, [bi, r, seq]);
    }
  });

  // 2. Which of those the base holds too, and which copy wins.
  const baseLoses: string[] = [];
  const loserItems = new Set<string>();
  if (base && chosen.size > 0) {
    let ids = [...chosen.keys()];
    if (extras.itemsFirst) {
      const cols = shardBatches.map((b) => new Utf8Column(b, 'item_id'));
      const itemOf = new Map<string, string>();
      for (const [id, [bi, r]] of chosen) itemOf.set(id, cols[bi]!.get(r)!);
      const items = [...new Set(itemOf.values())];
      const held = new Set<string>();
      for (let i = 0; i < items.length; i += LOOKUP_CHUNK) {
        const part = items.slice(i, i + LOOKUP_CHUNK);
        // The query returns every base row of these items: it stops once each was seen, and
        // past ITEMS_FIRST_ROWS rows (items with long histories) takes them all as held, to be
        // looked up by event as without this.
        let rows = 0;
        let seen = 0;
        for await (const b of stream(base, sqlIn('item_id', part), ['item_id'])) {
          const col = new Utf8Column(b, 'item_id');
          for (let r = 0; r < b.numRows; r++) {
            const id = col.get(r)!;
            if (!held.has(id)) {
              held.add(id);
              seen++;
            }
          }
          rows += b.numRows;
          releaseBatch(b);
          if (seen === part.length) break;
          if (rows > ITEMS_FIRST_ROWS) {
            for (const id of part) held.add(id);
            break;
          }
        }
      }
      ids = ids.filter((id) => held.has(itemOf.get(id)!));
    }
    for (let i = 0; i < ids.length; i += LOOKUP_CHUNK) {
      const part = ids.slice(i, i + LOOKUP_CHUNK);
      for (const b of await collect(base, sqlIn('event_id', part), ['event_id', 'item_seq', 'item_id'])) {
        const bid = new Utf8Column(b, 'event_id');
        const bseq = new Int64Column(b, 'item_seq');
        const bitem = new Utf8Column(b, 'item_id');
        for (let r = 0; r < b.numRows; r++) {
          const id = bid.get(r)!;
          const c = chosen.get(id);
          if (!c) continue;
          // Equal seqs: the copies are the same event (a merge's copy): the base's is kept.
          if (bseq.get(r)! <= c[2]) chosen.delete(id);
          else {
            baseLoses.push(id);
            loserItems.add(bitem.get(r)!);
          }
        }
        releaseBatch(b);
      }
    }
  }

  // 3. The base, streamed; then the tail's chosen copies.
  if (base && !extras.skipBase) {
    const exclude = baseLoses.length > 0 ? `NOT (${sqlIn('event_id', baseLoses)})` : null;
    const where = [filter, extras.baseWhere ?? null, exclude].filter((x): x is string => x !== null).map((x) => `(${x})`).join(' AND ') || null;
    for await (const b of stream(base, where, baseColumns)) {
      visitor.batch(b, alive(b) ?? ALL);
      releaseBatch(b);
    }
  }
  const keep = new Set<string>();
  for (const [bi, r] of chosen.values()) keep.add(`${bi}:${r}`);
  shardBatches.forEach((b, bi) => {
    const live = alive(b);
    visitor.batch(b, live ? (r) => keep.has(`${bi}:${r}`) && live(r) : (r) => keep.has(`${bi}:${r}`));
    if (!(typeof shared === 'boolean' ? shared : shared[bi])) releaseBatch(b);
  });
  return loserItems;
}

/** Which rows of `b` no tombstone hides; item ids are decoded once per run of equal ids. */
function aliveRows(b: arrow.RecordBatch, tombs: ReadonlyMap<string, number>): (row: number) => boolean {
  const ids = new Utf8Column(b, 'item_id');
  const seqs = new Int64Column(b, 'item_seq');
  const alive = new Uint8Array(b.numRows);
  let through = 0;
  for (let r = 0; r < b.numRows; r++) {
    if (r === 0 || !ids.same(r, r - 1)) through = deletedThrough(tombs, ids.get(r) ?? '');
    alive[r] = seqs.get(r)! > through ? 1 : 0;
  }
  return (r) => alive[r] === 1;
}

function query(t: Table, filter: string | null, columns: readonly string[]) {
  let q = t.query().select(projection(columns));
  if (filter) q = q.where(filter);
  return q;
}

/** Rows per streamed batch: Lance's default (1,024) makes the per-batch cost dominate a scan. */
const BATCH_ROWS = 32768;

export async function* stream(t: Table, filter: string | null, columns: readonly string[]): AsyncGenerator<arrow.RecordBatch> {
  // `execute` is the documented iteration with options (protected in the typings only). Awaited:
  // a wrapped table (the simulation) may return it through a promise.
  const q = query(t, filter, columns) as unknown as { execute(o: { maxBatchLength: number }): AsyncIterable<arrow.RecordBatch> };
  yield* await q.execute({ maxBatchLength: BATCH_ROWS });
}

export async function collect(t: Table, filter: string | null, columns: readonly string[]): Promise<arrow.RecordBatch[]> {
  const out: arrow.RecordBatch[] = [];
  for await (const b of stream(t, filter, columns)) out.push(b);
  return out;
}

/** A visitor that collects the rows it is to keep (`batchRows`) into `out`. */
export function rowCollector(out: EventRow[]): EventVisitor<void> {
  return {
    batch(b, keep) {
      const rows = batchRows(b);
      for (let r = 0; r < rows.length; r++) if (keep(r)) out.push(rows[r]!);
    },
    done() {},
  };
}

/**
 * The rows of a batch, owning their memory (strings and blob bytes are copied). rowsFromArrow
 * reads only numRows and getChild; LanceDB's batches come from its own copy of apache-arrow.
 */
export function batchRows(b: arrow.RecordBatch): EventRow[] {
  return rowsFromArrow({ numRows: b.numRows, getChild: (name: string) => b.getChild(name) } as unknown as arrow.Table);
}
