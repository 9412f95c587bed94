import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Int32Column, Int64Column, Utf8Column } from '../../lib/log/columns.ts';
import { rowsToArrow } from '../../lib/schema.ts';
import type { EventRow } from '../../lib/types.ts';

function row(i: number, x: { parent: string | null; step: number | null; codec: number | null }): EventRow {
  return {
    event_id: `e${i}`, item_id: `item-${i % 3}`, root_item_id: 'r', parent_item_id: x.parent, item_seq: i + 1, checkpoint_id: 'c',
    event_type: 'FIELD_SET', step_name: null, step_index: x.step, step_instance_id: null, iteration: null, attempt: 1,
    run_id: 'r', writer_epoch: 's00-e000001', field_name: null, field_type: null, codec_version: x.codec,
    value_kind: null, value_i64: null, value_f64: null, value_bool: null, value_str: null, value_json: null,
    value_blob: null, payload_size: null, payload_checksum: null, query_tags_json: null, terminal: null,
    error_type: null, error_dump: null, traceback: null, event_ts: 1_700_000_000_000_000 + i, schema_version: 1,
  };
}

describe('fast column readers', () => {
  it('read sliced record batches as the rows they hold (nulls anywhere)', () => {
    const cell = fc.record({
      parent: fc.option(fc.string({ unit: 'grapheme', maxLength: 5 }), { nil: null }),
      step: fc.option(fc.integer({ min: 0, max: 2 ** 50 }), { nil: null }),
      codec: fc.option(fc.integer(), { nil: null }),
    });
    fc.assert(
      fc.property(fc.array(cell, { minLength: 1, maxLength: 30 }), fc.nat(), fc.nat(), (xs, a, b) => {
        const rows = xs.map((x, i) => row(i, x));
        const from = a % rows.length;
        const to = from + 1 + (b % (rows.length - from));
        const batch = rowsToArrow(rows).batches[0]!.slice(from, to);
        const want = rows.slice(from, to);
        const parent = new Utf8Column(batch, 'parent_item_id');
        const item = new Utf8Column(batch, 'item_id');
        const step = new Int64Column(batch, 'step_index');
        const codec = new Int32Column(batch, 'codec_version');
        for (const [k, r] of want.entries()) {
          expect(parent.get(k)).toBe(r.parent_item_id);
          expect(item.is(k, Buffer.from(r.item_id))).toBe(true);
          for (const [j, o] of want.entries()) expect(item.same(k, j)).toBe(o.item_id === r.item_id);
          expect(step.get(k)).toBe(r.step_index);
          expect(codec.get(k)).toBe(r.codec_version);
        }
      }),
      { numRuns: 300 },
    );
  });
});
