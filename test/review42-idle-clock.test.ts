/**
 * review42 F2: the idle merge's timer after the writer's clock stepped back (lib/log/write/own-merges.ts
 * armIdleMerge). With the clock behind the last commit's time the time idle is negative, and the
 * next look was `wait` minus it: past 2^31-1 ms Node runs a timer after 1 ms (with a
 * TimeoutOverflowWarning each time), so it fired every millisecond until the clock passed the
 * last commit again (a smaller step postponed the idle merge by the step). Fixed: the next look
 * is at most `wait` away.
 */
import { describe, expect, it } from 'vitest';
import { createBatch } from './support/batches.ts';
import { raceFixture } from './support/race-kit.ts';

const { setup } = raceFixture(60_000);

describe('review42 F2: the idle timer after the clock stepped back', () => {
  it('does not re-arm itself every millisecond', async () => {
    const { open, clock } = setup();
    let overflows = 0;
    const onWarning = (w: Error) => void (w.name === 'TimeoutOverflowWarning' && overflows++);
    process.on('warning', onWarning);
    try {
      const W = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, mergeIdleMs: 20 });
      await W.log.append([createBatch('a')]);
      clock.advance(-(2 ** 31));
      await new Promise((r) => setTimeout(r, 300));
      expect(overflows, 'timers beyond the range Node holds').toBe(0);
      clock.advance(2 ** 31 + 20); // the clock catches up: the idle merge runs
      await expect.poll(async () => (await W.log.stats()).shards.filter((s) => !s.retired && s.rows > 0).length, { timeout: 10_000 }).toBe(0);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
