/**
 * The seed's 33 columns as an Arrow schema, and the conversion between EventRow and Arrow.
 *
 * Deviation (docs/design/seed-deviations.md): the seed's large_string/large_binary columns are
 * Utf8/Binary here, because LanceDB 0.39's JS API rejects LargeUtf8/LargeBinary on every write
 * path (notes/lancedb-0.39-facts.md). Utf8/Binary use 32-bit offsets: one Arrow batch holds at
 * most 2 GiB per column, which bounds a single checkpoint batch, not the log.
 */
import * as arrow from 'apache-arrow';
import './arrow-fix.ts';
import { CorruptError } from './errors.ts';
import type { EventRow, EventType, TerminalKind, ValueKind } from './types.ts';

const utf8 = () => new arrow.Utf8();
const i64 = () => new arrow.Int64();
const i32 = () => new arrow.Int32();
const tsUs = () => new arrow.Timestamp(arrow.TimeUnit.MICROSECOND, 'UTC');

type ColumnKind = 'str' | 'i64' | 'i32' | 'f64' | 'bool' | 'bin' | 'ts';

const COLUMNS: ReadonlyArray<readonly [keyof EventRow, ColumnKind, boolean]> = [
  ['event_id', 'str', false],
  ['item_id', 'str', false],
  ['root_item_id', 'str', false],
  ['parent_item_id', 'str', true],
  ['item_seq', 'i64', false],
  ['checkpoint_id', 'str', false],
  ['event_type', 'str', false],
  ['step_name', 'str', true],
  ['step_index', 'i64', true],
  ['step_instance_id', 'str', true],
  ['iteration', 'i64', true],
  ['attempt', 'i32', false],
  ['run_id', 'str', false],
  ['writer_epoch', 'str', false],
  ['field_name', 'str', true],
  ['field_type', 'str', true],
  ['codec_version', 'i32', true],
  ['value_kind', 'str', true],
  ['value_i64', 'i64', true],
  ['value_f64', 'f64', true],
  ['value_bool', 'bool', true],
  ['value_str', 'str', true],
  ['value_json', 'str', true],
  ['value_blob', 'bin', true],
  ['payload_size', 'i64', true],
  ['payload_checksum', 'str', true],
  ['query_tags_json', 'str', true],
  ['terminal', 'str', true],
  ['error_type', 'str', true],
  ['error_dump', 'str', true],
  ['traceback', 'str', true],
  ['event_ts', 'ts', false],
  ['schema_version', 'i32', false],
];

function arrowType(kind: ColumnKind): arrow.DataType {
  switch (kind) {
    case 'str':
      return utf8();
    case 'i64':
      return i64();
    case 'i32':
      return i32();
    case 'f64':
      return new arrow.Float64();
    case 'bool':
      return new arrow.Bool();
    case 'bin':
      return new arrow.Binary();
    case 'ts':
      return tsUs();
  }
}

export const COLUMN_NAMES: readonly (keyof EventRow)[] = COLUMNS.map((c) => c[0]);

export type { ColumnKind };

/** Each column's kind and whether it may be null (codecs of other stored forms: lib/log/projection/fold-rows.ts). */
export const COLUMN_SPECS: ReadonlyMap<keyof EventRow, { kind: ColumnKind; nullable: boolean }> = new Map(
  COLUMNS.map(([name, kind, nullable]) => [name, { kind, nullable }]),
);

export const EVENT_SCHEMA = new arrow.Schema(
  COLUMNS.map(([name, kind, nullable]) => new arrow.Field(name, arrowType(kind), nullable)),
);

/** Every column but the blob bytes: what fold, trajectory and listings read. */
export const LIGHT_COLUMNS: readonly (keyof EventRow)[] = COLUMN_NAMES.filter((c) => c !== 'value_blob');

/** What item listings read: no field values (often the bulk of a log), no blobs. */
export const SUMMARY_COLUMNS: readonly (keyof EventRow)[] = LIGHT_COLUMNS.filter(
  (c) => !['value_i64', 'value_f64', 'value_bool', 'value_str', 'value_json', 'query_tags_json'].includes(c),
);

/** Build an Arrow table in EVENT_SCHEMA from rows (int64 columns written exactly, as bigints). */
export function rowsToArrow(rows: readonly EventRow[]): arrow.Table {
  // One record batch assembled from each column's buffers: apache-arrow's builders compile a
  // validity function per builder and its Table constructor re-slices the columns into batches,
  // which together were most of encoding a small commit (docs/design/performance.md, "The ack path").
  const children = COLUMNS.map(([name, kind], i) => columnData(EVENT_SCHEMA.fields[i]!.type, kind, rows.map((r) => r[name])));
  const struct = arrow.makeData({ type: new arrow.Struct(EVENT_SCHEMA.fields), length: rows.length, nullCount: 0, children });
  return new arrow.Table([new arrow.RecordBatch(EVENT_SCHEMA, struct)]);
}

function columnData(type: arrow.DataType, kind: ColumnKind, values: unknown[]): arrow.Data {
  if (kind === 'str' || kind === 'bin') return varBinaryData(type, kind, values);
  const n = values.length;
  const valid = new Uint8Array(Math.ceil(n / 8));
  let nulls = 0;
  const data =
    kind === 'i64' || kind === 'ts' ? new BigInt64Array(n) : kind === 'i32' ? new Int32Array(n) : kind === 'f64' ? new Float64Array(n) : new Uint8Array(Math.ceil(n / 8));
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v === null || v === undefined) {
      nulls++;
      continue;
    }
    valid[i >> 3]! |= 1 << (i & 7);
    // int64 and timestamps raw (vectorFromArray would take timestamps as milliseconds).
    if (data instanceof BigInt64Array) data[i] = typeof v === 'bigint' ? v : BigInt(v as number);
    else if (kind === 'bool') {
      if (v) data[i >> 3]! |= 1 << (i & 7);
    } else data[i] = v as number;
  }
  return arrow.makeData({ type, length: n, nullCount: nulls, data, nullBitmap: nulls ? valid : undefined } as never);
}

/**
 * Utf8 / Binary columns written straight into one buffer with Node's native UTF-8 encoder: the
 * Arrow builders encode string by string and were most of an append's JavaScript time.
 */
function varBinaryData(type: arrow.DataType, kind: 'str' | 'bin', values: unknown[]): arrow.Data {
  const n = values.length;
  const offsets = new Int32Array(n + 1);
  const valid = new Uint8Array(Math.ceil(n / 8));
  let nulls = 0;
  let total = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v === null || v === undefined) nulls++;
    else total += kind === 'str' ? Buffer.byteLength(v as string, 'utf8') : (v as Uint8Array).byteLength;
  }
  if (total > 0x7fffffff) throw new RangeError(`a ${kind === 'str' ? 'string' : 'binary'} column of one batch exceeds 2 GiB`);
  const data = Buffer.allocUnsafe(total);
  let at = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v !== null && v !== undefined) {
      if (kind === 'str') at += data.write(v as string, at, 'utf8');
      else {
        data.set(v as Uint8Array, at);
        at += (v as Uint8Array).byteLength;
      }
      valid[i >> 3]! |= 1 << (i & 7);
    }
    offsets[i + 1] = at;
  }
  return arrow.makeData({
    type,
    length: n,
    nullCount: nulls,
    valueOffsets: offsets,
    data: new Uint8Array(data.buffer, data.byteOffset, at),
    nullBitmap: nulls ? valid : undefined,
  } as never);
}

/**
 * Read rows back from an Arrow table holding any subset of the columns (missing columns read as
 * null). Throws CorruptError when a required column holds a null.
 *
 * Cells are read from each chunk's buffers, not through apache-arrow's `get()`: its per-cell
 * dispatch was most of turning a fold's rows into objects (docs/design/performance.md, "The ack
 * path"). Column types other than the schema's fall back to `get()`.
 */
function arrowToRows(table: arrow.Table, only?: readonly number[]): EventRow[] {
  const n = only ? only.length : table.numRows;
  const c = COLUMNS.map((spec) => (only ? someCells(table, spec, only) : columnCells(table, spec, n)));
  const rows = new Array<EventRow>(n);
  // One literal in schema order: every row gets the same shape at once (adding 33 properties
  // one by one cost more than reading the cells). Keep it in COLUMNS' order: c[k] is column k
  // (the round-trip tests compare whole rows, so a column left out or swapped fails them).
  for (let i = 0; i < n; i++) {
    rows[i] = {
      event_id: c[0]![i],
      item_id: c[1]![i],
      root_item_id: c[2]![i],
      parent_item_id: c[3]![i],
      item_seq: c[4]![i],
      checkpoint_id: c[5]![i],
      event_type: c[6]![i],
      step_name: c[7]![i],
      step_index: c[8]![i],
      step_instance_id: c[9]![i],
      iteration: c[10]![i],
      attempt: c[11]![i],
      run_id: c[12]![i],
      writer_epoch: c[13]![i],
      field_name: c[14]![i],
      field_type: c[15]![i],
      codec_version: c[16]![i],
      value_kind: c[17]![i],
      value_i64: c[18]![i],
      value_f64: c[19]![i],
      value_bool: c[20]![i],
      value_str: c[21]![i],
      value_json: c[22]![i],
      value_blob: c[23]![i],
      payload_size: c[24]![i],
      payload_checksum: c[25]![i],
      query_tags_json: c[26]![i],
      terminal: c[27]![i],
      error_type: c[28]![i],
      error_dump: c[29]![i],
      traceback: c[30]![i],
      event_ts: c[31]![i],
      schema_version: c[32]![i],
    } as EventRow;
  }
  return rows;
}

/** Every cell of one column (nulls for a column the table does not hold). */
function columnCells(table: arrow.Table, [name, kind, nullable]: (typeof COLUMNS)[number], n: number): unknown[] {
  const out = new Array<unknown>(n).fill(null);
  const col = table.getChild(name);
  if (!col) return out;
  let i = 0;
  for (const d of col.data as ReadonlyArray<arrow.Data & ChunkBuffers>) {
    const read = cellReader(d, kind);
    for (let k = 0; k < d.length; k++, i++) {
      const v = read ? (isValid(d, k) ? read(k) : null) : slowCell(col, kind, i);
      if (v === null && !nullable) throw new CorruptError(`column ${name} is null in a stored event (row ${i})`);
      out[i] = v;
    }
  }
  return out;
}

/** The cells of rows `only` (ascending) of a column, as columnCells reads them. */
function someCells(table: arrow.Table, [name, kind, nullable]: (typeof COLUMNS)[number], only: readonly number[]): unknown[] {
  const out = new Array<unknown>(only.length).fill(null);
  const col = table.getChild(name);
  if (!col) return out;
  let j = 0;
  let start = 0;
  for (const d of col.data as ReadonlyArray<arrow.Data & ChunkBuffers>) {
    const read = cellReader(d, kind);
    for (; j < only.length && only[j]! < start + d.length; j++) {
      const i = only[j]!;
      const k = i - start;
      const v = read ? (isValid(d, k) ? read(k) : null) : slowCell(col, kind, i);
      if (v === null && !nullable) throw new CorruptError(`column ${name} is null in a stored event (row ${i})`);
      out[j] = v;
    }
    start += d.length;
  }
  return out;
}

/** The buffers of one Arrow chunk (both apache-arrow builds: LanceDB loads the CommonJS one). */
interface ChunkBuffers {
  offset: number;
  length: number;
  nullBitmap?: Uint8Array | null;
  values?: ArrayBufferView;
  valueOffsets?: Int32Array;
}

function isValid(d: ChunkBuffers, k: number): boolean {
  const bm = d.nullBitmap;
  if (!bm || bm.length === 0) return true;
  const j = d.offset + k;
  return (bm[j >> 3]! & (1 << (j & 7))) !== 0;
}

/**
 * Reader of cell k of a chunk of the schema's type; null for any other type. apache-arrow slices
 * a chunk's offsets and fixed-width values with it, but not its bits (validity, booleans): those
 * are indexed from `offset`.
 */
function cellReader(d: arrow.Data & ChunkBuffers, kind: ColumnKind): ((k: number) => unknown) | null {
  const t = d.type.typeId;
  const v = d.values;
  if (!v) return null;
  switch (kind) {
    case 'str': {
      if (t !== arrow.Type.Utf8 || !d.valueOffsets) return null;
      const bytes = Buffer.from(v.buffer, v.byteOffset, v.byteLength);
      const o = d.valueOffsets;
      return (k) => bytes.toString('utf8', o[k]!, o[k + 1]!);
    }
    case 'bin': {
      if (t !== arrow.Type.Binary || !d.valueOffsets) return null;
      const bytes = v as Uint8Array;
      const o = d.valueOffsets;
      return (k) => new Uint8Array(bytes.subarray(o[k]!, o[k + 1]!));
    }
    case 'i64':
    case 'ts': {
      // Raw int64 values: get() on timestamps converts to milliseconds.
      if ((t !== arrow.Type.Int && t !== arrow.Type.Timestamp) || !(v instanceof BigInt64Array)) return null;
      return (k) => v[k]!;
    }
    case 'i32': {
      if (t !== arrow.Type.Int || !(v instanceof Int32Array)) return null;
      return (k) => v[k]!;
    }
    case 'f64': {
      if (t !== arrow.Type.Float || !(v instanceof Float64Array)) return null;
      return (k) => v[k]!;
    }
    case 'bool': {
      if (t !== arrow.Type.Bool) return null;
      const bits = v as Uint8Array;
      const at = d.offset;
      return (k) => (bits[(at + k) >> 3]! & (1 << ((at + k) & 7))) !== 0;
    }
  }
}

/** Exact int64 read of row i: raw values, because get() on timestamps converts to ms. */
function rawInt64(col: arrow.Vector, i: number): bigint | null {
  if (!col.isValid(i)) return null;
  let offset = i;
  for (const d of col.data) {
    if (offset < d.length) return (d.values as BigInt64Array)[offset]!; // apache-arrow slices values with the chunk
    offset -= d.length;
  }
  return null;
}

function slowCell(col: arrow.Vector, kind: ColumnKind, i: number): unknown {
  switch (kind) {
    case 'i64':
    case 'ts':
      return rawInt64(col, i);
    case 'bin': {
      const v = col.get(i) as Uint8Array | null;
      return v === null ? null : new Uint8Array(v);
    }
    default: {
      const v = col.get(i) as unknown;
      return v === undefined ? null : v;
    }
  }
}

/** Narrow int64 cells the model keeps as numbers (seqs, positions, sizes, timestamps). */
function normalizeRow(raw: EventRow): EventRow {
  const r = raw as unknown as Record<string, unknown>;
  for (const k of ['item_seq', 'step_index', 'iteration', 'payload_size', 'event_ts'] as const) {
    const v = r[k];
    if (typeof v === 'bigint') r[k] = Number(v);
  }
  r.event_type = r.event_type as EventType;
  r.value_kind = r.value_kind as ValueKind | null;
  r.terminal = r.terminal as TerminalKind | null;
  return raw;
}

/** Every row of `table`, or the rows at positions `only` (ascending), in that order. */
export function rowsFromArrow(table: arrow.Table, only?: readonly number[]): EventRow[] {
  return arrowToRows(table, only).map(normalizeRow);
}
