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
 * maxima (lib/log/read/summary.ts): counting the remaining rows onto them gives the scan's answer.
 */
import { guard } from '../../guards.ts';
import { DgclError } from '../../errors.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { EventRow } from '../../types.ts';
import { LoadCache } from './load-cache.ts';
import { RowsDirectories, RowsFileError } from './fold-rows.ts';
import { itemHash } from '../layout.ts';
import type { LogReader } from '../read/reader.ts';
import { pinnedBase, streamListing } from '../read/stream.ts';
import { compareUtf8, mergeAggregates, SUMMARY_SCAN_COLUMNS, SummaryVisitor, type ItemAggregate } from '../read/summary.ts';
import {
  chunkKey,
  covers,
  fragmentFilter,
  fragmentRows,
  freezeAggregate,
  loadChunk,
  parseIndex,
  PROJECTION_KEY,
  rowsKey,
  StaleProjection,
  uncounted,
  type ProjectionIndex,
} from './stored.ts';
import { sqlIn, type LanceTables, type Table } from '../tables.ts';

/**
 * Parsed chunks a process keeps (least recently used go first): a bounded heap whatever the
 * log's size. Paging on, a page finds most fragments' chunks already parsed (a paged walk of a
 * large log takes half the time: docs/design/performance.md, "The listing projection"), and a
 * log of up to 16,000 items is listed again without a GET.
 */
const CACHED_CHUNKS = 16;
/** Items recounted from the log per query, and most recounted before a plain scan is cheaper. */
const RECOUNT_CHUNK = 1000;
const MAX_RECOUNT = 10_000;
/** Most items a walk holds back behind deleted items waiting for their recount. */
const MAX_WINDOW = 20_000;

/**
 * What a process keeps of the stored projection: the index as last read (every read GETs it
 * again, parsing it only when its text changed), parsed chunks and rows-file directories. The
 * aggregates are not held: a walk reads the chunks it needs, so a page costs memory for a page,
 * not for the log (docs/design/projection.md, "Memory").
 */
export class ProjectionCache {
  /**
   * The live rows per fragment of the last pinned base handle counted. A version of a dataset
   * never changes, so a later listing on the same handle (the next page: LanceTables.baseAt
   * hands out one handle per version) skips the pass over the row ids (a BigUint64Array of 8
   * bytes per row). Keyed by the handle, not the version
   * number: a log deleted and made again at the same place numbers its versions from 1 again.
   */
  private counted: { base: Table; counts: Promise<ReadonlyMap<number, number>> } | null = null;
  /** Parsed chunks by key (immutable: the name says what they hold), in order of last use. */
  private readonly chunks = new LoadCache<readonly ItemAggregate[]>(CACHED_CHUNKS);
  /** The rows files' directories folds read (lib/log/projection/fold-rows.ts). */
  readonly rowsDirs: RowsDirectories;
  /** The index as last read: its text, parsed (null: not an index this version reads). */
  private lastIndex: { body: string; index: ProjectionIndex | null } | null = null;
  constructor(readonly objects: ObjectStore) {
    this.rowsDirs = new RowsDirectories(objects);
  }

  /** A chunk's aggregates (frozen: shared by every walk of the process), cached up to CACHED_CHUNKS. */
  chunk(nonce: string, fragment: number, rows: number, k: number): Promise<readonly ItemAggregate[]> {
    return this.chunks.get(chunkKey(nonce, fragment, rows, k), () => loadChunk(this.objects, nonce, fragment, rows, k).then((items) => items.map(freezeAggregate)));
  }

  /**
   * The index as stored now (one GET, parsed again only when its text changed). Read by every
   * fold and listing rather than held: an index held in memory could outlive its log (deleted
   * and made again at the same place, whose fragments and versions are numbered from the start
   * again); the stored one is the log's own, and the nonces it gives
   * are in the names of the documents it names, so nothing cached of another history is taken
   * for this one's.
   */
  async storedIndex(): Promise<ProjectionIndex | null> {
    const body = await this.objects.get(PROJECTION_KEY);
    if (body === null) return null;
    if (this.lastIndex?.body !== body) this.lastIndex = { body, index: parseIndex(body) };
    return this.lastIndex.index;
  }

  /** `fragmentRows` of `base` (a handle pinned at a version), once per handle. */
  fragmentRowsOf(base: Table): Promise<ReadonlyMap<number, number>> {
    if (this.counted?.base !== base) {
      const entry = { base, counts: fragmentRows(base) };
      entry.counts.catch(() => this.counted === entry && (this.counted = null)); // a failed pass is made again
      this.counted = entry;
    }
    return this.counted.counts;
  }

  /** The stored index if it covers the base whose fragment rows `counting` gives. */
  async covering(counting: Promise<ReadonlyMap<number, number>>): Promise<ProjectionIndex | null> {
    const [counts, index] = await Promise.all([counting, this.storedIndex()]);
    return index && (covers(index, counts) || !guard('projection-describes-base')) ? index : null;
  }

  /** Forget what is held (the log is closed). */
  clear(): void {
    this.counted = null;
    this.lastIndex = null;
    this.chunks.clear();
    this.rowsDirs.clear();
  }
}

/**
 * A fragment's aggregates after a cursor, a chunk at a time. A chunk is loaded only when the
 * merge reaches it: until then its first item id (from the index) stands for it.
 */
class FragmentCursor {
  private items: readonly ItemAggregate[] = [];
  private i = 0;
  /** The next chunk to load. */
  private chunk: number;

  constructor(
    private readonly cache: ProjectionCache,
    private readonly nonce: string,
    private readonly fragment: number,
    private readonly rows: number,
    private readonly firstIds: readonly string[],
    lastId: string,
    private readonly after: string | undefined,
  ) {
    if (after !== undefined && compareUtf8(lastId, after) <= 0) this.chunk = firstIds.length; // nothing after it
    else {
      // The chunk holding the cursor's successor: the last starting at or before the cursor.
      let k = 0;
      if (after !== undefined) while (k + 1 < firstIds.length && compareUtf8(firstIds[k + 1]!, after) <= 0) k++;
      this.chunk = k;
    }
  }

  /**
   * The id of the next aggregate after the cursor: null at the end; undefined when the chunk
   * holding it must be loaded first (`load`).
   */
  peek(): string | null | undefined {
    for (;;) {
      const a = this.items[this.i];
      if (a === undefined) break;
      if (this.after !== undefined && compareUtf8(a.itemId, this.after) <= 0) this.i++;
      else return a.itemId;
    }
    if (this.chunk >= this.firstIds.length) return null;
    const first = this.firstIds[this.chunk]!;
    return this.after === undefined || compareUtf8(first, this.after) > 0 ? first : undefined;
  }

  /** Whether the aggregate `peek` named is in memory. */
  loaded(): boolean {
    return this.i < this.items.length;
  }

  async load(): Promise<void> {
    const k = this.chunk++;
    this.items = await this.cache.chunk(this.nonce, this.fragment, this.rows, k);
    this.i = 0;
    // The merge placed the chunk by the first id the index gives for it.
    if (this.items[0]?.itemId !== this.firstIds[k]) throw new StaleProjection(`projection chunk ${chunkKey(this.nonce, this.fragment, this.rows, k)} does not start at ${this.firstIds[k]}`);
  }

  /** The aggregate `peek` named (loaded). */
  take(): ItemAggregate {
    return this.items[this.i++]!;
  }
}

/**
 * Every counted item's aggregate over the counted fragments (merged across them) and the
 * `extra` aggregates (sorted by id: the rows the projection did not count), from `after` on, in
 * item order, a run at a time (a chunk is awaited only between runs). Holds one chunk per
 * fragment.
 */
async function* merged(cache: ProjectionCache, index: ProjectionIndex, after: string | undefined, extra: readonly ItemAggregate[]): AsyncGenerator<ItemAggregate[]> {
  const cursors = [...index.fragments].map(([f, rows]) => new FragmentCursor(cache, index.nonces.get(f)!, f, rows, index.chunks.get(f)!, index.lastIds.get(f)!, after));
  let e = 0;
  while (e < extra.length && after !== undefined && compareUtf8(extra[e]!.itemId, after) <= 0) e++;
  const ids: Array<string | null> = cursors.map(() => null);
  for (;;) {
    const run: ItemAggregate[] = [];
    for (;;) {
      let min: string | null = e < extra.length ? extra[e]!.itemId : null;
      let blocked = false;
      for (let c = 0; c < cursors.length; c++) {
        const id = cursors[c]!.peek();
        if (id === undefined) blocked = true;
        ids[c] = id ?? null;
        if (id && (min === null || compareUtf8(id, min) < 0)) min = id;
      }
      let unloaded = false;
      if (!blocked && min !== null) for (let c = 0; c < cursors.length; c++) if (ids[c] === min && !cursors[c]!.loaded()) unloaded = true;
      if (blocked || unloaded) {
        // A cursor must load before anything is known to come first; or the smallest is not loaded.
        const toLoad = cursors.filter((c, i) => (blocked ? c.peek() === undefined : ids[i] === min && !c.loaded()));
        if (run.length > 0) yield run.splice(0);
        await Promise.all(toLoad.map((c) => c.load()));
        continue;
      }
      if (min === null) {
        if (run.length > 0) yield run;
        return;
      }
      let out: ItemAggregate | null = null;
      for (let c = 0; c < cursors.length; c++) {
        if (ids[c] !== min) continue;
        const a = cursors[c]!.take();
        out = out ? mergeAggregates(out, a) : a;
      }
      if (e < extra.length && extra[e]!.itemId === min) out = out ? mergeAggregates(out, extra[e++]!) : extra[e++]!;
      run.push(out!);
      if (run.length >= 256) break;
    }
    yield run;
  }
}

/** Receives a walk's aggregates in item order; returns false to stop. */
export interface ProjectionVisitor<T> {
  visit(a: ItemAggregate): boolean;
  /** How many more items it can take at most (a page without a status filter); absent: any number. */
  wanted?(): number;
  done(): T;
}

/**
 * Every item's listing aggregate from `after` on, in item order, through the projection, in one
 * consistent read, handed to a visitor made for the read (a read that starts over makes a new
 * one); null when no stored projection describes the base (the caller scans the log instead).
 * Memory: one chunk per counted fragment, the aggregates of the rows it did not count (merges
 * since and the unmerged tail, bounded by what maintenance leaves), and a window of recounts.
 */
export function walkProjected<T>(reader: LogReader, tables: LanceTables, cache: ProjectionCache, after: string | undefined, make: () => ProjectionVisitor<T>): Promise<T | null> {
  return reader.read(async (listing) => {
    const base = await pinnedBase(tables, listing);
    if (!base) return null;
    const counting = cache.fragmentRowsOf(base);
    // Settled even when the projection is not needed (a rejection must not go unhandled).
    counting.catch(() => undefined);
    const index = await cache.covering(counting);
    const counts = await counting;
    if (!index) return null;
    // The rows it did not count: base fragments merged since, and the unmerged tail.
    const tail = new SummaryVisitor();
    const rest = uncounted(index, counts);
    const losers = await streamListing(reader, listing, base, { columns: SUMMARY_SCAN_COLUMNS, keepTail: true }, tail, rest.length === 0 ? { skipBase: true, itemsFirst: true } : { baseWhere: fragmentFilter(rest), itemsFirst: true });
    // Items whose counted aggregate cannot be trusted are counted again from all their rows:
    // deleted ones (it counted their hidden rows; at most one per tombstone), and those whose
    // base copy of an event lost to a tail copy (it counted that copy).
    if (losers.size + listing.tombstones.size > MAX_RECOUNT) return null;
    const recount = async (ids: readonly string[]): Promise<Map<string, ItemAggregate>> => {
      const exact = new Map<string, ItemAggregate>();
      for (let i = 0; i < ids.length; i += RECOUNT_CHUNK) {
        const v = new SummaryVisitor();
        await streamListing(reader, listing, base, { columns: SUMMARY_SCAN_COLUMNS, filter: sqlIn('item_id', ids.slice(i, i + RECOUNT_CHUNK)) }, v);
        for (const a of v.done()) exact.set(a.itemId, a);
      }
      return exact;
    };
    // The losers are known now: counted again before the walk. Deleted items are known by hash
    // only, so they are recounted as the walk meets them, in windows.
    const lost = await recount([...losers]);
    const tombs = listing.tombstones;
    const deleted = (id: string) => tombs.size > 0 && tombs.has(itemHash(id));
    const visitor = make();
    let window: Array<{ a: ItemAggregate; deleted: boolean }> = [];
    let waiting = 0;
    /** Hands the window to the visitor, recounted where needed; false once the visitor stopped. */
    const flush = async (): Promise<boolean> => {
      const exact = await recount(window.filter((w) => w.deleted).map((w) => w.a.itemId));
      const out = window;
      window = [];
      waiting = 0;
      for (const w of out) {
        const x = w.deleted ? exact.get(w.a.itemId) : w.a;
        if (x && !visitor.visit(x)) return false; // a recounted item without visible rows is gone
      }
      return true;
    };
    try {
      for await (const run of merged(cache, index, after, tail.done())) {
        for (const m of run) {
          const a = losers.has(m.itemId) ? lost.get(m.itemId) : m;
          if (!a) continue; // no visible rows left
          const d = deleted(a.itemId) && !losers.has(a.itemId);
          // Handed over at once unless a recount waits before it: a page stops after its items.
          if (window.length === 0 && !d) {
            if (!visitor.visit(a)) return visitor.done();
            continue;
          }
          window.push({ a, deleted: d });
          if (d) waiting++;
          // Recounted once enough wait, the window is large, or it holds all the visitor can take.
          const full = waiting >= RECOUNT_CHUNK || window.length >= MAX_WINDOW || window.length >= (visitor.wanted?.() ?? Infinity);
          if (full && !(await flush())) return visitor.done();
        }
      }
      await flush();
    } catch (e) {
      // A chunk deleted after the index was read (a newer index replaced it): scan this once.
      if (e instanceof StaleProjection) return null;
      throw e;
    }
    return visitor.done();
  });
}

/** Every item's aggregate through the projection (in item order), or null when none describes the base. */
export function projectedAggregates(reader: LogReader, tables: LanceTables, cache: ProjectionCache): Promise<ItemAggregate[] | null> {
  return walkProjected(reader, tables, cache, undefined, () => {
    const all: ItemAggregate[] = [];
    return { visit: (a) => (all.push(a), true), done: () => all };
  });
}

/**
 * The base rows of one item (LIGHT_COLUMNS, as a Lance query returns them) through the fold
 * projection (lib/log/projection/fold-rows.ts), or null when it does not describe `base`'s current version
 * or one of its files cannot be read: the caller queries Lance. `base` is the latest handle; the
 * version it reports is the one a query would have read at that moment. The index is read at
 * the same time (a log whose base moved on since maintenance pays that GET on top of the query).
 */
export async function projectedItemRows(cache: ProjectionCache, base: Table, itemId: string): Promise<EventRow[] | null> {
  try {
    const [version, index] = await Promise.all([base.version(), cache.storedIndex()]);
    if (!index || (index.baseVersion !== version && guard('rows-files-match-base'))) return null;
    const reads: Array<Promise<EventRow[]>> = [];
    for (const [f, rows] of index.fragments) {
      const firstIds = index.chunks.get(f)!;
      if (compareUtf8(itemId, firstIds[0]!) < 0 || compareUtf8(itemId, index.lastIds.get(f)!) > 0) continue;
      let k = 0;
      while (k + 1 < firstIds.length && compareUtf8(firstIds[k + 1]!, itemId) <= 0) k++;
      reads.push(cache.rowsDirs.itemRows(rowsKey(index.nonces.get(f)!, f, rows, k), itemId));
    }
    return (await Promise.all(reads)).flat();
  } catch (e) {
    // Damaged, missing or left out, or storage trouble: Lance answers, or fails for itself.
    if (e instanceof RowsFileError || e instanceof DgclError) return null;
    throw e;
  }
}
