/**
 * The checker's views of item states (test/support/views.ts): a listing line, fields or a failure
 * must be the view of a whole-batch state at or above every batch acked before the read began,
 * and never below what an earlier read showed.
 */
import { describe, expect, it } from 'vitest';
import { parseBatch } from '../../lib/batch.ts';
import type { Ack } from '../../lib/types.ts';
import { checkHistory, History } from '../support/invariants.ts';

const create = { itemId: 'x', runId: 'r', create: {}, step: { name: 's0', index: 0 }, set: { a: 1 } };
const next = { itemId: 'x', runId: 'r', step: { name: 's1', index: 1 }, set: { b: 2, c: 3 } };

function ack(batch: Record<string, unknown>, firstSeq: number): Ack {
  const p = parseBatch(batch);
  return { itemId: 'x', checkpointId: p.checkpointId, eventIds: p.events.map((e) => e.eventId), firstSeq, lastSeq: firstSeq + p.events.length - 1, duplicate: false };
}

/** Both batches acked (seqs 1-3, 4-6), then reads of the fields answering `answers` in turn. */
function fieldsReads(...answers: Array<Record<string, unknown>>): string[] {
  const h = new History();
  const a = h.beginAppend('w', [create]);
  h.endAppend(a, { acks: [ack(create, 1)] });
  const b = h.beginAppend('w', [next]);
  h.endAppend(b, { acks: [ack(next, 4)] });
  for (const value of answers) {
    const r = h.beginRead('r', 'fields x');
    h.endRead(r, { items: [{ itemId: 'x', view: { kind: 'fields', value, names: ['a', 'b', 'c'] } }] });
  }
  return checkHistory(h).map((v) => v.message);
}

describe('views of item states', () => {
  it('accepts the fields of the latest whole-batch state', () => {
    expect(fieldsReads({ a: 1, b: 2, c: 3 })).toEqual([]);
  });

  it('reports fields from part of a batch as I2', () => {
    expect(fieldsReads({ a: 1, b: 2 })).toEqual([expect.stringMatching(/^I2 item "x": read #0 .* the fields of no whole-batch state/)]);
  });

  it('reports fields older than a batch acked before the read as I1', () => {
    expect(fieldsReads({ a: 1 })).toEqual([expect.stringMatching(/^I1 item "x": read #0 .* as of seq 3, below seq 6 acked/)]);
  });

  it('reports a read that answers an older state than an earlier read as I3', () => {
    const h = new History();
    const a = h.beginAppend('w', [create]);
    h.endAppend(a, { acks: [ack(create, 1)] });
    const b = h.beginAppend('w', [next]);
    // The second batch is acked only after both reads, so neither read is held to it by I1.
    const r1 = h.beginRead('r1', 'items');
    const line = (lastSeq: number, step: string, index: number, cp: string) => ({
      status: 'in_progress',
      cursor: { stepName: step, stepIndex: index, stepInstanceId: null, iteration: null, attempt: 1, checkpointId: cp },
      lastSeq,
    });
    const cps = [parseBatch(create).checkpointId, parseBatch(next).checkpointId];
    h.endRead(r1, { items: [{ itemId: 'x', listedSeq: 6, view: { kind: 'summary', value: line(6, 's1', 1, cps[1]!) } }] });
    const r2 = h.beginRead('r2', 'items');
    h.endRead(r2, { items: [{ itemId: 'x', listedSeq: 3, view: { kind: 'summary', value: line(3, 's0', 0, cps[0]!) } }] });
    h.endAppend(b, { acks: [ack(next, 4)] });
    const out = checkHistory(h).map((v) => v.message);
    // The views' I3 check skips the item (its second append had not returned when the reads
    // ended); the listing's own I3 check on listed seqs reports it.
    expect(out).toEqual([expect.stringMatching(/^I3 item "x": lastSeq 6 in read #0 .*, 3 in later read #1/)]);
  });
});
