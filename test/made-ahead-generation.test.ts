/**
 * A generation made ahead (before the rotation, so the next commit does not wait for it) that no
 * commit took is given up between commits (giveUpAhead, lib/log/write/generations.ts, by
 * mergeOwnShard() and the idle merge): it is retired, and never under another process's merge.
 */
import { describe, expect, it, vi } from 'vitest';
import { UnavailableError } from '../lib/errors.ts';
import { META_DIR } from '../lib/log/layout.ts';
import { Gate, Pause, raceFixture, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const { setup } = raceFixture(TTL);
const AHEAD = 's00-e000001-g000002';
const batch = (itemId: string, index: number) => ({ itemId, runId: 'r', ...(index === 0 ? { create: {} } : {}), step: { name: 's', index }, set: { v: `${itemId}${index}` } });

// giveUpAhead retires the made-ahead generation through retireUnused, which, for a making that
// failed after its marker PUT was sent and whose marker is not there (yet), returns without
// retiring: right for close() (its seal comes next), but giveUpAhead runs in a live epoch and did
// not put the name on `givenUp` either. The marker PUT (timed out) lands later: an empty
// generation stayed live, listed by every read in every process, for the rest of the epoch (while
// before, the next commit took the failed making, gave its name up onto `givenUp`, and a merge
// round retired it once the marker was there).
describe('a made-ahead generation whose marker PUT timed out and lands later', () => {
  it.each(['mergeOwnShard', 'idle'] as const)('is retired by later merge rounds once its marker is there (%s)', async (how) => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', mergeEveryCommits: 5, cachedItems: 0, mergeIdleMs: how === 'idle' ? 20 : 0 });
    const land = new Gate();
    let late: Promise<boolean> | null = null;
    A.objects.tap.before = (op, key) => {
      if (op === 'putIfAbsent' && key === `${META_DIR}/gen.${AHEAD}` && late === null) {
        late = land.promise.then(() => A.objects.inner.putIfAbsent(key, ''));
        throw new UnavailableError('injected: timed out, lands later');
      }
    };
    await A.log.append([batch('x', 0)]); // g1; g2 is made ahead after this commit (5 - 4 = 1)
    await vi.waitFor(() => expect(late, 'the made-ahead marker was sent').not.toBeNull(), { timeout: 10_000, interval: 5 });
    // Between commits, the writer merges g1 and gives the made-ahead g2 up (its marker not there yet).
    if (how === 'mergeOwnShard') {
      expect((await A.log.mergeOwnShard()).shards).toEqual(['s00-e000001-g000001']);
    } else {
      s.clock.advance(20);
      await vi.waitFor(async () => expect(await A.objects.inner.get(`${META_DIR}/gen.s00-e000001-g000001`)).toBeNull(), { timeout: 10_000, interval: 20 });
    }
    await A.log.idle();
    land.resolve();
    expect(await late, 'the late marker landed').toBe(true);
    const live = () => withFreshReader(s.root, s.leases, s.clock, async (r) => (await r.stats()).shards.filter((g) => !g.retired).map((g) => g.name));
    expect(await live(), 'g2 is listed live (empty)').toContain(AHEAD);
    // The writer goes on writing, with merge rounds (the ones retireGivenUp looks in).
    for (let i = 1; i <= 3; i++) {
      await A.log.append([batch('x', i)]);
      await A.log.mergeOwnShard();
      await A.log.idle();
    }
    expect(await A.objects.inner.get(`${META_DIR}/gen.${AHEAD}`), 'g2 retired by a merge round once its marker was there').toBeNull();
    expect(await live(), 'nothing of the writer live after its merge').toEqual([]);
  });
});

// mergeOwnShard() (and the idle merge) retired the made-ahead generation without confirming the
// epoch is current (giveUpAhead -> retireUnused), unlike retireGivenUp, which checks first because
// a retirement under the maintainer's merge of a sealed epoch failed that merge. A writer frozen
// past its lease: a takeover sealed its epoch (the made-ahead generation listed, empty), the
// maintainer merges it; the zombie's mergeOwnShard() (no generation frozen, so no merge that would
// find the seal) deleted it under that merge.
describe('a zombie giving its made-ahead generation up', () => {
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
