/**
 * Adversarial review 6 (d017db1..d750bcb: read() re-lists before an error fn decided on; the
 * maintenance sweep only sweeps ended epochs). Real Lance datasets in temp folders, the real local
 * store and lease store; schedules forced with promises.
 *
 * F1: a seal written for an epoch whose seal cleanupMeta already deleted. An epoch below a sealed
 * epoch of its slot and without a seal of its own is invisible to readers (listingOf), and the
 * sweep now treats its unmarked folders as over. But a later takeover's sealPredecessors seals
 * every earlier epoch that has a `gen.` marker and no seal, and writeSeal lists that epoch's
 * generations at their latest versions: a zombie generation whose marker landed late (after
 * cleanupMeta deleted the epoch's seal) became visible, with the zombie's unconfirmed commit,
 * and the sweep that had decided on the folder deleted it under the new seal: a visible
 * generation without data, every read failing.
 */
import { describe, expect, it } from 'vitest';
import { createBatch } from './support/batches.ts';
import { manualClock, Pause, settle, sharedLeases, tempRoot, testLog, withFreshReader, eventsOf, writerHeldAtFirstMarker } from './support/race-kit.ts';

describe('review6 F1: an epoch whose seal was cleaned up is never sealed again with what a zombie wrote later', () => {
  it('a late marker of a cleaned-up epoch stays invisible; the sweep deleting its folder breaks no read', async () => {
    const root = tempRoot();
    const clock = manualClock();
    const leases = sharedLeases(root, clock);
    const TTL = 10_000;
    // A (epoch 1) creates its first generation: the dataset exists, the gen. marker is held.
    const { writer: A, marker, appended: aDone, writerEpoch: aEpoch } = await writerHeldAtFirstMarker({ root, leases, clock, leaseTtlMs: TTL, owner: 'a' }, createBatch('z'));

    // A's lease lapses; B takes the slot (seals A's epoch: no generation listed), writes, closes.
    clock.advance(TTL + 1);
    const B = testLog({ root, leases, clock, slots: 1, leaseTtlMs: TTL, owner: 'b' });
    const [bAck] = await B.log.append([createBatch('y')]);
    await B.log.close();

    // Maintenance pass 1: its sweep of A's folder fails (storage trouble), its meta cleanup
    // deletes A's seal (no generation of A's epoch is listed) and the fences.
    const M = testLog({ root, leases, clock, slots: 1, leaseTtlMs: TTL, owner: 'maintainer' });
    let failSweep = true;
    const sweep = new Pause();
    M.objects.tap.before = async (op, key) => {
      if (op !== 'deletePrefix' || !key.includes(aEpoch)) return;
      if (failSweep) throw new Error('simulated: the delete of the folder failed');
      await sweep.hit();
    };
    const m1 = await M.log.maintain();
    expect(m1.failures.map((f) => f.step), 'pass 1: only the sweep failed').toEqual(['zombies']);
    expect(await M.objects.get(`_dgcl/meta/seal.${aEpoch}.json`), "A's seal was cleaned up").toBeNull();

    // Pass 2 decides to sweep A's folder (no seal, no fence, a later epoch sealed); held.
    failSweep = false;
    const m2 = settle(M.log.maintain());
    await Promise.race([sweep.reached.promise, m2]);

    // A's marker lands, A commits (a zombie: its epoch check fails).
    A.objects.tap.before = undefined;
    marker.release();
    const a = await aDone;
    expect(a.ok, 'A was fenced').toBe(false);
    // C takes the slot: its takeover seals the earlier epochs that have generations.
    const C = testLog({ root, leases, clock, slots: 1, leaseTtlMs: TTL, owner: 'c' });
    const [cAck] = await C.log.append([createBatch('w')]);
    sweep.release();
    const done = await m2;
    expect(done.ok && done.value.failures, 'pass 2 ran without failures').toEqual([]);

    // Reads work, show B's and C's items, and nothing of A's failed append.
    const seen = await withFreshReader(root, leases, clock, async (r) => {
      const out: Record<string, unknown> = {};
      for (const id of ['y', 'w', 'z']) {
        const got = await settle(eventsOf(r, id));
        out[id] = got.ok ? got.value.size : `${(got.error as { code?: string }).code}: ${(got.error as Error).message}`;
      }
      return out;
    });
    expect(seen).toEqual({ y: bAck!.eventIds.length, w: cAck!.eventIds.length, z: 0 });
    await C.log.close();
    await M.log.close();
  });
});
