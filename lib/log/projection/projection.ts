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
import { randomBytes } from 'node:crypto';
import type * as arrow from 'apache-arrow';
import { DgclError, UnavailableError } from '../../errors.ts';
import { LIGHT_COLUMNS, rowsFromArrow } from '../../schema.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { EventRow } from '../../types.ts';
import { LoadCache } from './load-cache.ts';
import { assembleRowsFile, encodeItem, LeftOutError, ROWS_NAME, rowsName, RowsDirectories, RowsFileError } from './fold-rows.ts';
import { itemHash } from '../layout.ts';
import type { LogReader } from '../read/reader.ts';
import { releaseBatch } from '../read/release.ts';
import { pinnedBase, stream, streamListing } from '../read/stream.ts';
import { decodeAggregate, encodeAggregate, ProjectionFormatError } from './projection-codec.ts';
import { compareUtf8, mergeAggregates, SUMMARY_SCAN_COLUMNS, SummaryVisitor, type ItemAggregate } from '../read/summary.ts';
import { projection, sqlIn, sqlString, type LanceTables, type Table } from '../tables.ts';

export const PROJECTION_DIR = '_dgcl/projection';
/** The index: which fragment documents make up the projection of which base version. */
export const PROJECTION_KEY = `${PROJECTION_DIR}/items.json`;
/** Bumped whenever ItemAggregate, its encoding, its layout or what it is computed from changes: older ones are ignored. */
const FORMAT = 6;
/** Aggregates per chunk document: a page reads one chunk (or two) per fragment, not the fragment's every item. */
export const CHUNK_ITEMS = 1000;
/**
 * Parsed chunks a process keeps (least recently used go first): ~0.5 MB of heap each, so ~8 MB
 * whatever the log's size. Paging on, a page finds most fragments' chunks already parsed (at
 * 10^7 events, 200 pages of 1,000: 1.1-1.2 s against 2.3-2.8 s without; peak RSS ~30 MB more),
 * and a log of up to 16,000 items is listed again without a GET.
 */
const CACHED_CHUNKS = 16;
/** Items recounted from the log per query, and most recounted before a plain scan is cheaper. */
const RECOUNT_CHUNK = 1000;
const MAX_RECOUNT = 10_000;
/** Most items a walk holds back behind deleted items waiting for their recount. */
const MAX_WINDOW = 20_000;
const ALL = (): boolean => true;

/**
 * One fragment's head: written after its chunks, so a head present means a whole document. The
 * name carries the format: maintenance decides what to count from the names it lists, so a
 * document another release wrote must not pass for one of this format (review9 F1).
 */
export const fragmentKey = (nonce: string, fragment: number, rows: number) => `${PROJECTION_DIR}/frag-v${FORMAT}-n${nonce}-${fragment}-${rows}.json`;
/** The `chunk`-th part of a fragment's aggregates (CHUNK_ITEMS each, in item order). */
export const chunkKey = (nonce: string, fragment: number, rows: number, chunk: number) => `${PROJECTION_DIR}/frag-v${FORMAT}-n${nonce}-${fragment}-${rows}-${chunk}.json`;
/** A fragment's rows file for chunk `chunk` (the fold projection: lib/log/projection/fold-rows.ts). */
export const rowsKey = (nonce: string, fragment: number, rows: number, chunk: number) => `${PROJECTION_DIR}/${rowsName(nonce, fragment, rows, chunk)}`;
/**
 * Each fragment's documents carry a nonce in their names, new each time maintenance counts the
 * fragment, and the index gives it. (fragment id, live rows, chunk) alone names the same rows
 * only within one history of a log: a log deleted and made again at the same place, or restored
 * from an archive, numbers fragments (and versions) as the lost history did, and a process that
 * outlived it must not take what it keeps under those names (parsed chunks, rows-file
 * directories) for the new rows (review22 R1, review32 F1, review33 F1).
 */
const NONCE = /^[0-9a-f]{12}$/;
const newNonce = (): string => randomBytes(6).toString('hex');
/** A head of this format: nonce, fragment id, live rows. */
const HEAD_NAME = new RegExp(`^frag-v${FORMAT}-n([0-9a-f]{12})-(\\d+)-(\\d+)\\.json$`);
/** Items of the first query of a fragment's rows files; each later one holds at most twice the last one's, and MAX_QUERY_ITEMS. */
const FIRST_QUERY_ITEMS = 64;
const MAX_QUERY_ITEMS = 256;
/** Most bytes of gzipped rows in one rows file (a chunk's items past it are left out). */
const MAX_FILE_BYTES = 256 * 2 ** 20;
/** Bytes of rows (as JSON) a query of a fragment's rows files aims at: later ranges are sized by it. */
const ROWS_JSON_PER_QUERY = 32 * 2 ** 20;
/** Any format's fragment head or chunk: fragment id, live rows. */
const DOC_NAME = /^frag-v\d+-(?:[a-z][0-9a-f]*-)?(\d+)-(\d+)(?:-\d+)?\.json$/;

/** [fragment id, live rows, nonce of its documents' names, first item id of each chunk, last item id]. */
type FragmentEntry = [number, number, string, string[], string];

interface IndexDoc {
  format: number;
  /** The base version it was built from (maintenance skips a pass while it is current). */
  baseVersion: number;
  /** Every counted fragment; together, every row counted. */
  fragments: FragmentEntry[];
}

interface HeadDoc {
  format: number;
  fragment: number;
  rows: number;
  firstIds: string[];
  lastId: string;
}

interface ChunkDoc {
  format: number;
  fragment: number;
  rows: number;
  chunk: number;
  items: unknown[];
}

/** The stored projection's index, parsed (a process holds it while it covers the base). */
export interface ProjectionIndex {
  baseVersion: number;
  fragments: ReadonlyMap<number, number>;
  /** Fragment id -> the nonce in its documents' names. */
  nonces: ReadonlyMap<number, string>;
  /** Fragment id -> first item id of each of its chunks. */
  chunks: ReadonlyMap<number, readonly string[]>;
  /** Fragment id -> its last item id. */
  lastIds: ReadonlyMap<number, string>;
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
function uncounted(p: ProjectionIndex, counts: ReadonlyMap<number, number>): number[] {
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

const isIds = (x: unknown): x is string[] => Array.isArray(x) && x.length > 0 && x.every((id) => typeof id === 'string');

async function loadIndex(objects: ObjectStore): Promise<ProjectionIndex | null> {
  const body = await objects.get(PROJECTION_KEY);
  return body === null ? null : parseIndex(body);
}

function parseIndex(body: string): ProjectionIndex | null {
  let d: IndexDoc | null;
  try {
    d = JSON.parse(body) as IndexDoc | null;
    if (typeof d !== 'object' || d === null) return null;
  } catch {
    return null; // disposable: maintenance writes it again
  }
  const ok =
    typeof d === 'object' &&
    d !== null &&
    d.format === FORMAT &&
    Number.isSafeInteger(d.baseVersion) &&
    Array.isArray(d.fragments) &&
    d.fragments.every((x) => Array.isArray(x) && x.length === 5 && Number.isSafeInteger(x[0]) && Number.isSafeInteger(x[1]) && typeof x[2] === 'string' && NONCE.test(x[2]) && isIds(x[3]) && typeof x[4] === 'string');
  if (!ok) return null;
  return {
    baseVersion: d.baseVersion,
    fragments: new Map(d.fragments.map(([f, rows]) => [f, rows])),
    nonces: new Map(d.fragments.map(([f, , nonce]) => [f, nonce])),
    chunks: new Map(d.fragments.map(([f, , , ids]) => [f, ids])),
    lastIds: new Map(d.fragments.map(([f, , , , last]) => [f, last])),
  };
}

/** A fragment's head (first ids of its chunks, last id), or null when missing or not one this version reads. */
async function loadHead(objects: ObjectStore, nonce: string, fragment: number, rows: number): Promise<{ firstIds: string[]; lastId: string } | null> {
  const d = (await getJson(objects, fragmentKey(nonce, fragment, rows))) as HeadDoc | null;
  if (typeof d !== 'object' || d === null || d.format !== FORMAT || d.fragment !== fragment || d.rows !== rows || !isIds(d.firstIds) || typeof d.lastId !== 'string') return null;
  return { firstIds: d.firstIds, lastId: d.lastId };
}

/** Thrown when a chunk the index names is missing or unreadable: the listing scans instead. */
class StaleProjection extends Error {}

/** One chunk's aggregates, in item order. */
async function loadChunk(objects: ObjectStore, nonce: string, fragment: number, rows: number, chunk: number): Promise<ItemAggregate[]> {
  const d = (await getJson(objects, chunkKey(nonce, fragment, rows, chunk))) as ChunkDoc | null;
  if (typeof d !== 'object' || d === null || d.format !== FORMAT || d.fragment !== fragment || d.rows !== rows || d.chunk !== chunk || !Array.isArray(d.items)) {
    throw new StaleProjection(`projection chunk ${chunkKey(nonce, fragment, rows, chunk)} missing or unreadable`);
  }
  try {
    return d.items.map(decodeAggregate);
  } catch (e) {
    if (e instanceof ProjectionFormatError) throw new StaleProjection(e.message);
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
  const nameOf = (key: string) => key.slice(PROJECTION_DIR.length + 1);
  const report = { baseVersion: version, fragments: counts.size, countedRows: 0 };
  // Heads of this format present, by fragment and live rows (a pass whose index was lost).
  const headNonces = new Map<string, string[]>();
  for (const name of stored) {
    const m = HEAD_NAME.exec(name);
    if (m) headNonces.set(`${m[2]}-${m[3]}`, [...(headNonces.get(`${m[2]}-${m[3]}`) ?? []), m[1]!]);
  }
  // Each fragment's head: from the previous index, else read; a fragment without a whole one
  // is counted again, under a new nonce (a create keeps what is there: new names, never a
  // leftover's).
  const heads = new Map<number, { nonce: string; firstIds: string[]; lastId: string }>();
  const missing: Array<[number, number]> = [];
  const dirs = new RowsDirectories(ctx.objects);
  for (const [f, rows] of counts) {
    const candidates = prev?.fragments.get(f) === rows ? [prev.nonces.get(f)!] : (headNonces.get(`${f}-${rows}`) ?? []);
    for (const nonce of candidates) {
      if (!stored.has(nameOf(fragmentKey(nonce, f, rows)))) continue;
      const head = prev?.fragments.get(f) === rows ? { firstIds: [...prev.chunks.get(f)!], lastId: prev.lastIds.get(f)! } : await loadHead(ctx.objects, nonce, f, rows);
      // A head is whole only with every chunk and rows file it names: a stale maintainer's
      // cleanup, or one deleting another's leftovers, can leave a head without them (review31 F2).
      const whole = head && head.firstIds.every((_, k) => stored.has(nameOf(chunkKey(nonce, f, rows, k))) && stored.has(rowsName(nonce, f, rows, k)));
      const last = head ? head.firstIds.length - 1 : 0;
      if (whole && (await holdsItem(dirs, base, nonce, f, rows, 0, head.firstIds[0]!)) && (await holdsItem(dirs, base, nonce, f, rows, last, head.lastId))) {
        heads.set(f, { nonce, ...head });
        break;
      }
    }
    if (!heads.has(f)) missing.push([f, rows]);
  }
  const current = missing.length === 0 && prev?.baseVersion === version && covers(prev, counts);
  for (const [f, rows] of missing) {
    // Leftovers of this fragment (a pass that failed after writing some; another maintainer's
    // unfinished set) go first: each count writes under a new nonce, so failing passes would
    // otherwise pile them up until a pass succeeds (review34 F3).
    for (const name of stored) {
      const m = DOC_NAME.exec(name) ?? ROWS_NAME.exec(name);
      if (m && Number(m[1]) === f && Number(m[2]) === rows) await ctx.objects.delete(`${PROJECTION_DIR}/${name}`);
    }
    const nonce = newNonce();
    const visitor = new SummaryVisitor();
    let seen = 0;
    for await (const b of stream(base, fragmentFilter([f]), SUMMARY_SCAN_COLUMNS)) {
      seen += b.numRows;
      visitor.batch(b, ALL);
      releaseBatch(b);
    }
    if (seen !== rows) throw new UnavailableError(`base fragment ${f} read ${seen} rows, ${rows} counted`);
    const items = visitor.done(); // in item order
    const ids: string[] = [];
    // Durable creates: a name present is a whole document (a power cut during a plain put could
    // leave an empty file under it, which no later pass would count again). The head last.
    for (let k = 0; k * CHUNK_ITEMS < items.length; k++) {
      const part = items.slice(k * CHUNK_ITEMS, (k + 1) * CHUNK_ITEMS);
      ids.push(part[0]!.itemId);
      const doc: ChunkDoc = { format: FORMAT, fragment: f, rows, chunk: k, items: part.map(encodeAggregate) };
      await ctx.objects.putIfAbsent(chunkKey(nonce, f, rows, k), JSON.stringify(doc));
    }
    await writeRowsFiles(ctx.objects, base, nonce, f, rows, items.map((a) => a.itemId));
    const head: HeadDoc = { format: FORMAT, fragment: f, rows, firstIds: ids, lastId: items.at(-1)!.itemId };
    await ctx.objects.putIfAbsent(fragmentKey(nonce, f, rows), JSON.stringify(head));
    heads.set(f, { nonce, firstIds: ids, lastId: head.lastId });
    report.countedRows += rows;
  }
  const entries: FragmentEntry[] = [...counts].sort((a, b) => a[0] - b[0]).map(([f, rows]) => {
    const h = heads.get(f)!;
    return [f, rows, h.nonce, h.firstIds, h.lastId];
  });
  const index: IndexDoc = { format: FORMAT, baseVersion: version, fragments: entries };
  if (!current) await ctx.objects.put(PROJECTION_KEY, JSON.stringify(index));
  // Documents the index does not name go now (also after a pass that stopped before this), even
  // if a reader holds the previous index (it then finds one missing and scans): a purge rewrote
  // the fragments holding a deleted item, and the old fragments' documents hold its id and
  // failures (docs/design/deletion.md).
  const keep = new Set<string>();
  for (const [f, rows, nonce, ids] of entries) {
    keep.add(nameOf(fragmentKey(nonce, f, rows)));
    for (let k = 0; k < ids.length; k++) keep.add(nameOf(chunkKey(nonce, f, rows, k))).add(rowsName(nonce, f, rows, k));
  }
  for (const name of stored) if ((name.startsWith('frag-') || ROWS_NAME.test(name)) && !keep.has(name)) await ctx.objects.delete(`${PROJECTION_DIR}/${name}`);
  return report;
}

/**
 * Whether the documents under `nonce` look like this history's fragment `f`: `itemId` (the
 * fragment's first item, then its last) has the same events (ids) in chunk `k`'s rows file as
 * in the fragment. A fragment id and live row count repeat across histories of a log (deleted
 * and made again, restored from an archive), and a pass of the old history still running then
 * can write its documents and index into the new one (review34 F1). Event ids hash the
 * checkpoints' content, so another history's fragment passes only if its first and last items
 * have the same events: a re-run of the same inputs can (review35 F1); then what lies between is
 * not checked. Two point reads per fragment and pass. An item left out of its file (too large)
 * is not checked.
 */
async function holdsItem(dirs: RowsDirectories, base: Table, nonce: string, f: number, rows: number, k: number, itemId: string): Promise<boolean> {
  let stored: EventRow[];
  try {
    stored = await dirs.itemRows(rowsKey(nonce, f, rows, k), itemId);
  } catch (e) {
    if (e instanceof LeftOutError) return true;
    if (e instanceof RowsFileError) return false;
    throw e;
  }
  const live = rowsFromArrow(await base.query().select(projection(['event_id', 'item_id'])).where(`(${fragmentFilter([f])}) AND item_id = ${sqlString(itemId)}`).toArrow());
  const ids = (r: readonly EventRow[]) => r.map((x) => x.event_id).sort().join('\n');
  return live.length > 0 && ids(stored) === ids(live);
}

/**
 * The fold projection's files of fragment `f` (lib/log/projection/fold-rows.ts): chunk k's items (`ids`, in
 * item order, CHUNK_ITEMS a chunk) with all their rows in the fragment. Queried by item ranges
 * within the fragment, streamed, each item's rows gzipped as its range is read. A query holds
 * FIRST_QUERY_ITEMS items, then as many as make about ROWS_JSON_PER_QUERY bytes of rows by what
 * the last one held, at most twice its items and MAX_QUERY_ITEMS: memory does not grow with the
 * fragment; it is bounded by MAX_QUERY_ITEMS times the largest item's rows (review32 F2,
 * review33 F3, review34 F2: item sizes are not known before they are read), and an item's rows
 * are held whole (as a Lance fold of it holds them). Written before the fragment's head, durable creates as the
 * chunks are.
 */
async function writeRowsFiles(objects: ObjectStore, base: Table, nonce: string, f: number, rows: number, ids: readonly string[]): Promise<void> {
  let step = FIRST_QUERY_ITEMS;
  let blocks: Array<[string, Buffer | null]> = [];
  let fileBytes = 0;
  let seen = 0;
  for (let i = 0; i < ids.length; ) {
    const j = Math.min(ids.length, i + step);
    const range = `item_id >= ${sqlString(ids[i]!)} AND item_id <= ${sqlString(ids[j - 1]!)}`;
    const byItem = new Map<string, EventRow[]>();
    for await (const b of stream(base, `(${fragmentFilter([f])}) AND ${range}`, LIGHT_COLUMNS)) {
      for (const r of rowsFromArrow(b as unknown as arrow.Table)) {
        const list = byItem.get(r.item_id);
        if (list) list.push(r);
        else byItem.set(r.item_id, [r]);
      }
      releaseBatch(b);
    }
    let json = 0;
    for (let k = i; k < j; k++) {
      const itemId = ids[k]!;
      const list = byItem.get(itemId);
      if (!list) throw new UnavailableError(`base fragment ${f}: no rows of ${JSON.stringify(itemId)}, which its aggregates hold`);
      byItem.delete(itemId);
      seen += list.length;
      const { block, jsonBytes } = encodeItem(list);
      json += jsonBytes;
      // An item whose block would take the file past its bound is left out (its folds query Lance).
      const kept = block && fileBytes + block.length <= MAX_FILE_BYTES ? block : null;
      fileBytes += kept?.length ?? 0;
      blocks.push([itemId, kept]);
      if ((k + 1) % CHUNK_ITEMS === 0 || k + 1 === ids.length) {
        await objects.putIfAbsent(rowsKey(nonce, f, rows, Math.floor(k / CHUNK_ITEMS)), assembleRowsFile(blocks));
        blocks = [];
        fileBytes = 0;
      }
    }
    i = j;
    step = Math.max(1, Math.min(2 * step, MAX_QUERY_ITEMS, Math.floor((step * ROWS_JSON_PER_QUERY) / Math.max(1, json))));
  }
  if (seen !== rows) throw new UnavailableError(`base fragment ${f}: its rows files hold ${seen} rows, ${rows} counted`);
}

/**
 * Delete every fragment document (head or chunk) that does not describe a fragment of the base as
 * it is now (fragment gone, or its live rows changed), whatever its format. The purge calls it
 * before it drops any tombstone: the fragments it rewrote held a deleted item, whose id and
 * failures their documents hold, and a projection step that fails in the same pass (or a pass
 * that stops after the purge's commit: the next one finds no rows left to purge) must not keep
 * them. Readers then find no index and scan until the next projection step. Fragment ids are
 * never reused, so no current document is deleted (nothing at all when a pass on a later base
 * wrote the index).
 */
export async function dropStaleDocs(objects: ObjectStore, base: Table): Promise<void> {
  const live = await fragmentRows(base);
  const index = await loadIndex(objects);
  // Written by a pass on a later base (this maintainer stalled since its purge): that pass
  // counted the purged base and deleted what its index does not name (review31b).
  if (index && index.baseVersion > (await base.version())) return;
  // The index names item ids too (each chunk's first, each fragment's last), so one that does
  // not describe the live fragments goes, first: a failure after it leaves the stale documents
  // for the next call to find (review31 F1, review31b). Listings scan until the next projection
  // step. An index of another format (unreadable here) is deleted too.
  if (!index || !covers(index, live)) await objects.delete(PROJECTION_KEY);
  for (const name of await objects.list(PROJECTION_DIR)) {
    const m = DOC_NAME.exec(name) ?? ROWS_NAME.exec(name);
    if (m && live.get(Number(m[1])) !== Number(m[2])) await objects.delete(`${PROJECTION_DIR}/${name}`);
  }
}

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
   * hands out one handle per version) skips the pass over the row ids (~20 ms and a
   * BigUint64Array of 8 bytes per row, per 10^6 rows). Keyed by the handle, not the version
   * number: a log deleted and made again at the same place numbers its versions from 1 again
   * (review22 R1).
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
   * again: review22 R1, review32 F1); the stored one is the log's own, and the nonces it gives
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
    // only, so they are recounted as the walk meets them, in windows (review31 F3).
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
