/**
 * Maintenance's side of the item listing projection (docs/design/projection.md): bring the stored
 * projection (lib/log/projection/stored.ts) up to the base's current version, fragment by
 * fragment, with the fold projection's rows files; and drop documents that no longer describe
 * the base (the purge).
 */
import type * as arrow from 'apache-arrow';
import { UnavailableError } from '../../errors.ts';
import { LIGHT_COLUMNS, rowsFromArrow } from '../../schema.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { EventRow } from '../../types.ts';
import { assembleRowsFile, encodeItem, LeftOutError, ROWS_NAME, rowsName, RowsDirectories, RowsFileError } from './fold-rows.ts';
import { releaseBatch } from '../read/release.ts';
import { stream } from '../read/stream.ts';
import { encodeAggregate } from './projection-codec.ts';
import { SUMMARY_SCAN_COLUMNS, SummaryVisitor } from '../read/summary.ts';
import {
  CHUNK_ITEMS,
  chunkKey,
  covers,
  DOC_NAME,
  FORMAT,
  fragmentFilter,
  fragmentKey,
  fragmentRows,
  HEAD_NAME,
  loadHead,
  loadIndex,
  newNonce,
  PROJECTION_DIR,
  PROJECTION_KEY,
  rowsKey,
  type ChunkDoc,
  type FragmentEntry,
  type HeadDoc,
  type IndexDoc,
} from './stored.ts';
import { projection, sqlString, type LanceTables, type Table } from '../tables.ts';

/** Items of the first query of a fragment's rows files; each later one holds at most twice the last one's, and MAX_QUERY_ITEMS. */
const FIRST_QUERY_ITEMS = 64;
const MAX_QUERY_ITEMS = 256;
/** Most bytes of gzipped rows in one rows file (a chunk's items past it are left out). */
const MAX_FILE_BYTES = 256 * 2 ** 20;
/** Bytes of rows (as JSON) a query of a fragment's rows files aims at: later ranges are sized by it. */
const ROWS_JSON_PER_QUERY = 32 * 2 ** 20;
const ALL = (): boolean => true;

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
      // cleanup, or one deleting another's leftovers, can leave a head without them.
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
    // otherwise pile them up until a pass succeeds.
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
 * can write its documents and index into the new one. Event ids hash the
 * checkpoints' content, so another history's fragment passes only if its first and last items
 * have the same events: a re-run of the same inputs can; then what lies between is
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
 * fragment; it is bounded by MAX_QUERY_ITEMS times the largest item's rows (item
 * sizes are not known before they are read), and an item's rows
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
  // counted the purged base and deleted what its index does not name.
  if (index && index.baseVersion > (await base.version())) return;
  // The index names item ids too (each chunk's first, each fragment's last), so one that does
  // not describe the live fragments goes, first: a failure after it leaves the stale documents
  // for the next call to find. Listings scan until the next projection
  // step. An index of another format (unreadable here) is deleted too.
  if (!index || !covers(index, live)) await objects.delete(PROJECTION_KEY);
  for (const name of await objects.list(PROJECTION_DIR)) {
    const m = DOC_NAME.exec(name) ?? ROWS_NAME.exec(name);
    if (m && live.get(Number(m[1])) !== Number(m[2])) await objects.delete(`${PROJECTION_DIR}/${name}`);
  }
}
