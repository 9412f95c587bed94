/**
 * The writer's test hooks report where a commit goes: the simulation's steering (test/sim/steer.ts)
 * stalls a commit only into a generation readers can already list.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { createBatch, stepBatch } from './support/batches.ts';

const root = mkdtempSync(path.join(tmpdir(), 'dgcl-writer-hooks-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('writer hooks', () => {
  it("beforeCommit names the commit's generation once it exists (null before the epoch's first commit makes it) and the commit's writer epoch", async () => {
    const calls: Array<{ ids: readonly string[]; shard: string | null; epoch: string }> = [];
    const log = await openLog({ root, pipeline: 'p', experiment: 'e', hooks: { beforeCommit: (ids, shard, epoch) => void calls.push({ ids: [...ids], shard, epoch }) } });
    try {
      await log.append([createBatch('a')]);
      await log.append([stepBatch('a', 1), createBatch('b')]);
      expect(calls).toEqual([
        { ids: ['a'], shard: null, epoch: log.writerEpoch },
        { ids: ['a', 'b'], shard: `${log.writerEpoch}-g000001`, epoch: log.writerEpoch },
      ]);
    } finally {
      await log.close();
    }
  });
});
