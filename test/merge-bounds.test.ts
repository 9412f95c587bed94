/**
 * What a writer leaves unmerged is bounded by commits (`mergeEveryCommits`), by size
 * (`mergeEveryBytes`, the commits' rows as encoded for them) and by age (`mergeIdleMs` without a
 * commit): every read, in every process, pays for each live generation. Real Lance datasets and
 * the local lease store.
 */
import { describe, expect, it, vi } from 'vitest';
import type { CheckpointLog } from '../lib/api.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { raceFixture, withFreshReader } from './support/race-kit.ts';

const { setup } = raceFixture(60_000);

/** Rows in W's live (unretired) generations, and in the base. */
async function where(log: CheckpointLog): Promise<{ live: number; base: number }> {
  const s = await log.stats();
  return { live: s.shards.filter((g) => !g.retired).reduce((n, g) => n + g.rows, 0), base: s.base.rows };
}

async function appendSome(log: CheckpointLog, items: readonly string[]): Promise<number> {
  let rows = 0;
  for (const id of items) rows += (await log.append([createBatch(id)]))[0]!.lastSeq;
  for (const id of items) {
    const [ack] = await log.append([stepBatch(id, 1)]);
    rows += ack!.lastSeq - ack!.firstSeq + 1;
  }
  return rows;
}

describe('what a writer leaves unmerged', () => {
  it('is merged once its commits reach mergeEveryBytes, and not before', async () => {
    const { open } = setup();
    const small = open({ slot: 0, slots: 2, mergeEveryCommits: 1000, mergeEveryBytes: 1, mergeIdleMs: 0 });
    const rows = await appendSome(small.log, ['a', 'b']);
    await small.log.idle();
    expect(await where(small.log), 'every commit passed the bound: all merged').toEqual({ live: 0, base: rows });
    const big = open({ slot: 1, slots: 2, mergeEveryCommits: 1000, mergeEveryBytes: 2 ** 30, mergeIdleMs: 0 });
    const more = await appendSome(big.log, ['c', 'd']);
    await big.log.idle();
    expect(await where(big.log), 'under the bound: one live generation').toEqual({ live: more, base: rows });
  });

  it('is merged once mergeIdleMs passed without a commit (by the writer clock), and later commits go on', async () => {
    const { open, root, leases, clock } = setup();
    const W = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, mergeIdleMs: 20 });
    const rows = await appendSome(W.log, ['a', 'b']);
    // The timer fires on real time (20 ms), but asks the writer's clock, which stands still
    // here: after several of its periods no merge may have started (one that had would be
    // awaited by idle() and show below).
    await new Promise((r) => setTimeout(r, 100));
    await W.log.idle();
    expect(await where(W.log), 'the clock did not move: still live').toEqual({ live: rows, base: 0 });
    clock.advance(20);
    await vi.waitFor(async () => expect(await where(W.log)).toEqual({ live: 0, base: rows }), { timeout: 10_000, interval: 20 });
    const [ack] = await W.log.append([stepBatch('a', 2)]);
    const fresh = await withFreshReader(root, leases, clock, async (r) => ({ a: await r.fold('a'), b: await r.fold('b') }));
    expect(fresh.a.lastSeq).toBe(ack!.lastSeq);
    expect({ a: await W.log.fold('a'), b: await W.log.fold('b') }).toEqual(fresh);
    expect((await where(W.log)).live, 'the new commit went to a new generation').toBe(ack!.lastSeq - ack!.firstSeq + 1);
  });

  it.each(['idle', 'mergeOwnShard'] as const)('leaves no live generation once merged (%s), also none made ahead that no commit took', async (how) => {
    const { open, root, leases, clock } = setup();
    // The next generation is made 4 commits before the rotation: here after the 4th of 8.
    const W = open({ slot: 0, slots: 1, mergeEveryCommits: 8, mergeIdleMs: how === 'idle' ? 20 : 0 });
    const rows = await appendSome(W.log, ['a', 'b', 'c']);
    await W.log.idle();
    const live = async () => (await W.log.stats()).shards.filter((g) => !g.retired).map((g) => ({ name: g.name, rows: g.rows }));
    const before = await live();
    expect(before.map((g) => g.rows), 'the generation written, and the one made ahead').toEqual([rows, 0]);
    if (how === 'idle') {
      clock.advance(20);
      await vi.waitFor(async () => expect(await where(W.log)).toEqual({ live: 0, base: rows }), { timeout: 10_000, interval: 20 });
      await W.log.idle();
    } else {
      expect((await W.log.mergeOwnShard()).mergedRows).toBe(rows);
    }
    expect(await live(), 'nothing live: the made-ahead generation retired too').toEqual([]);
    // The next commit makes a generation of a new name (the retired one's is given up).
    const [ack] = await W.log.append([stepBatch('a', 2)]);
    const after = await live();
    expect(after.map((g) => g.rows)).toEqual([ack!.lastSeq - ack!.firstSeq + 1]);
    expect(before.map((g) => g.name)).not.toContain(after[0]!.name);
    const fresh = await withFreshReader(root, leases, clock, async (r) => ({ a: await r.fold('a'), c: await r.fold('c') }));
    expect(fresh.a.lastSeq).toBe(ack!.lastSeq);
    expect({ a: await W.log.fold('a'), c: await W.log.fold('c') }).toEqual(fresh);
    await W.log.close();
    const left = await withFreshReader(root, leases, clock, async (r) => (await r.stats()).shards.filter((g) => !g.retired));
    expect(left).toEqual([]);
  });
});
