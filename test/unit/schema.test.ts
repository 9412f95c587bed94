import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import * as arrow from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EVENT_SCHEMA, LIGHT_COLUMNS, rowsFromArrow, rowsToArrow } from '../../lib/schema.ts';
import type { EventRow } from '../../lib/types.ts';
import { fullRow } from '../support/rows.ts';

// The seed's table, verbatim: name, type, nullable ("?").
const SEED = `event_id string
item_id string
root_item_id string
parent_item_id string?
item_seq int64
checkpoint_id string
event_type string
step_name string?
step_index int64?
step_instance_id string?
iteration int64?
attempt int32
run_id string
writer_epoch string
field_name string?
field_type string?
codec_version int32?
value_kind string?
value_i64 int64?
value_f64 float64?
value_bool bool?
value_str large_string?
value_json large_string?
value_blob large_binary?
payload_size int64?
payload_checksum string?
query_tags_json large_string?
terminal string?
error_type string?
error_dump large_string?
traceback large_string?
event_ts timestamp(us, UTC)
schema_version int32`;

// Deviation (docs/design/seed-deviations.md): large_string -> Utf8, large_binary -> Binary.
const ARROW_OF: Record<string, (t: arrow.DataType) => boolean> = {
  string: (t) => arrow.DataType.isUtf8(t),
  large_string: (t) => arrow.DataType.isUtf8(t),
  large_binary: (t) => arrow.DataType.isBinary(t),
  int64: (t) => arrow.DataType.isInt(t) && t.bitWidth === 64 && t.isSigned,
  int32: (t) => arrow.DataType.isInt(t) && t.bitWidth === 32 && t.isSigned,
  float64: (t) => arrow.DataType.isFloat(t) && t.precision === arrow.Precision.DOUBLE,
  bool: (t) => arrow.DataType.isBool(t),
  'timestamp(us, UTC)': (t) => arrow.DataType.isTimestamp(t) && t.unit === arrow.TimeUnit.MICROSECOND && t.timezone === 'UTC',
};


describe('schema', () => {
  const seed = SEED.split('\n').map((l) => {
    const i = l.indexOf(' ');
    const type = l.slice(i + 1);
    return { name: l.slice(0, i), type: type.replace(/\?$/, ''), nullable: type.endsWith('?') };
  });

  it('has exactly the seed columns, in order, with their types and nullability', () => {
    expect(EVENT_SCHEMA.fields.map((f) => f.name)).toEqual(seed.map((s) => s.name));
    for (const [i, s] of seed.entries()) {
      const f = EVENT_SCHEMA.fields[i]!;
      expect(f.nullable, s.name).toBe(s.nullable);
      expect(ARROW_OF[s.type]!(f.type), `${s.name}: ${String(f.type)} for ${s.type}`).toBe(true);
    }
  });

  it('light columns are all but the blob bytes', () => {
    expect(LIGHT_COLUMNS).not.toContain('value_blob');
    expect(LIGHT_COLUMNS.length).toBe(seed.length - 1);
  });

  it('round-trips rows through a real Lance table exactly (int64 extremes, µs timestamps, all-null bools, bytes)', async () => {
    const db = await lancedb.connect(mkdtempSync(path.join(tmpdir(), 'dgcl-schema-')));
    const t = await db.createEmptyTable('log', EVENT_SCHEMA);
    const rows = [
      fullRow(),
      fullRow({ event_id: 'e2', item_seq: 2, value_i64: 2n ** 63n - 1n, parent_item_id: 'p' }),
      fullRow({ event_id: 'e3', item_seq: 3, value_kind: 'blob', value_i64: null, value_blob: new Uint8Array([0, 255, 7]), payload_size: 3, payload_checksum: 'sha256:x' }),
      fullRow({ event_id: 'e4', item_seq: 4, value_kind: 'bool', value_i64: null, value_bool: false, event_ts: 1 }),
    ];
    // The first add has value_bool null in every row: arrow-js would write an empty bitmap that
    // Lance rejects without lib/arrow-fix.ts.
    await t.add(rowsToArrow(rows.slice(0, 3)) as never);
    await t.add(rowsToArrow(rows.slice(3)) as never);
    const back = rowsFromArrow(await t.query().toArrow()).sort((a, b) => a.item_seq - b.item_seq);
    expect(back).toEqual(rows);
    expect((await t.schema()).fields.map((f) => f.name)).toEqual(seed.map((s) => s.name));
  });

  it('writes any strings and bytes exactly (nulls, empty, multi-byte, astral), also through Lance', async () => {
    const str = fc.option(fc.string({ unit: 'grapheme', maxLength: 12 }), { nil: null });
    const rowsArb = fc.array(
      fc.record({ id: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 }), parent: str, json: str, blob: fc.option(fc.uint8Array({ maxLength: 9 }), { nil: null }) }),
      { minLength: 1, maxLength: 30 },
    );
    const toRows = (xs: { id: string; parent: string | null; json: string | null; blob: Uint8Array | null }[]) =>
      xs.map((x, i) => fullRow({ event_id: `${x.id}#${i}`, item_seq: i + 1, parent_item_id: x.parent, value_json: x.json, value_blob: x.blob }));
    fc.assert(
      fc.property(rowsArb, (xs) => {
        const rows = toRows(xs);
        expect(rowsFromArrow(rowsToArrow(rows))).toEqual(rows);
      }),
      { numRuns: 300 },
    );
    const rows = toRows(fc.sample(rowsArb, { numRuns: 1, seed: 7 })[0]!);
    const db = await lancedb.connect(mkdtempSync(path.join(tmpdir(), 'dgcl-schema-')));
    const t = await db.createEmptyTable('log', EVENT_SCHEMA);
    await t.add(rowsToArrow(rows) as never);
    expect(rowsFromArrow(await t.query().toArrow()).sort((a, b) => a.item_seq - b.item_seq)).toEqual(rows);
  });

  it('reads every column kind exactly from chunked and sliced tables (nulls anywhere), as apache-arrow reads them', () => {
    const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null, freq: 3 });
    const rowArb = fc.record({
      parent_item_id: opt(fc.string({ unit: 'grapheme', maxLength: 6 })),
      step_index: opt(fc.integer({ min: 0, max: 2 ** 40 })),
      codec_version: opt(fc.integer()),
      value_i64: opt(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })),
      value_f64: opt(fc.double({ noNaN: true })),
      value_bool: opt(fc.boolean()),
      value_blob: opt(fc.uint8Array({ maxLength: 6 })),
      event_ts: fc.integer({ min: 0, max: 2 ** 52 }),
      attempt: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
    });
    fc.assert(
      fc.property(fc.array(rowArb, { minLength: 1, maxLength: 40 }), fc.nat(), fc.nat(), (xs, cut, drop) => {
        const rows = xs.map((x, i) => fullRow({ ...x, event_id: `e${i}`, item_seq: i + 1 }));
        // Two chunks per column (as a query's batches give), the first one sliced.
        const at = 1 + (cut % rows.length);
        const whole = rowsToArrow(rows);
        const from = drop % at;
        const rest = rows.slice(at);
        const table = new arrow.Table([...rowsToArrow(rows.slice(0, at)).slice(from).batches, ...(rest.length > 0 ? rowsToArrow(rest).batches : [])]);
        const want = rows.slice(from);
        expect(table.getChild('event_id')!.data.length).toBe(rest.length > 0 ? 2 : 1);
        const got = rowsFromArrow(table);
        expect(got).toEqual(want);
        // The reference for the other types: apache-arrow's own cell reads. Not for int64 and
        // timestamps (get() gives milliseconds or bigints), nor strings (get() drops a leading
        // U+FEFF, test/encoded-rows.test.ts): those are checked against the rows above.
        for (const [k, r] of got.entries()) {
          for (const f of whole.schema.fields) {
            if (arrow.DataType.isUtf8(f.type) || f.name === 'event_ts' || f.name === 'value_i64' || f.name === 'item_seq' || f.name === 'step_index' || f.name === 'iteration' || f.name === 'payload_size') continue;
            const cell = table.getChild(f.name)!.get(k) as unknown;
            expect((r as unknown as Record<string, unknown>)[f.name], f.name).toEqual(cell ?? null);
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
