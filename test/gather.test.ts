/**
 * lib/log/gather.ts: rows of record batches copied into a new batch of the log schema, buffer to
 * buffer, exactly as they were (what a fork commits from the batches it read).
 */
import * as arrow from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import { CorruptError, InternalError } from '../lib/errors.ts';
import { conforms, gatherEvents } from '../lib/log/gather.ts';
import { COLUMN_NAMES, EVENT_SCHEMA, rowsFromArrow, rowsToArrow } from '../lib/schema.ts';
import type { EventRow } from '../lib/types.ts';
import { fullRow } from './support/rows.ts';

const batchOf = (rows: EventRow[]) => rowsToArrow(rows).batches[0]!;
const rowsOfBatch = (b: arrow.RecordBatch) => rowsFromArrow(new arrow.Table([b]));

/** Rows that differ in every kind of column: nulls and values, booleans, int64 extremes, -0, unicode, blobs. */
function varied(prefix: string, n: number): EventRow[] {
  return Array.from({ length: n }, (_, i) =>
    fullRow({
      event_id: `${prefix}-${i}`,
      item_id: `${prefix}-item-${i % 3}`,
      parent_item_id: i % 2 === 0 ? null : `parent ✓ ${i}`,
      item_seq: i + 1,
      step_index: i % 4 === 0 ? null : i,
      value_i64: i % 3 === 0 ? null : i % 3 === 1 ? 2n ** 63n - 1n : -(2n ** 63n) + BigInt(i),
      value_f64: i % 5 === 0 ? null : i % 5 === 1 ? -0 : i / 7,
      value_bool: i % 3 === 0 ? null : i % 3 === 1,
      value_str: i % 2 === 0 ? null : 'ü'.repeat(i * 7),
      value_blob: i % 4 === 1 ? null : new Uint8Array(Array.from({ length: i * 11 }, (_, k) => (k * 31 + i) & 0xff)),
      event_ts: 1_700_000_000_000_000 + i,
    }),
  );
}

describe('gatherEvents', () => {
  it('copies the picked rows of several sources, in pick order, every column exactly (sliced sources too)', () => {
    const a = varied('a', 40);
    const b = varied('b', 9);
    // A slice starts at a bit offset inside the validity and boolean bitmaps.
    const sources = [batchOf(a), batchOf(b).slice(1, 9)];
    const picks: Array<[number, number]> = [
      ...Array.from({ length: 35 }, (_, i): [number, number] => [0, i + 2]), // one long run
      [1, 0],
      [1, 1],
      [0, 0],
      [1, 5],
      [0, 39],
      [0, 39], // the same row twice
      [1, 2],
    ];
    const out = gatherEvents(sources, picks.map((p) => p[0]), picks.map((p) => p[1]), picks.length);
    expect(out.schema.fields.map((f) => [f.name, String(f.type), f.nullable])).toEqual(EVENT_SCHEMA.fields.map((f) => [f.name, String(f.type), f.nullable]));
    const source = (s: number) => (s === 0 ? a : b.slice(1));
    expect(rowsOfBatch(out)).toEqual(picks.map(([s, r]) => source(s)[r]));
  });

  it('keeps the bits of a float (a NaN with a payload) and an int64, not their numbers', () => {
    const b = batchOf([fullRow({ value_f64: 1 }), fullRow({ value_f64: 2 })]);
    const words = new Int32Array((b.getChild('value_f64')!.data[0]!.values as Float64Array).buffer);
    words[1] = 0x7ff00000; // a signalling NaN's exponent ...
    words[0] = 0x12345; // ... and payload
    const out = gatherEvents([b], [0, 0], [0, 0], 2);
    const got = new Int32Array((out.getChild('value_f64')!.data[0]!.values as Float64Array).buffer);
    expect([got[0], got[1], got[2], got[3]]).toEqual([0x12345, 0x7ff00000, 0x12345, 0x7ff00000]);
    expect(out.getChild('value_i64')!.get(1)).toBe(-(2n ** 63n));
  });

  it('a null in a column the schema requires is CORRUPT, as reading it into a row is', () => {
    const b = batchOf([fullRow(), fullRow({ item_id: null as never })]);
    expect(() => gatherEvents([b], [0], [0], 1)).not.toThrow();
    expect(() => gatherEvents([b], [0, 0], [0, 1], 2)).toThrow(CorruptError);
    expect(() => rowsOfBatch(b)).toThrow(CorruptError);
  });

  it('takes only batches laid out as the schema: a column missing or of another type is refused', () => {
    const full = rowsToArrow([fullRow()]);
    expect(conforms(full.batches[0]!)).toBe(true);
    const missing = full.select(COLUMN_NAMES.filter((c) => c !== 'traceback')).batches[0]!;
    expect(conforms(missing)).toBe(false);
    const wider = new arrow.Table({ ...Object.fromEntries(COLUMN_NAMES.map((c) => [c, full.getChild(c)!])), attempt: arrow.vectorFromArray([1n], new arrow.Int64()) }).batches[0]!;
    expect(conforms(wider)).toBe(false);
    expect(() => gatherEvents([missing], [0], [0], 1)).toThrow(InternalError);
  });
});
