/**
 * A deleted item stays deleted (D1, I4): the listings hide it once the delete returned, and a
 * writer's in-memory rows of a generation being retired do not outlive the purge (a creation of
 * the purged item again creates it; a step for it fails). Schedules are forced with promises
 * (tapped stores, writer/merge hooks; no sleeps) on a local root with real Lance.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../lib/index.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { eventsOf, Pause, raceFixture, settle, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
/** Long enough that no lease lapses when the clock jumps past the deletion retention. */
const LONG_TTL = 10 * 3_600_000;
const { setup } = raceFixture(TTL);

describe('a writer\'s in-memory rows of a generation being retired, and the purge', () => {
  // mergeFrozen() dropped ownRows only after mergeGeneration() returned, i.e. after the retired
  // marker AND the deletion of the generation's files. Meanwhile a maintenance pass sees the
  // generation retired (or gone), purges the deleted item from the base and drops its tombstone.
  // plan() then read storage (nothing left of the item, no tombstone) and added its own rows of
  // that generation back, filtered by the (now empty) tombstones: the purged incarnation lived
  // again in the writer's sequencing.
  async function purgedWhileRetiring() {
    const { root, clock, leases, open } = setup();
    const holdRetirement = { on: false };
    const mergePause = new Pause();
    const W = open({
      slot: 0,
      slots: 2,
      leaseTtlMs: LONG_TTL,
      mergeEveryCommits: 2,
      hooks: {
        async beforeMergeStep(step) {
          if (holdRetirement.on && step === 'delete-data') await mergePause.hit();
        },
      },
    });
    const M = open({ slot: 1, slots: 2, leaseTtlMs: LONG_TTL });
    const created = await W.log.append([createBatch('x')]); // commit 1 of W's generation g1
    expect((await W.log.deleteItem('x')).deleted).toBe(true);
    clock.advance(DEFAULTS.deletionRetentionMs + 1);
    // g1 is W's live generation and holds x's rows: the purge waits for it (as designed).
    const first = await M.log.maintain();
    expect(first.pendingDeletions, 'the purge waits for the live generation').toBe(1);

    // Commit 2 rotates g1; the background merge copies it into the base, writes the retired
    // marker, and is paused before deleting its files (a large generation on S3 takes a while).
    holdRetirement.on = true;
    await W.log.append([createBatch('y')]);
    await mergePause.reached.promise;
    holdRetirement.on = false;
    // A maintenance pass: g1 is retired, so no visible shard holds x; x is purged, tombstone dropped.
    const second = await M.log.maintain();
    expect(second.pendingDeletions, 'x is gone from the base; its tombstone stays one retention more').toBe(1);
    clock.advance(DEFAULTS.deletionRetentionMs);
    expect((await M.log.maintain()).purgedItems, 'x was purged').toBe(1);
    return { root, clock, leases, W, mergePause, created };
  }

  it('creating the deleted, purged item again creates it (not a duplicate naming events no reader sees, I4)', async () => {
    const { root, clock, leases, W, mergePause, created } = await purgedWhileRetiring();
    // The pipeline creates x again (the same first batch): x does not exist any more.
    const again = await W.log.append([createBatch('x')]);
    mergePause.release();
    await W.log.close();
    // A new incarnation after the deleted seqs (docs/design/deletion.md: floors): ids of its own.
    expect(again[0]!.eventIds.filter((id) => created[0]!.eventIds.includes(id)), 'no id of the deleted incarnation').toEqual([]);
    expect(again[0]!.duplicate).toBe(false);
    const seen = await withFreshReader(root, leases, clock, (r) => eventsOf(r, 'x'));
    // I4: a duplicate: true ack names events visible to later reads; a fresh creation would be
    // written and acked duplicate: false. Either way, the acked events must be visible.
    expect(
      again[0]!.eventIds.map((id, i) => [id, seen.get(id) ?? 'missing', again[0]!.firstSeq + i]),
      `ack of x (duplicate ${again[0]!.duplicate}) names events at seqs ${again[0]!.firstSeq}-${again[0]!.lastSeq}`,
    ).toEqual(again[0]!.eventIds.map((id, i) => [id, again[0]!.firstSeq + i, again[0]!.firstSeq + i]));
  });

  it('a step for the deleted, purged item fails with ItemNotFoundError (not acknowledged as a headless item)', async () => {
    const { root, clock, leases, W, mergePause } = await purgedWhileRetiring();
    const step = await settle(W.log.append([stepBatch('x', 1)]));
    mergePause.release();
    await W.log.close();
    const state = await withFreshReader(root, leases, clock, async (r) => {
      const f = await settle(r.fold('x'));
      return f.ok ? f.value.violations.map((v) => v.kind) : [(f.error as { code?: string }).code];
    });
    expect(step.ok ? `acked at seq ${step.value[0]!.firstSeq}` : (step.error as { code?: string }).code, 'the step of a purged item').toBe('ITEM_NOT_FOUND');
    expect(state, 'x reads as absent').toEqual(['NOT_FOUND']);
  });
});

describe('items()/failures() and deleted items', () => {
  // The streaming listings (and with them the report and the export) apply the tombstones too
  // (scanEvents), not only the folds.
  it('a deleted item is not listed by items() nor failures() after the delete returned (D1)', async () => {
    const { open } = setup();
    const W = open({ slot: 0, slots: 2 });
    await W.log.append([createBatch('gone'), { itemId: 'gone', runId: 'r1', step: { name: 'gen', index: 1 }, failed: { errorType: 'Boom', traceback: 'tb' } }]);
    await W.log.append([createBatch('kept')]);
    expect((await W.log.deleteItem('gone')).deleted).toBe(true);
    expect((await W.log.items()).items.map((i) => i.itemId)).toEqual(['kept']);
    expect((await W.log.failures()).map((f) => f.itemId)).toEqual([]);
  });
});


