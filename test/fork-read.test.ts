/**
 * lib/log/admin/fork-read.ts on hand-made batches: which events a fork keeps of what it reads
 * (before each item's first event of the fork's step, each event once, in seq order), also when
 * an item's events come in several batches, and what the lineage event takes from them.
 */
import * as arrow from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import { cutItems, forkReader, lineageSource, ChunkColumns } from '../lib/log/admin/fork-read.ts';
import type { StepRef } from '../lib/log/admin/fork-plan.ts';
import { gatherEvents } from '../lib/log/gather.ts';
import { COLUMN_NAMES, rowsFromArrow, rowsToArrow } from '../lib/schema.ts';
import type { EventRow } from '../lib/types.ts';
import { fullRow } from './support/rows.ts';

/** An event of `item` at `seq`, of step `step` (index = the name's length, for index cuts). */
function ev(item: string, seq: number, step: string | null, over: Partial<EventRow> = {}): EventRow {
  return fullRow({ event_id: `${item}-${seq}`, item_id: item, root_item_id: item, item_seq: seq, checkpoint_id: `${item}-c${seq}`, step_name: step, step_index: step === null ? null : step.length, ...over });
}

/** The visitor fed `batches` (row kept unless listed in `dropped`: a duplicate copy), cut for `ids`. */
function run(ids: string[], k: StepRef, batches: Array<{ rows: EventRow[]; dropped?: number[]; columns?: readonly string[] }>) {
  const v = forkReader(ids, k);
  for (const b of batches) {
    const t = rowsToArrow(b.rows);
    const batch = (b.columns ? t.select(b.columns as string[]) : t).batches[0]!;
    v.batch(batch, (r) => !(b.dropped ?? []).includes(r));
  }
  return cutItems(v.done(), ids, k, 'file:///src');
}

function keptRows(c: ReturnType<typeof run>, i: number): EventRow[] {
  const from = c.start[i]!;
  const to = c.start[i + 1]!;
  const b = gatherEvents(c.chunks, c.chunk.subarray(from, to), c.row.subarray(from, to), to - from);
  return rowsFromArrow(new arrow.Table([b]));
}

describe('fork read and cut', () => {
  it("keeps each item's events before its lowest seq of the step over every batch, in seq order; duplicates and other items are not read", () => {
    const x = [ev('x', 1, null, { event_type: 'ITEM_CREATED', parent_item_id: 'p' }), ev('x', 2, 'gen'), ev('x', 3, 'gen', { attempt: 2, writer_epoch: 's01-e000007' }), ev('x', 5, 'judge'), ev('x', 7, 'gen'), ev('x', 8, 'judge')];
    const c = run(['x', 'y'], 'judge', [
      // judge first met at 8, then (a later batch) at 5: 7 must go although it was copied.
      { rows: [ev('y', 2, 'gen'), x[4]!, x[5]!, ev('other', 1, null), x[0]!, x[2]!] },
      { rows: [x[3]!, ev('x', 4, 'gen'), x[1]!, ev('y', 1, null), ev('x', 0, 'judge')], dropped: [4] },
    ]);
    expect(keptRows(c, 0)).toEqual([x[0], x[1], x[2], ev('x', 4, 'gen')]);
    expect(keptRows(c, 1)).toEqual([ev('y', 1, null), ev('y', 2, 'gen')]);
    const cols = new ChunkColumns(c.chunks);
    expect(lineageSource(c, 0, 'x', cols)).toEqual({ itemId: 'x', lastKeptSeq: 4, rootItemId: 'x', parentItemId: 'p', attempt: 1, writerEpoch: 's00-e000001' });
    // By step index: "gen" is index 3, first at seq 2.
    const byIndex = run(['x'], 3, [{ rows: x }]);
    expect(keptRows(byIndex, 0)).toEqual([x[0]]);
  });

  it('a batch without some column is read through its rows: the same events kept, the missing column null', () => {
    const rows = [ev('x', 1, null, { traceback: null }), ev('x', 2, 'judge', { traceback: 'tb' })];
    const c = run(['x'], 'judge', [{ rows, columns: COLUMN_NAMES.filter((n) => n !== 'traceback') }]);
    expect(keptRows(c, 0)).toEqual([rows[0]]);
  });

  it('an item none of whose events was read is NOT_FOUND; one that keeps nothing is INVALID_INPUT; the first in the list decides', () => {
    const batches = [{ rows: [ev('x', 1, null), ev('y', 1, 'judge')] }];
    expect(() => run(['x', 'z', 'y'], 'judge', batches)).toThrow(expect.objectContaining({ code: 'NOT_FOUND', message: expect.stringContaining('"z"') }));
    expect(() => run(['x', 'y', 'z'], 'judge', batches)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT', field: 'fromStep', message: expect.stringContaining('"y"') }));
  });

  it('an event without an item id is CORRUPT', () => {
    expect(() => run(['x'], 'judge', [{ rows: [ev('x', 1, null), ev('x', 2, null, { item_id: null as never })] }])).toThrow(expect.objectContaining({ code: 'CORRUPT' }));
  });
});
