/**
 * The idle merge (lib/log/write/own-merges.ts armIdleMerge): a writer idle for `mergeIdleMs`
 * merges its own generations.
 *
 *  1. It never holds an append that arrives while it runs (it ran as an exclusive job once, so the
 *     append waited for the whole merge: base commit, fsync, retirement). The merges by commits /
 *     bytes run in the background and never hold an append (the control below).
 *  2. A failed idle merge is tried again while the writer stays idle (the timer was once not armed
 *     again, and the generation stayed live until the next commit or close()).
 *  3. mergeIdleMs beyond a timer's range (Infinity, or more than 2^31-1 ms) is refused by openLog
 *     (InvalidInputError): Node runs such a timer after 1 ms, and armIdleMerge re-armed it: a timer
 *     firing every millisecond for as long as the log is open.
 *  4. On hosts that freeze a process between requests the idle merge is off by default: a merge
 *     started after the request returned may stall mid-way (deletion.md).
 *  5. After the writer's clock stepped back, the timer does not re-arm itself every millisecond.
 */
import { describe, expect, it, vi } from 'vitest';
import type { CheckpointLog } from '../lib/api.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { DEFAULTS, freezingHost, InvalidInputError, openLog } from '../lib/index.ts';
import { type OpenTestLog, Pause, raceFixture, settle, tempRoot } from './support/race-kit.ts';

const { setup } = raceFixture(60_000);

async function live(log: CheckpointLog): Promise<number> {
  const s = await log.stats();
  return s.shards.filter((g) => !g.retired).reduce((n, g) => n + g.rows, 0);
}

/** Whether `p` settles within `ms` of real time. */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const r = await Promise.race([p.then(() => true, () => true), new Promise<boolean>((res) => (timer = setTimeout(() => res(false), ms)))]);
  clearTimeout(timer);
  return r;
}

/** A writer on slot 0 of 1 whose next merge, once armed, holds at its base commit. */
function heldAtBaseCommit(open: OpenTestLog, o: { mergeEveryCommits: number; mergeIdleMs: number }) {
  const pause = new Pause();
  let armed = false;
  const W = open({
    slot: 0,
    slots: 1,
    ...o,
    hooks: {
      async beforeMergeStep(step) {
        if (armed && step === 'base-commit') {
          armed = false;
          await pause.hit();
        }
      },
    },
  });
  return { W, pause, arm: () => void (armed = true) };
}

describe('the idle merge', () => {
  it('control: an append is not held by the automatic (commit-count) merge while its base commit is held', async () => {
    const { open } = setup();
    const { W, pause, arm } = heldAtBaseCommit(open, { mergeEveryCommits: 1, mergeIdleMs: 0 });
    await W.log.append([createBatch('a')]);
    await W.log.idle();
    arm();
    await W.log.append([stepBatch('a', 1)]); // rotates; its merge starts in the background
    await pause.reached.promise;
    const next = settle(W.log.append([stepBatch('a', 2)]));
    const early = await settlesWithin(next, 2_000);
    pause.release();
    expect(early, 'the append went on while the background merge was held').toBe(true);
    expect((await next).ok).toBe(true);
  });

  it('an append that arrives while the idle merge runs is not held until the merge ends', async () => {
    const { open, clock } = setup();
    const { W, pause, arm } = heldAtBaseCommit(open, { mergeEveryCommits: 1000, mergeIdleMs: 20 });
    await W.log.append([createBatch('a')]);
    arm();
    clock.advance(20); // idle long enough by the writer's clock: the timer merges
    await pause.reached.promise; // the idle merge is at its base commit
    const next = settle(W.log.append([stepBatch('a', 1)]));
    const early = await settlesWithin(next, 2_000);
    pause.release();
    expect((await next).ok).toBe(true);
    expect(early, 'the append waited for the idle merge (its base commit, fsync and retirement)').toBe(true);
  });

  it('a failed idle merge is tried again while the writer stays idle', async () => {
    const { open, clock } = setup();
    let failures = 0;
    const W = open({
      slot: 0,
      slots: 1,
      mergeEveryCommits: 1000,
      mergeIdleMs: 20,
      hooks: {
        beforeMergeStep(step) {
          if (step === 'base-commit' && failures === 0) {
            failures++;
            throw new Error('injected: storage trouble at the idle merge');
          }
        },
      },
    });
    const [ack] = await W.log.append([createBatch('a')]);
    clock.advance(20);
    await vi.waitFor(() => expect(failures).toBe(1), { timeout: 5_000, interval: 10 });
    // Idle much longer, by the writer's clock and in real time: nothing is committed meanwhile.
    for (let i = 0; i < 10; i++) {
      clock.advance(1_000);
      await new Promise((r) => setTimeout(r, 50));
    }
    await W.log.idle();
    expect(await live(W.log), 'rows left in live generations after a long idle period').toBe(0);
    expect(failures, 'the retry went through').toBe(1);
    expect((await W.log.fold('a')).lastSeq, 'the acked batch, from the base').toBe(ack!.lastSeq);
  });

  it('mergeIdleMs (and the other merge bounds) out of range is refused as bad input, before anything is opened', async () => {
    const root = tempRoot();
    for (const [field, bad] of [['mergeIdleMs', Number.POSITIVE_INFINITY], ['mergeIdleMs', 2 ** 31], ['mergeIdleMs', -1], ['mergeIdleMs', Number.NaN], ['mergeEveryBytes', 0], ['mergeEveryCommits', 1.5]] as const) {
      const e = await openLog({ root, pipeline: 'p', experiment: 'e', [field]: bad }).then(() => null, (x: unknown) => x);
      expect(e, `${field}: ${bad}`).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).field).toBe(field);
    }
    expect(existsSync(path.join(root, 'datagen_checkpoints')), 'nothing written').toBe(false);
  });

  it('is off by default on hosts that freeze processes between requests', async () => {
    expect(freezingHost({})).toBe(false);
    for (const k of ['AWS_LAMBDA_FUNCTION_NAME', 'VERCEL', 'FUNCTIONS_WORKER_RUNTIME', 'FUNCTION_TARGET', 'K_SERVICE']) expect(freezingHost({ [k]: 'x' }), k).toBe(true);
    const root = tempRoot();
    const opts = async (env: Record<string, string>, o: { mergeIdleMs?: number } = {}) => {
      const log = await openLog({ root, pipeline: 'p', experiment: 'e', env, ...o });
      const v = (log as unknown as { o: { mergeIdleMs: number } }).o.mergeIdleMs;
      await log.close();
      return v;
    };
    expect(await opts({})).toBe(DEFAULTS.mergeIdleMs);
    expect(await opts({ AWS_LAMBDA_FUNCTION_NAME: 'f' })).toBe(0);
    expect(await opts({ AWS_LAMBDA_FUNCTION_NAME: 'f' }, { mergeIdleMs: 5000 }), 'asked for explicitly').toBe(5000);
  });
});

// With the clock behind the last commit's time the time idle is negative, and the next look was
// `wait` minus it: past 2^31-1 ms Node runs a timer after 1 ms (with a TimeoutOverflowWarning each
// time), so it fired every millisecond until the clock passed the last commit again (a smaller
// step postponed the idle merge by the step). Fixed: the next look is at most `wait` away.
describe('the idle merge after the writer\'s clock stepped back', () => {
  it('its timer does not re-arm itself every millisecond, and the merge runs once the clock catches up', async () => {
    const { open, clock } = setup();
    let overflows = 0;
    const onWarning = (w: Error) => void (w.name === 'TimeoutOverflowWarning' && overflows++);
    process.on('warning', onWarning);
    try {
      const W = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, mergeIdleMs: 20 });
      await W.log.append([createBatch('a')]);
      clock.advance(-(2 ** 31));
      // Not a race: the broken timer warned every millisecond, hundreds of times in this wait.
      await new Promise((r) => setTimeout(r, 300));
      expect(overflows, 'timers beyond the range Node holds').toBe(0);
      clock.advance(2 ** 31 + 20); // the clock catches up: the idle merge runs
      await expect.poll(async () => (await W.log.stats()).shards.filter((s) => !s.retired && s.rows > 0).length, { timeout: 10_000 }).toBe(0);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
