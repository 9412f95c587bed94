/**
 * The stored item listing projection (docs/design/projection.md): where maintenance keeps it under
 * `_dgcl/projection/` (the index, each fragment's head and chunks, the fold projection's rows
 * files), the format of those documents, and how they are read back. Written by
 * lib/log/projection/build.ts, read by lib/log/projection/projection.ts.
 */
import { randomBytes } from 'node:crypto';
import type * as arrow from 'apache-arrow';
import type { ObjectStore } from '../../storage/objects.ts';
import { rowsName } from './fold-rows.ts';
import { releaseBatch } from '../read/release.ts';
import { decodeAggregate, ProjectionFormatError } from './projection-codec.ts';
import type { ItemAggregate } from '../read/summary.ts';
import type { Table } from '../tables.ts';

export const PROJECTION_DIR = '_dgcl/projection';
/** The index: which fragment documents make up the projection of which base version. */
export const PROJECTION_KEY = `${PROJECTION_DIR}/items.json`;
/** Bumped whenever ItemAggregate, its encoding, its layout or what it is computed from changes: older ones are ignored. */
export const FORMAT = 7;
/** Aggregates per chunk document: a page reads one chunk (or two) per fragment, not the fragment's every item. */
export const CHUNK_ITEMS = 1000;

/**
 * One fragment's head: written after its chunks, so a head present means a whole document. The
 * name carries the format: maintenance decides what to count from the names it lists, so a
 * document another release wrote must not pass for one of this format.
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
 * directories) for the new rows.
 */
const NONCE = /^[0-9a-f]{12}$/;
export const newNonce = (): string => randomBytes(6).toString('hex');
/** A head of this format: nonce, fragment id, live rows. */
export const HEAD_NAME = new RegExp(`^frag-v${FORMAT}-n([0-9a-f]{12})-(\\d+)-(\\d+)\\.json$`);
/** Any format's fragment head or chunk: fragment id, live rows. */
export const DOC_NAME = /^frag-v\d+-(?:[a-z][0-9a-f]*-)?(\d+)-(\d+)(?:-\d+)?\.json$/;

/** [fragment id, live rows, nonce of its documents' names, first item id of each chunk, last item id]. */
export type FragmentEntry = [number, number, string, string[], string];

export interface IndexDoc {
  format: number;
  /** The base version it was built from (maintenance skips a pass while it is current). */
  baseVersion: number;
  /** Every counted fragment; together, every row counted. */
  fragments: FragmentEntry[];
}

export interface HeadDoc {
  format: number;
  fragment: number;
  rows: number;
  firstIds: string[];
  lastId: string;
}

export interface ChunkDoc {
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
  // An empty projection: Lance reads no column, only the row ids it derives (cheap: no decoding).
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

export function freezeAggregate(a: ItemAggregate): ItemAggregate {
  for (const v of [a.first, a.created, a.cursorAt, a.cursor, a.loopCursorAt, a.loopCursor, a.stepAt, a.failureAt, a.failure, a.terminalAt]) if (v) Object.freeze(v);
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
export function uncounted(p: ProjectionIndex, counts: ReadonlyMap<number, number>): number[] {
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

export async function loadIndex(objects: ObjectStore): Promise<ProjectionIndex | null> {
  const body = await objects.get(PROJECTION_KEY);
  return body === null ? null : parseIndex(body);
}

export function parseIndex(body: string): ProjectionIndex | null {
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
export async function loadHead(objects: ObjectStore, nonce: string, fragment: number, rows: number): Promise<{ firstIds: string[]; lastId: string } | null> {
  const d = (await getJson(objects, fragmentKey(nonce, fragment, rows))) as HeadDoc | null;
  if (typeof d !== 'object' || d === null || d.format !== FORMAT || d.fragment !== fragment || d.rows !== rows || !isIds(d.firstIds) || typeof d.lastId !== 'string') return null;
  return { firstIds: d.firstIds, lastId: d.lastId };
}

/** Thrown when a chunk the index names is missing or unreadable: the listing scans instead. */
export class StaleProjection extends Error {}

/** One chunk's aggregates, in item order. */
export async function loadChunk(objects: ObjectStore, nonce: string, fragment: number, rows: number, chunk: number): Promise<ItemAggregate[]> {
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
