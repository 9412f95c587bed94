/**
 * A merger that checked its epoch, then stalled before its base commit (a Lambda container frozen
 * mid-merge, a long pause) while a takeover merged the same generation and maintenance purged a
 * deleted item among its rows: the stalled commit puts the purged rows back into the base. The
 * tombstone stays until the last removal is the deletion retention old (lib/log/maintain/purge.ts), so
 * those rows stay hidden (D1) and a later pass removes them again. On the code before, the
 * tombstone was gone with the first purge and a fresh reader saw the item again.
 * Real Lance on a local root, a manual clock; the stall is a gate in the merge's hook.
 */
import { describe, expect, it } from 'vitest';
import { META_DIR, PURGED_DIR } from '../lib/log/layout.ts';
import { trajectoryOrNone } from './support/ack-checks.ts';
import { deleteMergedItem, Pause, raceFixture, resolvesAfterRelease, settle, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const RETENTION = 3_600_000; // DEFAULTS.deletionRetentionMs
const { setup } = raceFixture(TTL);

const batch = (itemId: string) => ({ itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: itemId } });

describe('a merge stalled across a takeover and a purge', () => {
  it('cannot bring the purged rows back to readers; a later pass removes them again, then the tombstone goes', async () => {
    const { open, clock, root, leases } = setup();
    const stall = new Pause();
    let armed = false;
    const A = open({
      slot: 0,
      slots: 2,
      hooks: {
        beforeMergeStep: async (step) => {
          if (step === 'base-commit' && armed) await stall.hit();
        },
      },
    });
    for (const itemId of ['doomed', 'bystander']) await A.log.append([batch(itemId)]);
    expect((await A.log.deleteItem('doomed')).deleted).toBe(true);
    // A merges its generation: the epoch check passes, then A stalls before the base commit.
    armed = true;
    const merging = settle(A.log.mergeOwnShard());
    await stall.reached.promise;

    const doomedRows = async () => withFreshReader(root, leases, clock, async (log) => (await trajectoryOrNone(log, 'doomed')).length);
    const baseRowsOfDoomed = async (m: typeof M) => (await (await m.log.stats()).base.rows) - (await m.log.trajectory('bystander')).length;
    const tombstones = async () => (await A.objects.list(META_DIR)).filter((n) => n.startsWith('tomb.'));

    // A's lease lapses; the tombstone is past the retention. The maintainer seals A's epoch,
    // merges A's generation and removes the doomed rows from the base.
    clock.advance(2 * RETENTION);
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    const first = await M.log.maintain();
    expect(first.mergedShards, 'the takeover merged A\'s generation').toHaveLength(1);
    expect([first.purgedItems, first.pendingDeletions, first.failures]).toEqual([0, 1, []]);
    expect(await baseRowsOfDoomed(M), 'removed from the base').toBe(0);
    expect(await tombstones(), 'the tombstone stays for the grace').toHaveLength(1);

    // A wakes up and commits its copy of the generation into the base.
    stall.release();
    const merged = await merging;
    expect(merged.ok && merged.value.mergedRows, 'the stalled merge committed its rows').toBeGreaterThanOrEqual(3);
    expect(await baseRowsOfDoomed(M), 'the stalled commit put the doomed rows back into the base').toBe(3);
    expect(await doomedRows(), 'D1: hidden by the tombstone').toBe(0);

    // The next pass finds them and removes them again; the grace starts over.
    clock.advance(2 * RETENTION);
    const second = await M.log.maintain();
    expect([second.purgedItems, second.pendingDeletions, second.failures]).toEqual([0, 1, []]);
    expect(await baseRowsOfDoomed(M)).toBe(0);
    expect(await doomedRows()).toBe(0);

    // A grace later with nothing back: the tombstone and its records go.
    clock.advance(RETENTION);
    const third = await M.log.maintain();
    expect([third.purgedItems, third.pendingDeletions, third.failures]).toEqual([1, 0, []]);
    expect(await tombstones()).toEqual([]);
    expect(await A.objects.list(PURGED_DIR), 'no purge record left').toEqual([]);
    expect(await doomedRows()).toBe(0);
    expect(await withFreshReader(root, leases, clock, async (log) => (await log.trajectory('bystander')).length)).toBe(3);
  });

  it('a maintainer stalled the same way, whose lease another maintainer took, cannot bring them back either', async () => {
    const { open, clock, root, leases } = setup();
    const A = open({ slot: 0, slots: 2 });
    for (const itemId of ['doomed', 'bystander']) await A.log.append([batch(itemId)]);
    expect((await A.log.deleteItem('doomed')).deleted).toBe(true);
    // A's lease lapses with its generation unmerged; the tombstone is past the retention.
    clock.advance(2 * RETENTION);

    // M1 takes the maintainer lease, seals A's epoch, reads A's generation and stalls before
    // its base commit; once let go, it stops again after the commit, before retiring.
    const beforeCommit = new Pause();
    const afterCommit = new Pause();
    const M1 = open({
      slot: 1,
      slots: 2,
      owner: 'maintainer-1',
      hooks: {
        beforeMergeStep: async (step) => {
          if (step === 'base-commit') await beforeCommit.hit();
          if (step === 'retire-marker') await afterCommit.hit();
        },
      },
    });
    const stalled = settle(M1.log.maintain());
    await beforeCommit.reached.promise;

    const doomedRows = async () => withFreshReader(root, leases, clock, async (log) => (await trajectoryOrNone(log, 'doomed')).length);
    const baseRowsOfDoomed = async (m: typeof M2) => (await (await m.log.stats()).base.rows) - (await m.log.trajectory('bystander')).length;

    // M1's maintainer lease lapses; M2 takes it, merges A's generation and removes the doomed rows.
    clock.advance(2 * TTL);
    const M2 = open({ slot: 1, slots: 2, owner: 'maintainer-2' });
    const first = await M2.log.maintain();
    expect(first.mergedShards, 'M2 merged A\'s generation').toHaveLength(1);
    expect([first.purgedItems, first.pendingDeletions, first.failures]).toEqual([0, 1, []]);
    expect(await baseRowsOfDoomed(M2)).toBe(0);

    // M1 wakes up and commits what it read into the base: the rows are back, and hidden.
    beforeCommit.release();
    await afterCommit.reached.promise;
    expect(await baseRowsOfDoomed(M2), 'the stalled commit put the doomed rows back into the base').toBe(3);
    expect(await doomedRows(), 'D1: hidden by the tombstone').toBe(0);

    // M1's merge step finishes; before its next step M1 finds its lease taken over and skips
    // the rest of its pass (the lease elects, it cannot fence the commit above).
    afterCommit.release();
    const late = await stalled;
    expect(late.ok && [late.value.mergedShards, late.value.stoppedBy], 'M1 finished the step it was in, then stopped').toEqual([['s00-e000001-g000001'], 'FENCED']);
    expect(late.ok && late.value.failures.map((f) => `${f.step}:${f.code}`)).toEqual(
      ['zombies', 'deletions', 'snapshots', 'compaction', 'indexes', 'projection', 'claims', 'meta'].map((step) => `${step}:FENCED`),
    );
    expect(await baseRowsOfDoomed(M2), 'still back, and still hidden').toBe(3);
    expect(await doomedRows()).toBe(0);

    // M2's next pass removes them again (the grace starts over); one ms short of a grace after
    // that removal the tombstone stays, at the grace it goes.
    clock.advance(2 * RETENTION);
    const second = await M2.log.maintain();
    expect([second.purgedItems, second.pendingDeletions, second.failures]).toEqual([0, 1, []]);
    expect(await baseRowsOfDoomed(M2)).toBe(0);
    clock.advance(RETENTION - 1);
    expect((await M2.log.maintain()).pendingDeletions).toBe(1);
    clock.advance(1);
    const third = await M2.log.maintain();
    expect([third.purgedItems, third.pendingDeletions, third.failures]).toEqual([1, 0, []]);
    expect(await doomedRows()).toBe(0);
    expect(await withFreshReader(root, leases, clock, async (log) => (await log.trajectory('bystander')).length)).toBe(3);
  });

  it('counts the grace from the removal, to the millisecond', async () => {
    const { open, clock } = setup();
    await deleteMergedItem(open({ slot: 0, slots: 2 }), batch('gone'));
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    clock.advance(RETENTION - 1);
    expect((await M.log.maintain()).pendingDeletions, 'within the retention: nothing removed').toBe(1);
    clock.advance(1);
    const removed = await M.log.maintain();
    expect([removed.purgedItems, removed.pendingDeletions]).toEqual([0, 1]);
    clock.advance(RETENTION - 1);
    expect((await M.log.maintain()).purgedItems, 'one ms short of the grace').toBe(0);
    clock.advance(1);
    expect((await M.log.maintain()).purgedItems).toBe(1);
  });

  it('idle() waits for the merge a commit started in the background (what a Lambda handler awaits before it returns)', async () => {
    const { open } = setup();
    const stall = new Pause();
    const A = open({
      slot: 0,
      slots: 2,
      mergeEveryCommits: 1,
      hooks: {
        beforeMergeStep: async (step) => {
          if (step === 'base-commit') await stall.hit();
        },
      },
    });
    await A.log.append([batch('x')]); // the first commit rotates its generation: a merge starts
    await stall.reached.promise;
    expect(await resolvesAfterRelease(A.log.idle(), stall), 'idle() resolved while the merge was held').toBe(true);
    const stats = await A.log.stats();
    expect(stats.base.rows, 'the merge had committed when idle() resolved').toBe((await A.log.trajectory('x')).length);
  });
});

describe('a merge retried after its base commit, across a takeover and a purge', () => {
  // A writer's merge whose base commit landed and whose retirement failed is retried; with a
  // takeover between the base commit and the retry, the retry sees the seal and leaves the
  // generation to the maintainer; nothing is committed again.
  it('a takeover between the writer\'s base commit and its retry: the retry stops at the seal, the purged rows stay gone', async () => {
    const s = setup();
    const { open, clock } = s;
    let failOnce = true;
    const A = open({
      slot: 0,
      slots: 2,
      hooks: {
        beforeMergeStep: (step) => {
          if (step === 'retire-marker' && failOnce) {
            failOnce = false;
            throw new Error('PUT of the retired marker failed');
          }
        },
      },
    });
    for (const id of ['doomed', 'bystander']) await A.log.append([batch(id)]);
    expect((await settle(A.log.mergeOwnShard())).ok, 'base commit done, retirement failed').toBe(false);
    expect((await A.log.deleteItem('doomed')).deleted).toBe(true);
    clock.advance(TTL + 1); // A's lease runs out (its keeper's timer does not run on this clock)
    const B = open({ slot: 0, slots: 2, owner: 'successor' });
    await B.log.append([batch('other')]); // takes slot 0: seals A's epoch with the generation
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    clock.advance(RETENTION);
    expect((await M.log.maintain()).failures).toEqual([]);
    clock.advance(RETENTION);
    expect((await M.log.maintain()).purgedItems).toBe(1);
    const retry = await A.log.mergeOwnShard();
    expect(retry).toEqual({ mergedRows: 0, shards: [] });
    const shown = await withFreshReader(s.root, s.leases, clock, async (log) => (await trajectoryOrNone(log, 'doomed')).length);
    expect(shown).toBe(0);
  });
});
