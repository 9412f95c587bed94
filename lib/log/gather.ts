/**
 * Rows of record batches copied into a new batch of the log's schema (EVENT_SCHEMA), from column
 * buffers to column buffers: how a fork keeps the rows it reads and writes them again without
 * making objects of them and encoding those back into Arrow (lib/log/admin/fork.ts).
 *
 * Rows are picked by (source, row) and copied in runs: consecutive rows of one source are one
 * copy per column. Cells keep their bytes (int64s, timestamps and floats are copied as words, never
 * through numbers or bigints). A source whose columns are not the schema's types (`conforms` says
 * so) is refused here: callers convert such a batch through its rows (lib/schema.ts) instead.
 * The new batch owns its buffers: the sources may be released afterwards (lib/log/read/release.ts).
 */
import * as arrow from 'apache-arrow';
import { CorruptError, InternalError } from '../errors.ts';
import { COLUMN_NAMES, COLUMN_SPECS, EVENT_SCHEMA, type ColumnKind } from '../schema.ts';

/** One column chunk's buffers (either apache-arrow build: LanceDB loads the CommonJS one). */
interface Chunk {
  offset: number;
  length: number;
  typeId: arrow.Type;
  nullBitmap?: Uint8Array | null;
  values?: ArrayBufferView;
  valueOffsets?: Int32Array;
}

const KINDS: readonly ColumnKind[] = COLUMN_NAMES.map((n) => COLUMN_SPECS.get(n)!.kind);
const NULLABLE: readonly boolean[] = COLUMN_NAMES.map((n) => COLUMN_SPECS.get(n)!.nullable);

/** Whether `t` is laid out as a column of `kind` is (the schema's types, by value: no `instanceof` across builds). */
function sameLayout(t: arrow.DataType, kind: ColumnKind): boolean {
  const x = t as arrow.DataType & { bitWidth?: number; isSigned?: boolean; precision?: arrow.Precision; unit?: arrow.TimeUnit };
  switch (kind) {
    case 'str':
      return t.typeId === arrow.Type.Utf8;
    case 'bin':
      return t.typeId === arrow.Type.Binary;
    case 'i64':
      return t.typeId === arrow.Type.Int && x.bitWidth === 64 && x.isSigned === true;
    case 'i32':
      return t.typeId === arrow.Type.Int && x.bitWidth === 32 && x.isSigned === true;
    case 'f64':
      return t.typeId === arrow.Type.Float && x.precision === arrow.Precision.DOUBLE;
    case 'bool':
      return t.typeId === arrow.Type.Bool;
    case 'ts':
      return t.typeId === arrow.Type.Timestamp && x.unit === arrow.TimeUnit.MICROSECOND;
  }
}

/** Whether every column of the schema is in `b`, in one chunk, laid out as the schema's type. */
export function conforms(b: arrow.RecordBatch): boolean {
  for (let c = 0; c < COLUMN_NAMES.length; c++) {
    const child = b.getChild(COLUMN_NAMES[c]!);
    if (!child || child.data.length !== 1 || !sameLayout(child.type, KINDS[c]!)) return false;
    const d = child.data[0] as unknown as Chunk;
    if (!d.values || ((KINDS[c] === 'str' || KINDS[c] === 'bin') && !d.valueOffsets)) return false;
  }
  return true;
}

function chunkOf(b: arrow.RecordBatch, c: number): Chunk {
  const d = b.getChild(COLUMN_NAMES[c]!)?.data[0] as unknown as Chunk | undefined;
  if (!d) throw new InternalError(`gatherEvents: a source has no column ${COLUMN_NAMES[c]}`);
  return d;
}

const bit = (bits: Uint8Array, i: number) => (bits[i >> 3]! & (1 << (i & 7))) !== 0;
/** No validity bitmap (or an empty one): every cell is valid. */
const allValid = (d: Chunk) => !d.nullBitmap || d.nullBitmap.length === 0;

/** Runs of picks: source, first row, rows, first output row. */
interface Runs {
  src: Int32Array;
  start: Int32Array;
  len: Int32Array;
  at: Int32Array;
  count: number;
}

function runsOf(src: ArrayLike<number>, row: ArrayLike<number>, n: number): Runs {
  const r: Runs = { src: new Int32Array(n), start: new Int32Array(n), len: new Int32Array(n), at: new Int32Array(n), count: 0 };
  for (let i = 0; i < n; i++) {
    const k = r.count - 1;
    if (k >= 0 && r.src[k] === src[i] && r.start[k]! + r.len[k]! === row[i]) r.len[k]!++;
    else {
      r.src[r.count] = src[i]!;
      r.start[r.count] = row[i]!;
      r.len[r.count] = 1;
      r.at[r.count] = i;
      r.count++;
    }
  }
  return r;
}

/**
 * A new batch in EVENT_SCHEMA of `n` rows: row i is row `row[i]` of `sources[src[i]]`. Every
 * source must conform (`conforms`). A null in a column the schema requires is CORRUPT, as
 * reading it into a row is (lib/schema.ts).
 */
export function gatherEvents(sources: readonly arrow.RecordBatch[], src: ArrayLike<number>, row: ArrayLike<number>, n: number): arrow.RecordBatch {
  for (const s of sources) if (!conforms(s)) throw new InternalError('gatherEvents: a source batch is not laid out as the log schema');
  const runs = runsOf(src, row, n);
  const children = EVENT_SCHEMA.fields.map((f, c) => {
    const chunks = sources.map((s) => chunkOf(s, c));
    const kind = KINDS[c]!;
    const { valid, nulls } = validity(chunks, runs, n);
    if (nulls > 0 && !NULLABLE[c]) throw new CorruptError(`column ${f.name} is null in a stored event`);
    const nullBitmap = nulls > 0 ? valid! : undefined;
    if (kind === 'str' || kind === 'bin') return varData(f.type, chunks, runs, n, nulls, nullBitmap);
    if (kind === 'bool') return arrow.makeData({ type: f.type, length: n, nullCount: nulls, nullBitmap, data: bits(chunks, runs, n) } as never);
    const words = kind === 'i32' ? 1 : 2;
    const views = chunks.map(({ values: v }) => new Int32Array(v!.buffer, v!.byteOffset, (v!.byteLength / 4) | 0));
    const out = new Int32Array(n * words);
    for (let k = 0; k < runs.count; k++) copyWords(views[runs.src[k]!]!, runs.start[k]! * words, runs.len[k]! * words, out, runs.at[k]! * words);
    const data = kind === 'i32' ? out : kind === 'f64' ? new Float64Array(out.buffer) : new BigInt64Array(out.buffer);
    return arrow.makeData({ type: f.type, length: n, nullCount: nulls, nullBitmap, data } as never);
  });
  const struct = arrow.makeData({ type: new arrow.Struct(EVENT_SCHEMA.fields), length: n, nullCount: 0, children: children as arrow.Data[] });
  return new arrow.RecordBatch(EVENT_SCHEMA, struct);
}

/** Short runs copied cell by cell: a view per run costs more than the loop. */
const LOOP_BELOW = 32;

function copyWords(from: Int32Array, start: number, len: number, to: Int32Array, at: number): void {
  if (len < LOOP_BELOW) for (let i = 0; i < len; i++) to[at + i] = from[start + i]!;
  else to.set(from.subarray(start, start + len), at);
}

function validity(chunks: readonly Chunk[], runs: Runs, n: number): { valid: Uint8Array | null; nulls: number } {
  const bitmaps: (Uint8Array | null)[] = chunks.map((d) => (allValid(d) ? null : d.nullBitmap!));
  let any = false;
  for (let k = 0; k < runs.count && !any; k++) any = bitmaps[runs.src[k]!] !== null;
  if (!any) return { valid: null, nulls: 0 };
  const valid = new Uint8Array(Math.ceil(n / 8));
  let nulls = 0;
  for (let k = 0; k < runs.count; k++) {
    const bm = bitmaps[runs.src[k]!] ?? null;
    const at = runs.at[k]!;
    const len = runs.len[k]!;
    const from = chunks[runs.src[k]!]!.offset + runs.start[k]!;
    for (let i = 0; i < len; i++) {
      if (bm === null || bit(bm, from + i)) valid[(at + i) >> 3]! |= 1 << ((at + i) & 7);
      else nulls++;
    }
  }
  return { valid, nulls };
}

/** Boolean values (bits, indexed from the chunk's offset). */
function bits(chunks: readonly Chunk[], runs: Runs, n: number): Uint8Array {
  const out = new Uint8Array(Math.ceil(n / 8));
  for (let k = 0; k < runs.count; k++) {
    const d = chunks[runs.src[k]!]!;
    const v = d.values as Uint8Array;
    const at = runs.at[k]!;
    for (let i = 0; i < runs.len[k]!; i++) if (bit(v, d.offset + runs.start[k]! + i)) out[(at + i) >> 3]! |= 1 << ((at + i) & 7);
  }
  return out;
}

/** Utf8 / Binary: each run's bytes in one copy, its offsets shifted. */
function varData(type: arrow.DataType, chunks: readonly Chunk[], runs: Runs, n: number, nulls: number, nullBitmap: Uint8Array | undefined): arrow.Data {
  const offs = chunks.map((d) => d.valueOffsets!);
  const vals = chunks.map((d) => d.values as Uint8Array);
  let total = 0;
  for (let k = 0; k < runs.count; k++) {
    const o = offs[runs.src[k]!]!;
    total += o[runs.start[k]! + runs.len[k]!]! - o[runs.start[k]!]!;
  }
  if (total > 0x7fffffff) throw new RangeError('a string or binary column of one batch exceeds 2 GiB');
  const data = new Uint8Array(total);
  const offsets = new Int32Array(n + 1);
  let pos = 0;
  for (let k = 0; k < runs.count; k++) {
    const o = offs[runs.src[k]!]!;
    const v = vals[runs.src[k]!]!;
    const start = runs.start[k]!;
    const len = runs.len[k]!;
    const a = o[start]!;
    const b = o[start + len]!;
    if (b - a < LOOP_BELOW) for (let i = a; i < b; i++) data[pos + i - a] = v[i]!;
    else data.set(v.subarray(a, b), pos);
    const at = runs.at[k]!;
    const shift = pos - a;
    for (let i = 1; i <= len; i++) offsets[at + i] = o[start + i]! + shift;
    pos += b - a;
  }
  return arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap, valueOffsets: offsets, data } as never);
}
