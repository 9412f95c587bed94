/**
 * Review 40 (of the landing mark, review39's fix): probes of the paths where a writer's commit
 * lands but is never kept in memory. Each compares the writer's point reads with a fresh
 * reader's, during and after, and checks the fast path is back once a new epoch commits
 * (the mark is not left set). They passed on the fix as written: kept as regression tests.
 */
import { describe, expect, it } from 'vitest';
import { createBatch, stepBatch } from './support/batches.ts';
import { Pause, raceFixture, settle, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const { setup } = raceFixture(TTL);
const steps = (t: Array<{ stepName?: string | null }>) => t.map((e) => e.stepName);

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(cond()).toBe(true);
}

describe('review40: commits that land and are never kept', () => {
  it('a group of two items whose add lands, then throws: reads equal a fresh reader during and after; the next epoch reads from memory', async () => {
    const { open, root, leases, clock } = setup();
    const names: string[] = [];
    const landed = new Pause();
    let fail = false;
    const W = open({
      slot: 0,
      slots: 1,
      mergeEveryCommits: 1000,
      owner: 'w',
      tableTap: {
        beforeRead: (n) => void names.push(n),
        add: async (_name, run) => {
          const r = await run();
          if (fail) {
            await landed.hit();
            throw new Error('answer lost');
          }
          return r;
        },
      },
    });
    await W.log.append([createBatch('x'), createBatch('y'), createBatch('z')]);
    fail = true;
    const late = settle(W.log.append([stepBatch('x', 1), stepBatch('y', 1)]));
    await landed.reached.promise;
    fail = false;
    const fresh = await withFreshReader(root, leases, clock, async (r) => ({ x: await r.trajectory('x'), y: await r.trajectory('y'), z: await r.fold('z') }));
    expect(steps(fresh.x)).toContain('step1');
    expect(await W.log.trajectory('x')).toEqual(fresh.x);
    expect(await W.log.trajectory('y')).toEqual(fresh.y);
    expect(await W.log.fold('z')).toEqual(fresh.z);
    landed.release();
    expect((await late).ok).toBe(false);
    const after = await withFreshReader(root, leases, clock, async (r) => ({ x: await r.trajectory('x'), y: await r.trajectory('y') }));
    expect(await W.log.trajectory('x')).toEqual(after.x);
    expect(await W.log.trajectory('y')).toEqual(after.y);
    expect(steps(after.x), 'the landed commit stays (sealed in)').toEqual(steps(fresh.x));
    // A new epoch: its generation's reads come from memory again (no landing mark left behind).
    const acks = await W.log.append([stepBatch('x', 2)]);
    const epoch = W.log.writerEpoch!;
    const gen = (await W.log.stats()).shards.map((s) => s.name).find((n) => n.startsWith(`${epoch}-g`));
    names.length = 0;
    const x = await W.log.trajectory('x');
    expect(x.at(-1)!.itemSeq).toBe(acks[0]!.lastSeq);
    expect(x).toEqual(await withFreshReader(root, leases, clock, (r) => r.trajectory('x')));
    expect(gen, 'the new epoch\'s first generation is live').toBe(`${epoch}-g000001`);
    expect(names.filter((n) => n === gen), 'read from memory').toEqual([]);
  });

  it('a background merge drops the slot (fenced, not yet sealed) while a commit is landing: reads equal a fresh reader', async () => {
    const { open, root, leases, clock } = setup();
    const W = open({ slot: 0, slots: 1, mergeEveryCommits: 2, owner: 'w' });
    await W.log.append([createBatch('x')]);
    // The second commit freezes generation 1; its merge reads the seal first: held there.
    const mergeSeal = new Pause();
    let holdSeal = true;
    W.objects.tap.before = async (op, key) => {
      if (op === 'get' && key.includes('/seal.') && holdSeal) {
        holdSeal = false;
        await mergeSeal.hit();
      }
    };
    await W.log.append([stepBatch('x', 1)]);
    await mergeSeal.reached.promise;
    // The next commit (into the made-ahead generation) lands; its epoch check is held.
    const checking = new Pause();
    let checks = 0;
    W.leases.tap.before = async (op) => {
      if (op === 'assertCurrent' && ++checks === 1) await checking.hit();
    };
    const late = settle(W.log.append([stepBatch('x', 2)]));
    await checking.reached.promise;
    // B takes the slot; its fence is held (W's epoch still reads as live at latest).
    clock.advance(2 * TTL);
    const B = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, owner: 'b' });
    const fencing = new Pause();
    B.objects.tap.before = async (op, key) => {
      if (key.includes('/fence.') && (op === 'put' || op === 'putIfAbsent')) await fencing.hit();
    };
    const bAppend = settle(B.log.append([createBatch('y')]));
    await fencing.reached.promise;
    // W's merge goes on: no seal, its epoch check fails (fenced): it drops the slot.
    mergeSeal.release();
    await until(() => W.log.writerEpoch === null);
    const fresh = await withFreshReader(root, leases, clock, (r) => r.trajectory('x'));
    expect(steps(fresh)).toContain('step2');
    expect(await W.log.trajectory('x')).toEqual(fresh);
    expect((await W.log.fold('x')).lastSeq).toBe(fresh.at(-1)!.itemSeq);
    fencing.release();
    expect((await bAppend).ok).toBe(true);
    W.leases.tap.before = undefined;
    checking.release();
    const answer = await late;
    expect(answer.ok ? 'acked' : (answer.error as { code?: string }).code).toBe('FENCED');
    const after = await withFreshReader(root, leases, clock, (r) => r.trajectory('x'));
    expect(steps(after)).toEqual(steps(fresh));
    expect(await W.log.trajectory('x')).toEqual(after);
  });
});
