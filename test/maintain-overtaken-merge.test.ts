/**
 * An overtaken maintenance pass that went on would merge generations from the listing it took
 * before the takeover (lib/log/maintain/maintain.ts: a pass stops once another maintainer holds
 * its lease). Here the new maintainer merged a generation and marked it retired, but its files'
 * deletion kept failing, and its passes purged an item deleted from it and dropped the
 * tombstone: merged again, the generation would put the item's rows back (D1).
 */
import { describe, expect, it } from 'vitest';
import { SHARDS_DIR } from '../lib/log/layout.ts';
import { trajectoryOrNone } from './support/ack-checks.ts';
import { Pause, raceFixture, settle, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const RETENTION = 3_600_000;
const { setup } = raceFixture(TTL);
const batch = (itemId: string) => ({ itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: itemId } });

describe('an overtaken maintenance pass', () => {
  it('stops after its step in progress, and does not merge again a generation retired meanwhile whose files could not be deleted', async () => {
    const { open, clock, root, leases } = setup();
    const A = open({ slot: 0, slots: 3 });
    const B = open({ slot: 1, slots: 3 });
    await A.log.append([batch('first')]);
    await B.log.append([batch('doomed')]);
    clock.advance(2 * TTL); // both writers' leases ran out: their generations are orphans
    const pause = new Pause();
    let commits = 0;
    const M1 = open({
      slot: 2,
      slots: 3,
      owner: 'maintainer-1',
      hooks: {
        beforeMergeStep: async (step) => {
          if (step === 'base-commit' && commits++ === 0) await pause.hit();
        },
      },
    });
    const stalled = settle(M1.log.maintain());
    await pause.reached.promise; // M1 listed both generations, sealed, and is in its first merge
    expect((await A.log.deleteItem('doomed')).deleted).toBe(true);
    clock.advance(2 * RETENTION); // M1's lease ran out; the tombstone is past the retention
    const M2 = open({ slot: 2, slots: 3, owner: 'maintainer-2' });
    // M2 cannot delete B's generation's files (an S3 error, every time): merged, marked retired, left.
    M2.objects.tap.before = (op, key) => {
      if (op === 'deletePrefix' && key.startsWith(`${SHARDS_DIR}/s01-`)) throw new Error('injected: S3 503');
    };
    await M2.log.maintain();
    clock.advance(RETENTION);
    await M2.log.maintain();
    const doomed = async () => withFreshReader(root, leases, clock, async (log) => (await trajectoryOrNone(log, 'doomed')).length);
    expect(await doomed(), 'deleted, purged, tombstone dropped').toBe(0);
    pause.release();
    const late = await stalled;
    expect(await doomed(), 'the deleted item stays deleted (D1)').toBe(0);
    expect(late.ok && [late.value.mergedShards.length, late.value.stoppedBy], 'M1 finished the merge it was in, then stopped').toEqual([1, 'FENCED']);
  }, 120_000);
});
