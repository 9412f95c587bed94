/**
 * Review 8 (the item listing projection and the reader's seal-vanished fix). Real Lance, the
 * real local object and lease stores; schedules forced with promises.
 *
 * F1: the projection a process keeps is handed out by reference: `items()` returned the cached
 *     aggregate's cursor object itself, so a caller changing a page it was given changed every
 *     later listing of that process (the scan answers from fresh objects every time).
 * F2: a writer taking a slot lists the meta folder (sealPredecessors). A seal deleted by
 *     maintenance between that listing and its GET now throws the reader's "layout changed"
 *     error, which only `LogReader.read` retried: the append failed UNAVAILABLE, where a fresh
 *     listing is all it needed.
 */
import { describe, expect, it } from 'vitest';
import type { ItemSummary } from '../lib/api.ts';
import { createBatch } from './support/batches.ts';
import { Pause, raceFixture, settle } from './support/race-kit.ts';

const { setup } = raceFixture(10_000);

function stepBatch(itemId: string, name: string, index: number): unknown {
  return { itemId, runId: 'r', step: { name, index }, set: { [name]: index } };
}

describe('review 8', () => {
  it('F1: a caller changing a listing it was given does not change later listings', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 1 });
    await A.log.append([createBatch('a'), createBatch('b')]);
    await A.log.append([stepBatch('a', 'load', 0), stepBatch('b', 'load', 0)]);
    await A.log.mergeOwnShard();
    const M = open({ slot: 0, slots: 1, owner: 'maintainer' });
    expect((await M.log.maintain()).projection?.countedRows).toBe((await A.log.stats()).base.rows);
    expect(await A.log.projected(), 'the listing is served from the projection').not.toBeNull();

    const first = (await A.log.items()).items;
    const want: ItemSummary[] = structuredClone(first);
    expect(want[0]!.cursor).toMatchObject({ stepName: 'load', stepIndex: 0 });
    // What a caller may do with its own page.
    first[0]!.cursor!.stepName = 'changed by the caller';
    first[0]!.cursor!.stepIndex = 99;
    expect((await A.log.items()).items, 'a later listing').toEqual(want);
    expect((await A.log.items({ status: 'in_progress' })).items, 'a later filtered listing').toEqual(want);
  });

  it('F2: a writer taking a slot while maintenance deletes a seal it listed still appends', async () => {
    const { clock, open } = setup();
    const TTL = 10_000;
    // A writes in slot 0 and dies: maintenance takes the orphaned slot (sealing A's epoch and
    // its own), merges and deletes A's generation, then deletes A's seal (no longer needed).
    const A = open({ slot: 0, slots: 2, owner: 'a' });
    await A.log.append([createBatch('x')]);
    const aEpoch = A.log.writerEpoch!;
    clock.advance(TTL + 1);
    const W = open({ slot: 1, slots: 2, owner: 'w' });
    const sealGet = new Pause();
    let paused = false;
    W.objects.tap.before = async (op, key) => {
      if (op === 'get' && key.endsWith(`seal.${aEpoch}.json`) && !paused) {
        paused = true;
        await sealGet.hit();
      }
    };
    const writing: { append?: ReturnType<typeof settle> } = {};
    const M = open({
      slot: 0,
      slots: 2,
      owner: 'maintainer',
      hooks: {
        // W lists the meta folder while A's generation is sealed and unmerged, then waits at the
        // seal's GET until the maintenance pass (which deletes the seal) is over.
        beforeMergeStep: async (step) => {
          if (step !== 'read' || writing.append) return;
          writing.append = settle(W.log.append([createBatch('y')]));
          await sealGet.reached.promise;
        },
      },
    });
    const rep = await M.log.maintain();
    expect(rep.failures).toEqual([]);
    expect(rep.mergedShards, 'A\'s generation merged').toHaveLength(1);
    expect(await M.objects.inner.get(`_dgcl/meta/seal.${aEpoch}.json`), 'A\'s seal deleted').toBeNull();
    expect(writing.append, 'W took its slot during the maintenance').toBeDefined();
    sealGet.release();
    const out = await writing.append!;
    expect(out.ok ? 'acked' : String(out.error), 'W\'s append').toBe('acked');
    expect((await W.log.fold('y')).itemId).toBe('y');
    expect((await W.log.fold('x')).itemId).toBe('x');
  });
});
