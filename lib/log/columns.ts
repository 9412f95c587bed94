/**
 * Fast cell reads from Arrow record batches, for aggregations over millions of rows: int64
 * without allocating a BigInt per cell, strings decoded by Node's native UTF-8 slicer, and a
 * cheap "same string as row j" test so runs of one item id are decoded once.
 *
 * apache-arrow slices a chunk's offsets and fixed-width values with the chunk; only bitmaps
 * (validity) are indexed from its `offset`.
 */
import * as arrow from 'apache-arrow';

interface Chunk {
  offset: number;
  nullBitmap: Uint8Array | undefined | null;
}

function chunkOf(b: arrow.RecordBatch, name: string, type: arrow.Type): (arrow.Data & Chunk) | null {
  const child = b.getChild(name);
  if (!child) return null;
  if (child.type.typeId !== type || child.data.length !== 1) {
    throw new TypeError(`column ${name}: expected one chunk of Arrow type ${arrow.Type[type]}, got ${String(child.type)} in ${child.data.length}`);
  }
  // A record batch's column is a single Data chunk.
  return child.data[0] as unknown as arrow.Data & Chunk;
}

function validAt(d: Chunk | null, i: number): boolean {
  if (!d) return false;
  const bm = d.nullBitmap;
  if (!bm || bm.length === 0) return true;
  const j = d.offset + i;
  return (bm[j >> 3]! & (1 << (j & 7))) !== 0;
}

export class Utf8Column {
  private readonly d: (arrow.Data & Chunk) | null;
  private readonly offsets: Int32Array | null;
  private readonly bytes: Buffer | null;

  constructor(b: arrow.RecordBatch, name: string) {
    this.d = chunkOf(b, name, arrow.Type.Utf8);
    this.offsets = this.d ? (this.d.valueOffsets as Int32Array) : null;
    const v = this.d?.values as Uint8Array | undefined;
    this.bytes = v ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : null;
  }

  get(i: number): string | null {
    if (!this.d || !validAt(this.d, i)) return null;
    return this.bytes!.toString('utf8', this.offsets![i]!, this.offsets![i + 1]!);
  }

  /** Whether row i holds exactly these bytes (no decoding). */
  is(i: number, bytes: Uint8Array): boolean {
    if (!this.d || !validAt(this.d, i)) return false;
    const a = this.offsets![i]!;
    if (this.offsets![i + 1]! - a !== bytes.length) return false;
    const mine = this.bytes!;
    for (let x = 0; x < bytes.length; x++) if (mine[a + x] !== bytes[x]) return false;
    return true;
  }

  /** Whether rows i and k hold the same non-null string (byte comparison, no decoding). */
  same(i: number, k: number): boolean {
    if (!this.d || !validAt(this.d, i) || !validAt(this.d, k)) return false;
    const o = this.offsets!;
    const a = o[i]!;
    const aEnd = o[i + 1]!;
    const c = o[k]!;
    const cEnd = o[k + 1]!;
    if (aEnd - a !== cEnd - c) return false;
    const bytes = this.bytes!;
    for (let x = 0; x < aEnd - a; x++) if (bytes[a + x] !== bytes[c + x]) return false;
    return true;
  }
}

/** Int64 (and timestamp) columns as numbers; exact below 2^53, which seqs and times are. */
export class Int64Column {
  private readonly d: (arrow.Data & Chunk) | null;
  private readonly words: Int32Array | null;

  constructor(b: arrow.RecordBatch, name: string) {
    this.d = chunkOf(b, name, b.getChild(name)?.type.typeId === arrow.Type.Timestamp ? arrow.Type.Timestamp : arrow.Type.Int);
    const v = this.d?.values as BigInt64Array | undefined;
    this.words = v ? new Int32Array(v.buffer, v.byteOffset, v.length * 2) : null;
  }

  get(i: number): number | null {
    if (!this.d || !validAt(this.d, i)) return null;
    const j = i * 2;
    // Little-endian: low word first.
    return this.words![j + 1]! * 4294967296 + (this.words![j]! >>> 0);
  }
}

export class Int32Column {
  private readonly d: (arrow.Data & Chunk) | null;
  private readonly values: Int32Array | null;

  constructor(b: arrow.RecordBatch, name: string) {
    this.d = chunkOf(b, name, arrow.Type.Int);
    this.values = (this.d?.values as Int32Array | undefined) ?? null;
  }

  get(i: number): number | null {
    if (!this.d || !validAt(this.d, i)) return null;
    return this.values![i]!;
  }
}
