/** rowsFromArrow of some rows only (the fork's read): the same rows a full conversion gives, across chunks. */
import * as arrow from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import { CorruptError } from '../lib/errors.ts';
import { rowsFromArrow, rowsToArrow } from '../lib/schema.ts';
import { fullRow } from './support/rows.ts';

describe('rowsFromArrow with row positions', () => {
  const chunked = () =>
    new arrow.Table([
      ...rowsToArrow([fullRow({ event_id: 'e0', value_str: 'zero' }), fullRow({ event_id: 'e1', step_name: null })]).batches,
      ...rowsToArrow([fullRow({ event_id: 'e2', item_seq: 7 }), fullRow({ event_id: 'e3', value_blob: new Uint8Array([1, 2, 3]) }), fullRow({ event_id: 'e4', iteration: null })]).batches,
    ]);

  it('gives exactly the rows at those positions, in order, equal to the full conversion of them', () => {
    const table = chunked();
    const all = rowsFromArrow(table);
    for (const only of [[0, 2, 3], [1, 4], [4], [0, 1, 2, 3, 4]]) {
      expect(rowsFromArrow(table, only)).toEqual(only.map((i) => all[i]));
    }
    expect(rowsFromArrow(table, [])).toEqual([]);
  });

  it('a required column null at a chosen position is a CorruptError naming its row; one at a position not chosen is not read', () => {
    const table = new arrow.Table([...rowsToArrow([fullRow()]).batches, ...rowsToArrow([fullRow({ event_id: 'e9', writer_epoch: null as unknown as string })]).batches]);
    expect(rowsFromArrow(table, [0]).map((r) => r.event_id)).toEqual(['e1']);
    expect(() => rowsFromArrow(table, [0, 1])).toThrow(CorruptError);
    expect(() => rowsFromArrow(table, [1])).toThrow('column writer_epoch is null in a stored event (row 1)');
  });
});
