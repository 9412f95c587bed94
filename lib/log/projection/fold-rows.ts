/**
 * The fold projection: every base fragment's rows, grouped by item, stored by maintenance beside
 * the listing projection's chunks (docs/design/projection.md, "Folds"). A fold in a process that
 * knows nothing yet pays Lance's whole opening of the base on an object store (its manifest, the
 * `item_id` index's pages, the data file's footer, then per column its metadata and the item's
 * range: GETs that grow with the file). Through this it reads the projection's index and,
 * per fragment that may hold the item, the end of one file and the item's range in it.
 *
 * One file per listing chunk of a fragment, `rows-v1-n<nonce>-<fragment>-<live rows>-<k>.bin` (the
 * name's v1 is its naming; the magic says the layout): the rows of chunk k's items (the same
 * items, in the same order). Per item a gzip member of its rows (JSON arrays in LIGHT_COLUMNS
 * order), then the directory, then 12 bytes: the directory's length (u32 LE) and a magic.
 * - `dgclrow2` (written now): the directory is binary and searched where it lies, without
 *   decoding it: u32 entry count, u32 CRC-32 of the rest of the directory, per item (in UTF-8
 *   byte order) u32 end of its id in the id bytes and u32 length of its block (blocks lie back to
 *   back from the file's start), then the ids' UTF-8 bytes. Decoding a directory the old way
 *   (gunzip, JSON.parse, checks) was most of a first fold's cost from a file; this one is only
 *   checked and searched (docs/design/performance.md, "Folds").
 * - `dgclrow1` (earlier releases, still read): a gzip member of `[item id, offset, length]` per item.
 * The CRCs (gzip's, the directory's) make a damaged part read as an error, never as other rows.
 *
 * Disposable like the rest of the projection: a file that is missing or unreadable, or an index
 * that does not describe the base version read, sends the fold to Lance as before.
 */
import { crc32, gunzipSync, gzipSync } from 'node:zlib';
import { InternalError } from '../../errors.ts';
import { COLUMN_SPECS, LIGHT_COLUMNS } from '../../schema.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { EventRow } from '../../types.ts';
import { isObjectStoreUri } from '../../storage/location.ts';
import { LoadCache } from './load-cache.ts';
import { compareUtf8 } from '../read/summary.ts';

const MAGIC_V1 = Buffer.from('dgclrow1', 'latin1');
const MAGIC = Buffer.from('dgclrow2', 'latin1');
const FOOTER = 4 + MAGIC.length;
/** The binary directory's head (count, CRC) and bytes per entry (id end, block length). */
const DIR_HEAD = 8;
const DIR_ENTRY = 8;
/**
 * How a process reads rows files, by kind of store: the bytes read from a file's end first (the
 * directory; a longer one costs a second read) and the directories kept. On an object store a
 * request costs more than its bytes: the last 256 KiB, so a small file comes whole in one GET and
 * later folds of its items need none. On a local disk the bytes cost more than a read: 32 KiB,
 * enough for the binary directory of 1,000 short ids in one read (a shorter end and a second
 * read was slower), and more directories kept, so that folds of a large log (hundreds of files
 * per fragment) find theirs (docs/design/performance.md, "Folds").
 */
const READS = { objectStore: { tailBytes: 256 * 1024, cachedDirs: 32 }, local: { tailBytes: 32 * 1024, cachedDirs: 256 } } as const;

const ROWS_PREFIX = 'rows-v1-';
/** The rows of the `chunk`-th listing chunk's items in a fragment (name below the projection folder; `nonce`: the fragment documents', lib/log/projection/stored.ts). */
export const rowsName = (nonce: string, fragment: number, rows: number, chunk: number) => `${ROWS_PREFIX}n${nonce}-${fragment}-${rows}-${chunk}.bin`;
/** A rows file's fragment id and live rows (any name this or an earlier release wrote). */
export const ROWS_NAME = /^rows-v\d+-(?:[a-z][0-9a-f]*-)?(\d+)-(\d+)-\d+\.bin$/;

/** A rows file that is missing, damaged or not of this format: the fold reads Lance instead. */
export class RowsFileError extends Error {}
/** The item is in the file's directory without its rows (too large for it): the fold reads Lance. */
export class LeftOutError extends RowsFileError {}

// --- rows -----------------------------------------------------------------------------------

type Cell = string | number | boolean | null;

/**
 * A row's LIGHT_COLUMNS as JSON values: int64 values as decimal strings (the rest of the int64
 * columns are kept as numbers by the model), a double that JSON cannot hold (-0, NaN, the
 * infinities) as its string.
 */
export function encodeRow(r: EventRow): Cell[] {
  return LIGHT_COLUMNS.map((c) => {
    const v = r[c];
    if (typeof v === 'bigint') return v.toString();
    if (typeof v === 'number' && (!Number.isFinite(v) || Object.is(v, -0))) return Object.is(v, -0) ? '-0' : String(v);
    return v as Cell;
  });
}

const SPECIAL_DOUBLES = new Map([['-0', -0], ['NaN', NaN], ['Infinity', Infinity], ['-Infinity', -Infinity]]);

/** The row `encodeRow` made (every column; those it does not hold, the blob bytes, null), or RowsFileError. */
export function decodeRow(cells: unknown): EventRow {
  if (!Array.isArray(cells) || cells.length !== LIGHT_COLUMNS.length) throw new RowsFileError('a stored row is not an array of the light columns');
  const row: Record<string, unknown> = {};
  for (let i = 0; i < LIGHT_COLUMNS.length; i++) {
    const name = LIGHT_COLUMNS[i]!;
    const spec = COLUMN_SPECS.get(name)!;
    const v: unknown = cells[i];
    if (v === null) {
      if (!spec.nullable) throw new RowsFileError(`stored row: ${name} is null`);
      row[name] = null;
      continue;
    }
    let ok: boolean;
    let out: unknown = v;
    switch (spec.kind) {
      case 'str':
        ok = typeof v === 'string';
        break;
      case 'bool':
        ok = typeof v === 'boolean';
        break;
      case 'f64':
        if (typeof v === 'string') out = SPECIAL_DOUBLES.get(v);
        ok = typeof out === 'number';
        break;
      case 'i64':
        if (name === 'value_i64') {
          ok = typeof v === 'string' && /^-?\d{1,19}$/.test(v);
          if (ok) out = BigInt(v as string);
          break;
        }
        ok = Number.isSafeInteger(v);
        break;
      default: // i32, ts
        ok = Number.isSafeInteger(v);
    }
    if (!ok) throw new RowsFileError(`stored row: ${name} is ${JSON.stringify(v)}`);
    row[name] = out;
  }
  row.value_blob = null;
  return row as unknown as EventRow;
}

// --- files ----------------------------------------------------------------------------------

/** [item id, offset, length]; length 0: the item's rows are not in the file (too large: read Lance). */
type DirEntry = [string, number, number];

/**
 * Most bytes of one item's rows as JSON that a file holds (as one gzip member, read whole by a
 * fold). A larger item is left out, marked in the directory: its folds query Lance.
 */
export const MAX_ITEM_JSON = 16 * 2 ** 20;

/** An item's block: its rows gzipped, or null when their JSON is larger than MAX_ITEM_JSON; and that JSON's length. */
export function encodeItem(rows: readonly EventRow[]): { block: Buffer | null; jsonBytes: number } {
  const cells: string[] = [];
  let n = 2;
  for (const r of rows) {
    const c = JSON.stringify(encodeRow(r));
    n += c.length + 1;
    if (n > MAX_ITEM_JSON) return { block: null, jsonBytes: n };
    cells.push(c);
  }
  return { block: gzipSync(`[${cells.join(',')}]`), jsonBytes: n };
}

/** One rows file of items in item order (UTF-8 bytes), each with its block (`encodeItem`; null: left out). */
export function assembleRowsFile(items: ReadonlyArray<readonly [string, Buffer | null]>): Buffer {
  const ids = items.map(([id]) => Buffer.from(id, 'utf8'));
  for (let i = 1; i < ids.length; i++) if (Buffer.compare(ids[i - 1]!, ids[i]!) >= 0) throw new InternalError(`rows file: items out of order at ${items[i]![0]}`);
  const idBytes = ids.reduce((n, b) => n + b.length, 0);
  const dir = Buffer.alloc(DIR_HEAD + DIR_ENTRY * items.length + idBytes);
  dir.writeUInt32LE(items.length, 0);
  let idEnd = 0;
  let at = DIR_HEAD + DIR_ENTRY * items.length;
  for (const [i, [, block]] of items.entries()) {
    idEnd += ids[i]!.length;
    dir.writeUInt32LE(idEnd, DIR_HEAD + DIR_ENTRY * i);
    dir.writeUInt32LE(block?.length ?? 0, DIR_HEAD + DIR_ENTRY * i + 4);
    at += ids[i]!.copy(dir, at);
  }
  dir.writeUInt32LE(crc32(dir.subarray(DIR_HEAD)), 4);
  const footer = Buffer.alloc(FOOTER);
  footer.writeUInt32LE(dir.length, 0);
  MAGIC.copy(footer, 4);
  return Buffer.concat([...items.flatMap(([, block]) => (block ? [block] : [])), dir, footer]);
}

/** One rows file of `items` (in item order, each with its rows). */
export function encodeRowsFile(items: ReadonlyArray<readonly [string, readonly EventRow[]]>): Buffer {
  return assembleRowsFile(items.map(([id, rows]) => [id, encodeItem(rows).block]));
}

function gunzipJson(bytes: Uint8Array, what: string): unknown {
  try {
    return JSON.parse(gunzipSync(bytes).toString('utf8')) as unknown;
  } catch (e) {
    throw new RowsFileError(`${what}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** A file's directory, and the bytes of its end already read (item ranges inside it cost no GET). */
interface Directory {
  /** The entry of `id`, or -1. */
  indexOf(id: string): number;
  offsets: ArrayLike<number>;
  lengths: ArrayLike<number>;
  tail: Uint8Array;
  tailStart: number;
}

/** The directory of a `dgclrow1` file (`[id, offset, length]` entries, gzipped JSON). */
function v1Directory(key: string, dirBytes: Uint8Array, dirStart: number): Pick<Directory, 'indexOf' | 'offsets' | 'lengths'> {
  const dir = gunzipJson(dirBytes, `${key} directory`);
  const ok = Array.isArray(dir) && dir.every((e) => Array.isArray(e) && e.length === 3 && typeof e[0] === 'string' && Number.isSafeInteger(e[1]) && Number.isSafeInteger(e[2]) && e[1] >= 0 && e[2] >= 0 && e[1] + e[2] <= dirStart);
  if (!ok) throw new RowsFileError(`${key}: directory is not [id, offset, length] entries`);
  const entries = dir as DirEntry[];
  for (let i = 1; i < entries.length; i++) if (compareUtf8(entries[i - 1]![0], entries[i]![0]) >= 0) throw new RowsFileError(`${key}: directory out of item order`);
  const ids = entries.map((e) => e[0]);
  return { indexOf: (id) => find(ids, id), offsets: entries.map((e) => e[1]), lengths: entries.map((e) => e[2]) };
}

/**
 * The directory of a `dgclrow2` file, searched in place: its CRC and bounds are checked once
 * here; its order was checked when it was written (assembleRowsFile), and the CRC says these are
 * the bytes written.
 */
function v2Directory(key: string, dirBytes: Uint8Array, dirStart: number): Pick<Directory, 'indexOf' | 'offsets' | 'lengths'> {
  const d = Buffer.from(dirBytes.buffer, dirBytes.byteOffset, dirBytes.length);
  const bad = (what: string) => new RowsFileError(`${key}: directory ${what}`);
  if (d.length < DIR_HEAD) throw bad('too short');
  const count = d.readUInt32LE(0);
  const idsAt = DIR_HEAD + DIR_ENTRY * count;
  if (idsAt > d.length) throw bad(`of ${count} entries longer than it is`);
  if (crc32(d.subarray(DIR_HEAD)) !== d.readUInt32LE(4)) throw bad('damaged (CRC)');
  const ends = new Uint32Array(count);
  const offsets = new Float64Array(count);
  const lengths = new Float64Array(count);
  let at = 0;
  let idEnd = 0;
  for (let i = 0; i < count; i++) {
    const end = d.readUInt32LE(DIR_HEAD + DIR_ENTRY * i);
    if (end <= idEnd || idsAt + end > d.length) throw bad(`entry ${i}: id bytes out of bounds`);
    ends[i] = idEnd = end;
    offsets[i] = at;
    lengths[i] = d.readUInt32LE(DIR_HEAD + DIR_ENTRY * i + 4);
    at += lengths[i]!;
  }
  if (idsAt + idEnd !== d.length || at > dirStart) throw bad('does not match the file');
  const ids = d.subarray(idsAt);
  return {
    indexOf(id) {
      const want = Buffer.from(id, 'utf8');
      let lo = 0;
      let hi = count - 1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        // want against the mid-th id: > 0 when the id sorts before want.
        const c = want.compare(ids, mid === 0 ? 0 : ends[mid - 1]!, ends[mid]!);
        if (c === 0) return mid;
        if (c > 0) lo = mid + 1;
        else hi = mid - 1;
      }
      return -1;
    },
    offsets,
    lengths,
  };
}

/** The footer's format: 2, 1, or RowsFileError. */
function formatOf(key: string, bytes: Uint8Array): 1 | 2 {
  const magic = bytes.length < FOOTER ? null : Buffer.from(bytes.buffer, bytes.byteOffset + bytes.length - MAGIC.length, MAGIC.length);
  if (magic?.equals(MAGIC)) return 2;
  if (magic?.equals(MAGIC_V1)) return 1;
  throw new RowsFileError(`${key} has no rows-file footer`);
}

async function readDirectory(objects: ObjectStore, key: string, tailBytes: number): Promise<Directory> {
  const end = await objects.getBytes(key, { suffix: tailBytes });
  if (end === null) throw new RowsFileError(`${key} is missing`);
  const { bytes, size } = end;
  const tailStart = size - bytes.length;
  const format = formatOf(key, bytes);
  const dirLength = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).readUInt32LE(bytes.length - FOOTER);
  const dirStart = size - FOOTER - dirLength;
  if (dirStart < 0) throw new RowsFileError(`${key}: directory longer than the file`);
  let dirBytes: Uint8Array;
  if (dirStart >= tailStart) dirBytes = bytes.subarray(dirStart - tailStart, bytes.length - FOOTER);
  else {
    const more = await objects.getBytes(key, { start: dirStart, end: size - FOOTER });
    if (more === null || more.size !== size) throw new RowsFileError(`${key} changed while read`);
    dirBytes = more.bytes;
  }
  return { ...(format === 2 ? v2Directory : v1Directory)(key, dirBytes, dirStart), tail: bytes, tailStart };
}

/** Index of `id` in sorted `ids`, or -1. */
function find(ids: readonly string[], id: string): number {
  let lo = 0;
  let hi = ids.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const c = compareUtf8(ids[mid]!, id);
    if (c === 0) return mid;
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/** A process's rows files' directories, least recently used out (immutable: the name says what they hold). */
export class RowsDirectories {
  private readonly reads: { tailBytes: number; cachedDirs: number };
  private readonly dirs: LoadCache<Directory>;

  constructor(private readonly objects: ObjectStore) {
    this.reads = isObjectStoreUri(objects.baseUri) ? READS.objectStore : READS.local;
    this.dirs = new LoadCache<Directory>(this.reads.cachedDirs);
  }

  /** The rows `key` holds of `itemId` (none when it holds no such item), or RowsFileError. */
  async itemRows(key: string, itemId: string): Promise<EventRow[]> {
    const d = await this.dirs.get(key, () => readDirectory(this.objects, key, this.reads.tailBytes));
    const i = d.indexOf(itemId);
    if (i < 0) return [];
    if (d.lengths[i] === 0) throw new LeftOutError(`${key}: the rows of ${itemId} are too large for it`);
    const start = d.offsets[i]!;
    const end = start + d.lengths[i]!;
    let block: Uint8Array;
    if (start >= d.tailStart) block = d.tail.subarray(start - d.tailStart, end - d.tailStart);
    else {
      const got = await this.objects.getBytes(key, { start, end });
      if (got === null || got.bytes.length !== end - start) throw new RowsFileError(`${key} is missing or shorter than its directory says`);
      block = got.bytes;
    }
    const rows = gunzipJson(block, `${key} rows of ${itemId}`);
    if (!Array.isArray(rows) || rows.length === 0) throw new RowsFileError(`${key}: the rows of ${itemId} are not a list`);
    const out = rows.map(decodeRow);
    if (out.some((r) => r.item_id !== itemId)) throw new RowsFileError(`${key}: the rows of ${itemId} name another item`);
    return out;
  }

  clear(): void {
    this.dirs.clear();
  }
}

/** Every item of a whole rows file with its rows (none for one left out: tests, and checks that a deleted item left none). */
export function decodeRowsFile(bytes: Uint8Array): Array<[string, EventRow[]]> {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  const format = formatOf('rows file', b);
  const dirStart = b.length - FOOTER - b.readUInt32LE(b.length - FOOTER);
  const dirBytes = b.subarray(dirStart, b.length - FOOTER);
  let entries: DirEntry[];
  if (format === 1) entries = gunzipJson(dirBytes, 'directory') as DirEntry[];
  else {
    const d = v2Directory('rows file', dirBytes, dirStart);
    const count = dirBytes.readUInt32LE(0);
    const ids = dirBytes.subarray(DIR_HEAD + DIR_ENTRY * count);
    let from = 0;
    entries = Array.from({ length: count }, (_, i) => {
      const end = dirBytes.readUInt32LE(DIR_HEAD + DIR_ENTRY * i);
      const id = ids.toString('utf8', from, end);
      from = end;
      return [id, d.offsets[i]!, d.lengths[i]!];
    });
  }
  return entries.map(([id, at, n]) => [id, n === 0 ? [] : (gunzipJson(b.subarray(at, at + n), id) as unknown[]).map(decodeRow)]);
}
