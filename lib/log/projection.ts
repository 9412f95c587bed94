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
import { UnavailableError } from '../errors.ts';
import type { ObjectStore } from '../storage/objects.ts';
import { itemHash } from './layout.ts';
import type { LogReader } from './reader.ts';
import { releaseBatch } from './release.ts';
import { pinnedBase, stream, streamListing } from './stream.ts';
import { decodeAggregate, encodeAggregate, ProjectionFormatError } from './projection-codec.ts';
import { compareUtf8, mergeAggregates, SUMMARY_SCAN_COLUMNS, SummaryVisitor, type ItemAggregate } from './summary.ts';
import { sqlIn, type LanceTables, type Table } from './tables.ts';

export const PROJECTION_DIR = '_dgcl/projection';
/** The index: which fragment documents make up the projection of which base version. */
export const PROJECTION_KEY = `${PROJECTION_DIR}/items.json`;
/** Bumped whenever ItemAggregate, its encoding or what it is computed from changes: older ones are ignored. */
const FORMAT = 2;
/** Items recounted from the log per query, and most recounted before a plain scan is cheaper. */
const RECOUNT_CHUNK = 1000;
const MAX_RECOUNT = 10_000;
const ALL = (): boolean => true;

/**
 * One fragment's document: the aggregates of its rows while it has `rows` live rows. The name
 * carries the format: maintenance decides what to count from the names it lists, so a document
 * another release wrote must not pass for one of this format (review9 F1).
 */
export const fragmentKey = (fragment: number, rows: number) => `${PROJECTION_DIR}/frag-v${FORMAT}-${fragment}-${rows}.json`;

interface IndexDoc {
  format: number;
  /** The base version it was built from (maintenance skips a pass while it is current). */
  baseVersion: number;
  /** [fragment id, live rows]: each has a document (fragmentKey); together, every row counted. */
  fragments: Array<[number, number]>;
}

interface FragmentDoc {
  format: number;
  fragment: number;
  rows: number;
  items: unknown[];
}

export interface Projection {
  baseVersion: number;
  fragments: ReadonlyMap<number, number>;
  /** Every counted item's aggregate over the counted rows (fragments merged). */
  byId: ReadonlyMap<string, ItemAggregate>;
  /** Item id -> the hash tombstones name it by, computed on first need. */
  hashes: Map<string, string>;
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

function freezeAggregate(a: ItemAggregate): ItemAggregate {
  for (const v of [a.first, a.created, a.cursorAt, a.cursor, a.stepAt, a.failureAt, a.failure, a.terminalAt]) if (v) Object.freeze(v);
  return Object.freeze(a);
}

/** Whether every counted fragment is in `counts`' base with as many live rows (so, the same rows). */
export function covers(p: { fragments: ReadonlyMap<number, number> }, counts: ReadonlyMap<number, number>): boolean {
  for (const [f, n] of p.fragments) if (counts.get(f) !== n) return false;
  return true;
}

/** A filter for the rows of `fragments` (runs of consecutive ids as row-id ranges). */
export function fragmentFilter(fragments: readonly number[]): string {
  const ids = [...fragments].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < ids.length; ) {
    let j = i;
    while (j + 1 < ids.length && ids[j + 1] === ids[j]! + 1) j++;
    parts.push(`(_rowid >= ${BigInt(ids[i]!) << 32n} AND _rowid < ${BigInt(ids[j]! + 1) << 32n})`);
    i = j + 1;
  }
  return parts.join(' OR ');
}

/** The base's fragments `p` did not count (rows merged since it was built). */
function uncounted(p: Projection, counts: ReadonlyMap<number, number>): number[] {
  return [...counts.keys()].filter((f) => !p.fragments.has(f));
}

async function getJson(objects: ObjectStore, key: string): Promise<unknown> {
  const body = await objects.get(key);
  if (body === null) return null;
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return null; // disposable: maintenance writes it again
  }
}

async function loadIndex(objects: ObjectStore): Promise<IndexDoc | null> {
  const d = (await getJson(objects, PROJECTION_KEY)) as IndexDoc | null;
  const ok =
    typeof d === 'object' &&
    d !== null &&
    d.format === FORMAT &&
    Number.isSafeInteger(d.baseVersion) &&
    Array.isArray(d.fragments) &&
    d.fragments.every((x) => Array.isArray(x) && x.length === 2 && Number.isSafeInteger(x[0]) && Number.isSafeInteger(x[1]));
  return ok ? d : null;
}

/** A fragment's aggregates, or null when its document is missing or not one this version reads. */
async function loadFragment(objects: ObjectStore, fragment: number, rows: number): Promise<ItemAggregate[] | null> {
  const d = (await getJson(objects, fragmentKey(fragment, rows))) as FragmentDoc | null;
  if (typeof d !== 'object' || d === null || d.format !== FORMAT || d.fragment !== fragment || d.rows !== rows || !Array.isArray(d.items)) return null;
  try {
    // Frozen: the process shares them across reads; a change in place would alter later answers.
    return d.items.map((x) => freezeAggregate(decodeAggregate(x)));
  } catch (e) {
    if (e instanceof ProjectionFormatError) return null;
    throw e;
  }
}

export interface ProjectionReport {
  baseVersion: number;
  /** Fragments the projection counts, and how many of their rows this pass counted (0: it was current). */
  fragments: number;
  countedRows: number;
}

/**
 * Maintenance: bring the stored projection up to the base's current version. A fragment's
 * document stays valid while the fragment keeps its live rows; only fragments without one
 * (written by merges or compaction since, or with rows deleted since) are counted.
 */
export async function refreshProjection(ctx: { tables: LanceTables; objects: ObjectStore }, baseExists: boolean): Promise<ProjectionReport | null> {
  const latest = await ctx.tables.base(baseExists);
  if (!latest) return null;
  const version = await latest.version();
  const base = await ctx.tables.baseAt(version);
  const counts = await fragmentRows(base);
  const prev = await loadIndex(ctx.objects);
  const stored = new Set(await ctx.objects.list(PROJECTION_DIR));
  const present = (f: number, rows: number) => stored.has(fragmentKey(f, rows).slice(PROJECTION_DIR.length + 1));
  const missing = [...counts].filter(([f, rows]) => !present(f, rows));
  const report = { baseVersion: version, fragments: counts.size, countedRows: 0 };
  const current = missing.length === 0 && prev?.baseVersion === version && covers({ fragments: new Map(prev.fragments) }, counts);
  for (const [f, rows] of current ? [] : missing) {
    const visitor = new SummaryVisitor();
    let seen = 0;
    for await (const b of stream(base, fragmentFilter([f]), SUMMARY_SCAN_COLUMNS)) {
      seen += b.numRows;
      visitor.batch(b, ALL);
      releaseBatch(b);
    }
    if (seen !== rows) throw new UnavailableError(`base fragment ${f} read ${seen} rows, ${rows} counted`);
    const doc: FragmentDoc = { format: FORMAT, fragment: f, rows, items: visitor.done().map(encodeAggregate) };
    // Durable create: a name present is a whole document (a power cut during a plain put could
    // leave an empty file under it, which no later pass would count again). Its content follows
    // from its name, so one already there (another maintainer's) is as good.
    await ctx.objects.putIfAbsent(fragmentKey(f, rows), JSON.stringify(doc));
    report.countedRows += rows;
  }
  const index: IndexDoc = { format: FORMAT, baseVersion: version, fragments: [...counts].sort((a, b) => a[0] - b[0]) };
  if (!current) await ctx.objects.put(PROJECTION_KEY, JSON.stringify(index));
  // Documents the index does not name go now (also after a pass that stopped before this), even
  // if a reader holds the previous index (it then finds one missing and scans): a purge rewrote
  // the fragments holding a deleted item, and the old fragments' documents hold its id and
  // failures (docs/design/deletion.md).
  const keep = new Set(index.fragments.map(([f, rows]) => fragmentKey(f, rows).slice(PROJECTION_DIR.length + 1)));
  for (const name of stored) if (name.startsWith('frag-') && !keep.has(name)) await ctx.objects.delete(`${PROJECTION_DIR}/${name}`);
  return report;
}

/**
 * Delete every fragment document that does not describe a fragment of the base as it is now
 * (fragment gone, or its live rows changed), whatever its format. The purge calls it before it
 * drops any tombstone: the fragments it rewrote held a deleted item, whose id and failures their
 * documents hold, and a projection step that fails in the same pass (or a pass that stops after
 * the purge's commit: the next one finds no rows left to purge) must not keep them. Readers then
 * find the index naming a missing document and scan until the next projection step. Fragment ids
 * are never reused, so no current document is deleted.
 */
export async function dropStaleDocs(objects: ObjectStore, base: Table): Promise<void> {
  const live = await fragmentRows(base);
  for (const name of await objects.list(PROJECTION_DIR)) {
    const m = /^frag-v\d+-(\d+)-(\d+)\.json$/.exec(name);
    if (m && live.get(Number(m[1])) !== Number(m[2])) await objects.delete(`${PROJECTION_DIR}/${name}`);
  }
}

/** A process's copy of the stored projection (read again when it no longer covers the base). */
export class ProjectionCache {
  private held: Projection | null = null;
  /** Fragment documents by key: immutable, kept while the held projection names them. */
  private docs = new Map<string, ItemAggregate[]>();
  /**
   * The live rows per fragment of the last pinned base handle counted. A version of a dataset
   * never changes, so a later listing on the same handle (the next page: LanceTables.baseAt
   * hands out one handle per version) skips the pass over the row ids (~20 ms and a
   * BigUint64Array of 8 bytes per row, per 10^6 rows). Keyed by the handle, not the version
   * number: a log deleted and made again at the same place numbers its versions from 1 again
   * (review22 R1).
   */
  private counted: { base: Table; counts: Promise<ReadonlyMap<number, number>> } | null = null;
  constructor(private readonly objects: ObjectStore) {}

  /** `fragmentRows` of `base` (a handle pinned at a version), once per handle. */
  fragmentRowsOf(base: Table): Promise<ReadonlyMap<number, number>> {
    if (this.counted?.base !== base) {
      const entry = { base, counts: fragmentRows(base) };
      entry.counts.catch(() => this.counted === entry && (this.counted = null)); // a failed pass is made again
      this.counted = entry;
    }
    return this.counted.counts;
  }

  /**
   * The projection if it covers the base whose fragment rows `counting` gives. A process's first
   * read loads the stored one while the base's row ids are counted (its parse is the larger part).
   */
  async covering(counting: Promise<ReadonlyMap<number, number>>): Promise<Projection | null> {
    if (this.held) {
      const counts = await counting;
      if (covers(this.held, counts)) return this.held;
      this.held = null;
    }
    const [counts, stored] = await Promise.all([counting, this.load()]);
    // Merged only once it is known to cover the base (a stale one costs no merge per listing).
    if (!stored || !covers(stored, counts)) return null;
    this.held = { baseVersion: stored.baseVersion, fragments: stored.fragments, byId: mergeDocs(stored.docs.values()), hashes: new Map() };
    return this.held;
  }

  /** Forget what is held (the log is closed). */
  clear(): void {
    this.held = null;
    this.counted = null;
    this.docs = new Map();
  }

  /** The stored index and its documents (those already held are not read again), or null. */
  private async load(): Promise<{ baseVersion: number; fragments: Map<number, number>; docs: Map<string, ItemAggregate[]> } | null> {
    const index = await loadIndex(this.objects);
    if (!index) return null;
    const fragments = new Map(index.fragments);
    const docs = new Map<string, ItemAggregate[]>();
    for (const [f, rows] of fragments) {
      const key = fragmentKey(f, rows);
      const doc = this.docs.get(key) ?? (await loadFragment(this.objects, f, rows));
      if (!doc) return null; // deleted after a newer index was written: the next read finds that one
      docs.set(key, doc);
    }
    this.docs = docs;
    return { baseVersion: index.baseVersion, fragments, docs };
  }
}

/** Every item's aggregate over the documents' fragments together. */
function mergeDocs(docs: Iterable<ItemAggregate[]>): Map<string, ItemAggregate> {
  const byId = new Map<string, ItemAggregate>();
  for (const doc of docs) {
    for (const a of doc) {
      const had = byId.get(a.itemId);
      byId.set(a.itemId, had ? freezeAggregate(mergeAggregates(had, a)) : a);
    }
  }
  return byId;
}

/**
 * Every item's listing aggregate through the projection, in one consistent read; null when no
 * stored projection describes the base (the caller scans the log instead).
 */
export function projectedAggregates(reader: LogReader, tables: LanceTables, cache: ProjectionCache): Promise<ItemAggregate[] | null> {
  return reader.read(async (listing) => {
    const base = await pinnedBase(tables, listing);
    if (!base) return null;
    const counting = cache.fragmentRowsOf(base);
    // Settled even when the projection is not needed (a rejection must not go unhandled).
    counting.catch(() => undefined);
    const p = await cache.covering(counting);
    const counts = await counting;
    if (!p) return null;
    // Items whose counted aggregate cannot be trusted: deleted ones (it counted their hidden
    // rows), and those whose base copy of an event lost to a tail copy (it counted that copy).
    const recount = new Set<string>();
    if (listing.tombstones.size > 0) {
      for (const id of p.byId.keys()) {
        let h = p.hashes.get(id);
        if (h === undefined) p.hashes.set(id, (h = itemHash(id)));
        if (listing.tombstones.has(h)) recount.add(id);
      }
    }
    const visitor = new SummaryVisitor(p.byId);
    const rest = uncounted(p, counts);
    // Without rows added since, only items it counted can have a base copy of a tail event.
    const extras = rest.length === 0 ? { skipBase: true, mayBeInBase: (id: string) => p.byId.has(id) } : { baseWhere: fragmentFilter(rest) };
    const losers = await streamListing(reader, listing, base, { columns: SUMMARY_SCAN_COLUMNS, keepTail: true }, visitor, extras);
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
