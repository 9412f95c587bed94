/**
 * A seal deleted between a reader's meta listing and its GET of that seal (found by simulation
 * seed 910099). Maintenance deletes an epoch's seal once the epoch's generations are merged and
 * gone and a later epoch of the slot is sealed. A reader that listed before the merge (the
 * generation sealed, the base not yet created) and fetched the seal after the clean-up took the
 * generation for a zombie's (an unsealed epoch below a sealed one), skipped it, and did not know
 * the base existed: an acknowledged item read as not found (I1). The reader now starts over.
 * Real Lance, the real local store and lease store; the schedule forced with promises.
 */
import { describe, expect, it } from 'vitest';
import { createBatch } from './support/batches.ts';
import { manualClock, Pause, raceFixture, settle, sharedLeases, tempRoot, testLog } from './support/race-kit.ts';

const { setup } = raceFixture(10_000);

describe('a seal deleted between the listing and its GET', () => {
  it('the read starts over and sees the item in the base', async () => {
    const root = tempRoot();
    const clock = manualClock();
    const leases = sharedLeases(root, clock);
    const TTL = 10_000;
    const A = testLog({ root, leases, clock, slots: 1, leaseTtlMs: TTL, owner: 'a' });
    const [ack] = await A.log.append([createBatch('x')]);
    const aEpoch = A.log.writerEpoch!;
    // A dies (lease lapses): maintenance takes the orphaned slot (seals A's epoch and its own),
    // merges the generation into a new base, retires and deletes it, then deletes A's seal.
    clock.advance(TTL + 1);
    const R = testLog({ root, leases, clock, slots: 1, leaseTtlMs: TTL, owner: 'reader' });
    const sealGet = new Pause();
    let sawSealed = false;
    R.objects.tap.before = async (op, key) => {
      if (op === 'get' && key.includes(`seal.${aEpoch}`) && !sawSealed) {
        sawSealed = true;
        await sealGet.hit();
      }
    };
    const reading: { fold?: ReturnType<typeof R.log.fold> } = {};
    const M = testLog({
      root,
      leases,
      clock,
      slots: 1,
      leaseTtlMs: TTL,
      owner: 'maintainer',
      // The reader lists while the generation is sealed and unmerged, then waits at the seal GET.
      hooks: {
        beforeMergeStep: async (step) => {
          if (step !== 'read' || reading.fold) return;
          reading.fold = R.log.fold('x');
          await sealGet.reached.promise;
        },
      },
    });
    const rep = await M.log.maintain();
    expect(rep.failures).toEqual([]);
    expect(rep.mergedShards, 'A\'s generation merged').toHaveLength(1);
    expect(await M.objects.inner.get(`_dgcl/meta/seal.${aEpoch}.json`), 'A\'s seal deleted').toBeNull();
    expect(reading.fold, 'the reader listed during the maintenance').toBeDefined();
    sealGet.release();
    const state = await reading.fold!;
    expect(state.lastSeq).toBe(ack!.lastSeq);
    for (const t of [A, R, M]) await t.log.close().catch(() => undefined);
    await leases.close();
  });
});

// A writer taking a slot lists the meta folder (sealPredecessors). A seal deleted by maintenance
// between that listing and its GET threw the reader's "layout changed" error, which only
// `LogReader.read` retried: the append failed UNAVAILABLE, where a fresh listing is all it needed.
describe('a seal deleted between a slot taker\'s listing and its GET', () => {
  it('a writer taking a slot while maintenance deletes a seal it listed still appends', async () => {
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
