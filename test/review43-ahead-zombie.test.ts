/**
 * review43: mergeOwnShard() (and the idle merge) retire the made-ahead generation without
 * confirming the epoch is current (giveUpAhead -> retireUnused), unlike retireGivenUp, which
 * checks first because a retirement under the maintainer's merge of a sealed epoch failed that
 * merge (review30). A writer frozen past its lease: a takeover sealed its epoch (the made-ahead
 * generation listed, empty), the maintainer merges it; the zombie's mergeOwnShard() (no
 * generation frozen, so no merge that would find the seal) deletes it under that merge.
 */
import { describe, expect, it } from 'vitest';
import { Pause, raceFixture, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const { setup } = raceFixture(TTL);
const AHEAD = 's00-e000001-g000002';
const batch = (itemId: string, index: number) => ({ itemId, runId: 'r', ...(index === 0 ? { create: {} } : {}), step: { name: 's', index }, set: { v: `${itemId}${index}` } });

describe('review43: a zombie giving its made-ahead generation up', () => {
  it('does not retire it under the maintainer merging its sealed epoch', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', mergeEveryCommits: 5, mergeIdleMs: 0 });
    for (let i = 0; i < 5; i++) await A.log.append([batch(`x${i}`, 0)]); // g1 rotated and merged; g2 made ahead, untaken
    await A.log.idle();
    // A freezes past its lease; B takes the slot over and seals A's epoch (g2 listed, empty).
    s.clock.advance(2 * TTL);
    const B = s.open({ slot: 0, slots: 2, owner: 'b', mergeIdleMs: 0 });
    await B.log.append([batch('y', 0)]);
    const paused = new Pause();
    const M = s.open({
      slot: 1,
      slots: 2,
      owner: 'm',
      mergeIdleMs: 0,
      hooks: { beforeMergeStep: async (step, shard) => void (step === 'read' && shard === AHEAD && (await paused.hit())) },
    });
    const maintained = M.log.maintain();
    await paused.reached.promise;
    // The zombie thaws and merges its own shard (nothing frozen: no merge finds the seal).
    await A.log.mergeOwnShard().catch(() => undefined);
    await A.log.idle();
    paused.release();
    expect((await maintained).failures, 'the maintainer merged the sealed epoch without failing').toEqual([]);
    const read = () => withFreshReader(s.root, s.leases, s.clock, async (r) => (await r.items()).items.length);
    expect(await read()).toBe(6);
  });
});
