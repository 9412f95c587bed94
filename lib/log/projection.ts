/**
 * The item listing projection: the seed's "disposable query projection" for `items()`,
 * `failures()` and status counts (docs/design/projection.md). Maintenance stores the listing
 * aggregate of every item over the base's rows, with the base fragments it counted and their row
 * counts; a listing then reads it, adds the rows it did not count (fragments added since: merges)
 * and the unmerged tail, and recounts from the log the few items it cannot trust (deleted ones,
 * and those whose base copy of an event lost to a tail copy). Never needed for correctness: a
 * projection that does not describe the base the read sees (compaction, a purge) or that is
 * missing or unreadable is ignored, and the listing scans the log as before.
 *
 * Exact, not approximate: fragments are immutable but for deletions, which only lower a
 * fragment's live row count, and fragment ids are never reused; so a fragment present with the
 * counted number of rows holds the rows that were counted. The aggregates are order-insensitive
 * maxima (lib/log/summary.ts): counting the remaining rows onto them gives the scan's answer.
 */
import type * as arrow from 'apache-arrow';
import type { ObjectStore } from '../storage/objects.ts';
import { itemHash } from './layout.ts';
import type { LogReader } from './reader.ts';
import { releaseBatch } from './release.ts';
import { pinnedBase, stream, streamListing } from './stream.ts';
import { compareUtf8, SUMMARY_SCAN_COLUMNS, SummaryVisitor, type ItemAggregate } from './summary.ts';
import { sqlIn, type LanceTables, type Table } from './tables.ts';

export const PROJECTION_KEY = '_dgcl/projection/items.json';
/** Bumped whenever ItemAggregate or what it is computed from changes: older ones are ignored. */
const FORMAT = 1;
/** Items recounted from the log per query, and most recounted before a plain scan is cheaper. */
const RECOUNT_CHUNK = 1000;
const MAX_RECOUNT = 10_000;
const ALL = (): boolean => true;

interface ProjectionDoc {
  format: number;
  /** The base version it was built from (maintenance skips a rebuild while it is current). */
  baseVersion: number;
  /** [fragment id, live rows]: the base rows it counted, as the base held them. */
  fragments: Array<[number, number]>;
  /** Every item of those rows, with the hash tombstones name it by. */
  items: Array<{ h: string; a: ItemAggregate }>;
}

export interface Projection {
  baseVersion: number;
  fragments: ReadonlyMap<number, number>;
  /** The highest fragment id it counted (-1: none): later fragments were added after it. */
  maxFragment: number;
  byId: ReadonlyMap<string, ItemAggregate>;
  hashes: ReadonlyMap<string, string>;
}

/** Live rows per fragment of `base`, from its row ids alone (`fragment << 32 | offset`). */
export async function fragmentRows(base: Table): Promise<Map<number, number>> {
  const counts = new Map<number, number>();
  // An empty projection: Lance reads no column, only the row ids it derives (~20 ms per 10^6 rows).
  const q = base.query().withRowId().select(new Map<string, string>()) as unknown as { execute(o: { maxBatchLength: number }): AsyncIterable<arrow.RecordBatch> };
  for await (const b of await q.execute({ maxBatchLength: 65536 })) {
    const col = b.getChild('_rowid');
    for (const d of col?.data ?? []) {
      const v = d.values as BigUint64Array;
      // The high word of each little-endian u64 is the fragment id; rows come in fragment runs.
      const words = new Uint32Array(v.buffer, v.byteOffset, v.length * 2);
      let f = -1;
      let n = 0;
      for (let i = 1; i < words.length; i += 2) {
        if (words[i] !== f) {
          if (n > 0) counts.set(f, (counts.get(f) ?? 0) + n);
          f = words[i]!;
          n = 0;
        }
        n++;
      }
      if (n > 0) counts.set(f, (counts.get(f) ?? 0) + n);
    }
    releaseBatch(b);
  }
  return counts;
}

/**
 * Whether `p` counted rows of `counts`' base: each of its fragments is there with as many live
 * rows, and every other fragment came after them (so one row-id range selects the rest).
 */
export function covers(p: Projection, counts: ReadonlyMap<number, number>): boolean {
  for (const [f, n] of p.fragments) if (counts.get(f) !== n) return false;
  for (const f of counts.keys()) if (!p.fragments.has(f) && f <= p.maxFragment) return false;
  return true;
}

/** A filter for the base rows `p` did not count (null: it counted them all). */
function uncounted(p: Projection, counts: ReadonlyMap<number, number>): string | null {
  if (counts.size === p.fragments.size) return null;
  return `_rowid >= ${BigInt(p.maxFragment + 1) << 32n}`;
}

function fromDoc(doc: ProjectionDoc): Projection {
  const fragments = new Map(doc.fragments);
  const byId = new Map<string, ItemAggregate>();
  const hashes = new Map<string, string>();
  for (const { h, a } of doc.items) {
    byId.set(a.itemId, a);
    hashes.set(a.itemId, h);
  }
  return { baseVersion: doc.baseVersion, fragments, maxFragment: Math.max(-1, ...fragments.keys()), byId, hashes };
}

/** The stored projection, or null if there is none or it is not one this version can use. */
export async function loadProjection(objects: ObjectStore): Promise<Projection | null> {
  const body = await objects.get(PROJECTION_KEY);
  if (body === null) return null;
  let doc: ProjectionDoc;
  try {
    doc = JSON.parse(body) as ProjectionDoc;
  } catch {
    return null; // disposable: the next maintenance pass writes it again
  }
  if (!isDoc(doc)) return null;
  return fromDoc(doc);
}

function isDoc(d: ProjectionDoc): boolean {
  return (
    typeof d === 'object' &&
    d !== null &&
    d.format === FORMAT &&
    Number.isSafeInteger(d.baseVersion) &&
    Array.isArray(d.fragments) &&
    d.fragments.every((x) => Array.isArray(x) && x.length === 2 && Number.isSafeInteger(x[0]) && Number.isSafeInteger(x[1])) &&
    Array.isArray(d.items) &&
    d.items.every((x) => typeof x?.h === 'string' && typeof x.a?.itemId === 'string' && typeof x.a.lastSeq === 'number')
  );
}

export interface ProjectionReport {
  baseVersion: number;
  items: number;
  /** `current`: the stored one was built from this base version; `added`: it counted the rows added since; `full`: counted every row. */
  built: 'current' | 'added' | 'full';
}

/**
 * Maintenance: bring the stored projection up to the base's current version; counting only the
 * rows added since the stored one when it still describes the base, else every row.
 */
export async function refreshProjection(ctx: { tables: LanceTables; objects: ObjectStore }, baseExists: boolean): Promise<ProjectionReport | null> {
  const latest = await ctx.tables.base(baseExists);
  if (!latest) return null;
  const version = await latest.version();
  const base = await ctx.tables.baseAt(version);
  const counts = await fragmentRows(base);
  const prev = await loadProjection(ctx.objects);
  const usable = prev !== null && covers(prev, counts) ? prev : null;
  if (usable && usable.baseVersion === version) return { baseVersion: version, items: usable.byId.size, built: 'current' };
  const visitor = new SummaryVisitor(usable?.byId);
  const where = usable ? uncounted(usable, counts) : null;
  if (!usable || where !== null) {
    for await (const b of stream(base, where, SUMMARY_SCAN_COLUMNS)) {
      visitor.batch(b, ALL);
      releaseBatch(b);
    }
  }
  const items = visitor.done();
  const doc: ProjectionDoc = {
    format: FORMAT,
    baseVersion: version,
    fragments: [...counts].sort((a, b) => a[0] - b[0]),
    items: items.map((a) => ({ h: usable?.hashes.get(a.itemId) ?? itemHash(a.itemId), a })),
  };
  await ctx.objects.put(PROJECTION_KEY, JSON.stringify(doc));
  return { baseVersion: version, items: items.length, built: usable ? 'added' : 'full' };
}

/** A process's copy of the stored projection (read again when it no longer covers the base). */
export class ProjectionCache {
  private held: Projection | null = null;
  constructor(private readonly objects: ObjectStore) {}

  async covering(counts: ReadonlyMap<number, number>): Promise<Projection | null> {
    if (this.held && covers(this.held, counts)) return this.held;
    this.held = await loadProjection(this.objects);
    return this.held && covers(this.held, counts) ? this.held : null;
  }
}

/**
 * Every item's listing aggregate through the projection, in one consistent read; null when no
 * stored projection describes the base (the caller scans the log instead).
 */
export function projectedAggregates(reader: LogReader, tables: LanceTables, cache: ProjectionCache): Promise<ItemAggregate[] | null> {
  return reader.read(async (listing) => {
    const base = await pinnedBase(tables, listing);
    if (!base) return null;
    const counts = await fragmentRows(base);
    const p = await cache.covering(counts);
    if (!p) return null;
    // Items whose counted aggregate cannot be trusted: deleted ones (it counted their hidden
    // rows), and those whose base copy of an event lost to a tail copy (it counted that copy).
    const recount = new Set<string>();
    if (listing.tombstones.size > 0) for (const [id, h] of p.hashes) if (listing.tombstones.has(h)) recount.add(id);
    const visitor = new SummaryVisitor(p.byId);
    const where = uncounted(p, counts);
    const losers = await streamListing(reader, listing, base, { columns: SUMMARY_SCAN_COLUMNS }, visitor, where === null ? { skipBase: true } : { baseWhere: where });
    for (const id of losers) recount.add(id);
    let out = visitor.done();
    if (recount.size === 0) return out;
    if (recount.size > MAX_RECOUNT) return null;
    out = out.filter((a) => !recount.has(a.itemId));
    const ids = [...recount];
    for (let i = 0; i < ids.length; i += RECOUNT_CHUNK) {
      const exact = new SummaryVisitor();
      await streamListing(reader, listing, base, { columns: SUMMARY_SCAN_COLUMNS, filter: sqlIn('item_id', ids.slice(i, i + RECOUNT_CHUNK)) }, exact);
      out.push(...exact.done());
    }
    return out.sort((a, b) => compareUtf8(a.itemId, b.itemId));
  });
}
