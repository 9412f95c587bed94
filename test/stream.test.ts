/**
 * items()/failures() (one streaming pass over light columns, lib/log/read/stream.ts + summary.ts)
 * against the fold of every item (allStates), on real Lance: unmerged shards of two writers,
 * duplicate deliveries through both, a merge that copied rows to the base but stopped before
 * retiring the shard (every event then has two copies), and after maintenance.
 */
import { describe, expect, it } from 'vitest';
import { summarize } from '../lib/fold.ts';
import type { LanceCheckpointLog } from '../lib/log/log.ts';
import { raceFixture } from './support/race-kit.ts';

const { setup } = raceFixture(60_000);

async function expectListingsMatchFold(log: LanceCheckpointLog, label: string): Promise<void> {
  // Each event exactly once, at the seq fold shows it.
  const seen = await log.scanEvents({ columns: ['event_id', 'item_seq'] }, () => {
    const ids: string[] = [];
    return {
      batch(b, keep) {
        const col = b.getChild('event_id')!;
        const seqs = b.getChild('item_seq')!;
        for (let r = 0; r < b.numRows; r++) if (keep(r)) ids.push(`${String(col.get(r))}@${String(seqs.get(r))}`);
      },
      done: () => ids,
    };
  });
  const want: string[] = [];
  for (const s of await log.allStates({ fields: false })) for (const t of await log.trajectory(s.itemId)) want.push(`${t.eventId}@${t.itemSeq}`);
  expect(seen.sort(), `${label}: scanEvents delivers each event once`).toEqual(want.sort());
  const states = await log.allStates({ fields: false });
  expect((await log.items()).items, `${label}: items()`).toEqual(states.map(summarize));
  const failed = states.filter((s) => s.status === 'failed').map((s) => ({ itemId: s.itemId, status: s.status, ...s.failures.at(-1)! }));
  expect(await log.failures(), `${label}: failures()`).toEqual(failed);
  for (const status of ['completed', 'failed', 'in_progress'] as const) {
    expect((await log.items({ status })).items.map((i) => i.itemId), `${label}: items(${status})`).toEqual(states.filter((s) => s.status === status).map((s) => s.itemId));
  }
}

function batches(writer: string, n: number) {
  const out: unknown[] = [];
  for (let i = 0; i < n; i++) {
    const itemId = `it-${String(i).padStart(3, '0')}`;
    out.push({ itemId, runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { x: i } });
    if (i % 3 === 0) out.push({ itemId, runId: 'r', step: { name: 'gen', index: 1 }, failed: { errorType: `Boom${i % 2}`, traceback: `tb ${writer}` } });
    else out.push({ itemId, runId: 'r', step: { name: 'gen', index: 1 }, set: { y: i }, ...(i % 3 === 1 ? { terminal: 'completed' } : {}) });
  }
  return out;
}

describe('items() and failures() from the streaming summary', () => {
  it('equal the folds with two writers, duplicate deliveries, copies in base and shard, and after maintenance', async () => {
    const { open } = setup();
    const failAfterCopy = { on: false };
    const A = open({
      slot: 0,
      slots: 2,
      hooks: {
        beforeMergeStep: (step: string) => {
          if (failAfterCopy.on && step === 'retire-marker') throw new Error('injected: stop after the base commit');
        },
      },
    });
    const B = open({ slot: 1, slots: 2 });
    const all = batches('A', 30);
    // The same batches through both writers (duplicate deliveries), interleaved.
    for (let i = 0; i < all.length; i += 6) {
      await Promise.all([A.log.append(all.slice(i, i + 6)), B.log.append(all.slice(i, i + 6))]);
    }
    await expectListingsMatchFold(A.log, 'unmerged, two writers');

    // A merges but stops after the base commit: its rows are in the base and in its shard.
    failAfterCopy.on = true;
    await expect(A.log.mergeOwnShard()).rejects.toThrow(/injected/);
    failAfterCopy.on = false;
    const stats = await A.log.stats();
    const aShard = stats.shards.filter((s) => s.slot === 0 && !s.retired);
    expect(aShard.length, 'A\'s generation is not retired').toBe(1);
    expect(stats.base.rows, 'the base holds a copy of every row of A\'s generation').toBe(aShard[0]!.rows);
    await expectListingsMatchFold(A.log, 'copies in base and shard');

    await A.log.append(batches('A2', 40).slice(60));
    await A.log.maintain();
    await expectListingsMatchFold(A.log, 'after maintenance');
    expect((await A.log.items()).items).toHaveLength(40);
  });
});
