/**
 * The checker's rule for acks after a delete (test/support/invariants.ts): an append that began
 * after a delete of its item returned writes the item's next incarnation, above every seq the
 * delete covers. An ack at seqs at or below it can never be visible (D1), so it is a violation
 * whatever is read later (a writer that took a deleted incarnation's rows for the item's state
 * answered a new creation as a duplicate of the old one: simulation, `own-rows-listed-only`).
 * A delete that had not returned when the append began still excuses its seqs.
 */
import { describe, expect, it } from 'vitest';
import { parseBatch } from '../../lib/batch.ts';
import { incarnate } from '../../lib/log/write/sequence.ts';
import type { Ack } from '../../lib/types.ts';
import { checkHistory, History } from '../support/invariants.ts';
import { createBatch } from '../support/batches.ts';

function ackOf(batch: Record<string, unknown>, base: number, duplicate: boolean): Ack {
  const p = incarnate(parseBatch(batch), base);
  return { itemId: p.itemId, checkpointId: p.checkpointId, eventIds: p.events.map((e) => e.eventId), firstSeq: base + 1, lastSeq: base + p.events.length, duplicate };
}

/** The item created (seqs 1..n), deleted through n, then its creation sent again and answered `ack(n)`. */
function recreated(order: 'after' | 'during', ack: (n: number, batch: Record<string, unknown>) => Ack, o: { guarded?: boolean } = {}): string[] {
  const h = new History();
  const batch = createBatch('x');
  const first = h.beginAppend('w1', [batch]);
  const created = ackOf(batch, 0, false);
  h.endAppend(first, { acks: [created] });
  const n = created.lastSeq;
  const del = h.beginDelete('x', o.guarded ? n : null);
  let again = -1;
  if (order === 'during') again = h.beginAppend('w2', [batch]);
  h.endDelete(del, n, o.guarded ? false : true);
  if (order === 'after') again = h.beginAppend('w2', [batch]);
  h.endAppend(again, { acks: [ack(n, batch)] });
  return checkHistory(h).map((v) => v.message);
}

describe('acks after a delete', () => {
  it('reports a creation sent after the delete returned and answered as a duplicate at the deleted seqs', () => {
    const v = recreated('after', (_, b) => ackOf(b, 0, true));
    expect(v).toHaveLength(1);
    expect(v[0]).toMatch(/^I4 duplicate ack .* began after the delete of the item through seq 3 .* acked at seqs it deleted$/);
  });

  it('reports a first ack at the deleted seqs (a new incarnation that started again at seq 1)', () => {
    const v = recreated('after', (_, b) => ackOf(b, 0, false));
    expect(v.filter((m) => /^I1 .* acked at seqs it deleted$/.test(m))).toHaveLength(1);
  });

  it('accepts the new incarnation above the deleted seqs', () => {
    expect(recreated('after', (n, b) => ackOf(b, n, false))).toEqual([]);
  });

  it('accepts an ack at the deleted seqs when the append began before the delete returned', () => {
    expect(recreated('during', (_, b) => ackOf(b, 0, true))).toEqual([]);
  });

  it('takes a guarded delete that answered "not deleted" for one that deleted nothing', () => {
    expect(recreated('after', (_, b) => ackOf(b, 0, true), { guarded: true })).toEqual([]);
  });
});
