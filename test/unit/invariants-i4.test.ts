/**
 * The simulation's I4 check (test/support/invariants.ts) and the documented claim window: a
 * second `duplicate: false` for a checkpoint is a violation unless one of the two claims may have
 * been made at least `claimRetentionMs` after the other, in either order. The append that
 * started first may be the stalled one that claims last (simulation seed 842).
 */
import { describe, expect, it } from 'vitest';
import { parseBatch } from '../../lib/batch.ts';
import type { Ack } from '../../lib/types.ts';
import { checkHistory, History } from '../support/invariants.ts';
import { createBatch } from '../support/batches.ts';

const RETENTION = 1_000;

function firstAck(batch: Record<string, unknown>): Ack {
  const p = parseBatch(batch);
  const n = p.events.length;
  return { itemId: p.itemId, checkpointId: p.checkpointId, eventIds: p.events.map((e) => e.eventId), firstSeq: 1, lastSeq: n, duplicate: false };
}

/** Appends A (starts first) and B of one batch, both acked duplicate:false, at the given clock times. */
function i4(times: { aStart: number; bStart: number; bEnd: number; aEnd: number }): string[] {
  let now = 0;
  const h = new History({ nowMs: () => now, claimRetentionMs: RETENTION });
  const batch = createBatch('x');
  now = times.aStart;
  const a = h.beginAppend('A', [batch]);
  now = times.bStart;
  const b = h.beginAppend('B', [batch]);
  now = times.bEnd;
  h.endAppend(b, { acks: [firstAck(batch)] });
  now = times.aEnd;
  h.endAppend(a, { acks: [firstAck(batch)] });
  return checkHistory(h).filter((v) => v.invariant === 'I4').map((v) => v.message);
}

describe('I4 and the claim window', () => {
  it('reports two first acks within the window', () => {
    expect(i4({ aStart: 0, bStart: 10, bEnd: 20, aEnd: 500 })).toHaveLength(1);
  });

  it('allows the append that started first to claim after the other claim expired (it stalled past the window)', () => {
    expect(i4({ aStart: 0, bStart: 10, bEnd: 20, aEnd: 21 + RETENTION })).toEqual([]);
  });

  it('allows a later append that claimed past the window after the first ended', () => {
    expect(i4({ aStart: 0, bStart: RETENTION + 50, bEnd: RETENTION + 60, aEnd: RETENTION + 70 })).toEqual([]);
  });
});
