/**
 * A writer commits to its own generations through a handle without read consistency (no version
 * check per commit). Lance serves such a handle's reads the dataset it last committed or opened:
 * during an add, possibly the one before a commit that is already in storage. Reads in the
 * writer's process must not go through it (lib/log/tables.ts `createShard`): a read that starts
 * after another process's read showed the commit must show it too (I3).
 *
 * The window is emulated: the writer's add is replaced by the same commit through another
 * connection, so storage has it and the writer's handle does not, as during a real add.
 */
import * as lancedb from '@lancedb/lancedb';
import { describe, expect, it } from 'vitest';
import { SHARDS_DIR } from '../lib/log/layout.ts';
import { logUri, parseRoot } from '../lib/storage/location.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { EXPERIMENT, PIPELINE, raceFixture, withFreshReader } from './support/race-kit.ts';

const { setup } = raceFixture(60_000);

describe("reads in a writer's process of its own generation", () => {
  it('show a commit that is in storage before the writing handle knows it', async () => {
    const { open, root, leases, clock } = setup();
    const shards = `${logUri(parseRoot(root), PIPELINE, EXPERIMENT)}/${SHARDS_DIR}`;
    let seen: { other: unknown; mine: unknown; mineAll: unknown; otherAll: unknown } | null = null;
    let armed = false;
    // Another writer makes the log first: a process whose first listing shows no log id drops
    // every handle when the id appears, the writer's own with them.
    await open({ slot: 1, slots: 2 }).log.append([createBatch('z')]);
    const W = open({
      slot: 0,
      slots: 2,
      mergeEveryCommits: 1000,
      tableTap: {
        async add(name, run, data) {
          if (!armed) return run();
          armed = false;
          const conn = await lancedb.connect(shards, { readConsistencyInterval: 0 });
          await (await conn.openTable(name)).add(data as never);
          // The commit is in storage; the writer's handle still has the dataset before it.
          const other = await withFreshReader(root, leases, clock, async (r) => ({ fold: await r.fold('x'), all: await r.allStates() }));
          seen = { other: other.fold, otherAll: other.all, mine: await W.log.fold('x'), mineAll: await W.log.allStates() };
          return undefined;
        },
      },
    });
    await W.log.append([createBatch('x'), createBatch('y')]);
    const [before] = await W.log.append([stepBatch('x', 1)]);
    expect((await W.log.fold('x')).lastSeq, "W's reader has read its generation once").toBe(before!.lastSeq);
    armed = true;
    const [ack] = await W.log.append([stepBatch('x', 2)]);
    expect(seen, "the emulated add ran").not.toBeNull();
    const { other, mine, mineAll, otherAll } = seen!;
    expect((other as { lastSeq: number }).lastSeq, "another process's read shows the landed commit").toBe(ack!.lastSeq);
    expect(mine, "the writer's point read of the landing item, begun after it").toEqual(other);
    expect(mineAll, "the writer's whole-log read, begun after it").toEqual(otherAll);
    // Confirmed: from the writer's memory now, the same.
    expect(await W.log.fold('x')).toEqual(other);
  });
});
