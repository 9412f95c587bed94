/**
 * The reader's tail cache (lib/log/read/tail-cache.ts): a process listing a live log again reads only
 * the rows committed since. On real Lance: a long-lived reader lists while two writers keep
 * appending, a generation is merged and retired, and a takeover seals one; each time its listing
 * equals a fresh reader's, and the rows it takes are only the new ones.
 */
import { describe, expect, it } from 'vitest';
import { summarize } from '../lib/fold.ts';
import type { LanceCheckpointLog } from '../lib/log/log.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { raceFixture } from './support/race-kit.ts';

const TTL = 10_000;
const { setup } = raceFixture(TTL);

describe('the tail cache', () => {
  it('a long-lived reader lists what a fresh one lists, taking only rows committed since', async () => {
    const { open, clock } = setup();
    const A = open({ slot: 0, slots: 2, owner: 'a' });
    const B = open({ slot: 1, slots: 2, owner: 'b' });
    // The reader's shard takes, by offset count, to see what it reads again.
    const taken: number[] = [];
    const R = open({ slot: 0, slots: 2, owner: 'reader', tableTap: { take: (name, n) => name !== 'base' && taken.push(n) } });
    const sum = () => taken.splice(0).reduce((a, b) => a + b, 0);
    const fresh = async (label: string): Promise<void> => {
      const F = open({ slot: 0, slots: 2, owner: `fresh-${label}` });
      const want = (await F.log.allStates({ fields: false })).map(summarize);
      expect((await R.log.items()).items, label).toEqual(want);
      expect((await F.log.items()).items, `${label} (fresh reader)`).toEqual(want);
    };
    await A.log.append([createBatch('a1'), createBatch('a2')]);
    await B.log.append([createBatch('b1')]);
    await fresh('first');
    expect(sum(), 'the first listing takes both generations whole').toBe(await shardRows(A.log));
    await fresh('nothing new');
    expect(sum(), 'no shard row taken again').toBe(0);

    const before = await shardRows(A.log);
    await A.log.append([stepBatch('a1', 1)]);
    const added = (await shardRows(A.log)) - before;
    expect(added).toBeGreaterThan(1);
    await fresh('A appended');
    expect(sum(), 'only the rows committed since').toBe(added);

    // A merges (its generation retired and deleted), B keeps writing.
    await A.log.mergeOwnShard();
    await B.log.append([stepBatch('b1', 1), createBatch('b2')]);
    await fresh('A merged, B appended');

    // B dies; a takeover seals its epoch; the reader lists at the sealed version.
    clock.advance(TTL + 1);
    const B2 = open({ slot: 1, slots: 2, owner: 'b2' });
    await B2.log.append([stepBatch('b2', 1)]);
    await fresh('B taken over');
    await B2.log.mergeOwnShard();
    await fresh('all merged');
  });
});

/** Rows of every visible unmerged generation. */
async function shardRows(log: LanceCheckpointLog): Promise<number> {
  return (await log.stats()).shards.filter((s) => !s.retired).reduce((n, s) => n + s.rows, 0);
}
