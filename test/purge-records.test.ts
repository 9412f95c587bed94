/**
 * The purge's removal records (purge grace records and their sweep): a leftover record folder
 * that cannot be deleted does not block the purge of the tombstones, and a zombie maintainer's
 * stale sweep only makes a tombstone wait longer. Real Lance on local roots, manual clocks,
 * pauses.
 */
import { describe, expect, it } from 'vitest';
import { PURGED_DIR } from '../lib/log/layout.ts';
import { trajectoryOrNone } from './support/ack-checks.ts';
import { deleteMergedItem, Pause, raceFixture, settle, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const RETENTION = 3_600_000; // DEFAULTS.deletionRetentionMs
const { setup } = raceFixture(TTL);

const batch = (itemId: string) => ({ itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: itemId } });

describe('removal records of the purge', () => {
  // sweepRecords ran first in purgeDeleted (and is the whole deletions step when the listing
  // has no tombstone): a failure to delete one leftover record folder (garbage of a tombstone
  // that is gone) failed the step before any tombstone was looked at. A folder whose delete kept
  // failing (a DeleteObjects that reports the key not deleted: object lock, a policy) stopped every
  // purge of the log, pass after pass (one bad object must not block the others). The sweep runs
  // last and reports a failed delete without stopping the purge.
  it('a leftover record folder that cannot be deleted does not block the purge of the tombstones', async () => {
    const s = setup();
    const { open, clock } = s;
    await deleteMergedItem(open({ slot: 0, slots: 2 }), batch('gone'));
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    const stale = `${PURGED_DIR}/tomb.${'0'.repeat(40)}.000000000001`;
    await M.objects.put(`${stale}/000000000000001`, '');
    M.objects.tap.before = (op, key) => {
      if (op === 'deletePrefix' && key === stale) throw new Error('DeleteObjects: 1 of 1 objects were not deleted (AccessDenied)');
    };
    clock.advance(RETENTION);
    const first = await M.log.maintain();
    expect(first.pendingDeletions, 'the rows were removed despite the leftover').toBe(1);
    clock.advance(RETENTION);
    const second = await M.log.maintain();
    expect(second.purgedItems, 'the tombstone was dropped despite the leftover').toBe(1);
    expect(await withFreshReader(s.root, s.leases, clock, async (log) => (await trajectoryOrNone(log, 'gone')).length)).toBe(0);
  });

  // sweepRecords with a stale listing: a zombie maintainer (lease lost while it stalled inside
  // its 'deletions' step, past its lease check, with a listing that had no tombstone) sweeps
  // every record folder, also the live maintainer's record of a removal it just made. Deleting
  // records only makes the tombstone wait longer. (The stall was in the 'zombies' step before a
  // pass checked its lease between steps; it stops there now.)
  it("a zombie maintainer's stale sweep deletes a live tombstone's records: the tombstone waits longer, never less", async () => {
    const s = setup();
    const { open, clock } = s;
    const A = open({ slot: 0, slots: 2 });
    await A.log.append([batch('keep')]);
    await A.log.mergeOwnShard();
    const Z = open({ slot: 1, slots: 2, owner: 'zombie' });
    const stall = new Pause();
    let stalled = false;
    Z.objects.tap.before = async (op, key) => {
      if (op === 'list' && key === PURGED_DIR && !stalled) {
        stalled = true; // the deletions step's sweep of removal records
        await stall.hit();
      }
    };
    const zombie = settle(Z.log.maintain());
    await stall.reached.promise;
    await A.log.append([batch('gone')]);
    await A.log.mergeOwnShard();
    expect((await A.log.deleteItem('gone')).deleted).toBe(true);
    await A.log.close();
    clock.advance(TTL + RETENTION); // Z's maintainer lease is over: M takes it
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    const removal = await M.log.maintain();
    expect([removal.pendingDeletions, removal.failures]).toEqual([1, []]);
    expect(await M.objects.list(PURGED_DIR)).toHaveLength(1);
    stall.release();
    const z = await zombie;
    expect(z.ok && z.value.stoppedBy, 'the zombie stops after the step it was in').toBe('FENCED');
    expect(await M.objects.list(PURGED_DIR), "the zombie's stale sweep deleted the live record").toEqual([]);
    clock.advance(RETENTION);
    const r1 = await M.log.maintain();
    expect([r1.purgedItems, r1.pendingDeletions], 'no record: a new one, another whole grace').toEqual([0, 1]);
    clock.advance(RETENTION - 1);
    expect((await M.log.maintain()).purgedItems).toBe(0);
    clock.advance(1);
    expect((await M.log.maintain()).purgedItems).toBe(1);
    const shown = await withFreshReader(s.root, s.leases, clock, async (log) => (await trajectoryOrNone(log, 'gone')).length);
    expect(shown).toBe(0);
  });
});
