/**
 * A writer merges its own generations from the rows it committed (its merge copy), without
 * reading them back from the shard (lib/log/writer.ts, "merge copies"); a generation whose
 * copy would exceed MERGE_COPY_MAX_BYTES is read back. Either way the base ends up with every
 * row whole: fields and blob bytes as committed.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { MergeStep } from '../lib/log/merge.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { raceFixture, withFreshReader } from './support/race-kit.ts';

const { setup } = raceFixture(60_000);

/** Reads of shard generations made inside a merge's read step (between 'read' and 'base-commit'). */
function mergeReadCounter() {
  let inRead = false;
  const counts = { merges: 0, shardReads: 0 };
  return {
    counts,
    hooks: {
      beforeMergeStep(step: MergeStep): void {
        if (step === 'read') counts.merges++;
        inRead = step === 'read';
      },
    },
    tableTap: {
      beforeRead(name: string): void {
        if (inRead && name !== 'base') counts.shardReads++;
      },
    },
  };
}

describe('merge copies', () => {
  it('merges its own generations from the rows it committed: no read of the shard, every row whole in the base', async () => {
    const { root, clock, leases, open } = setup();
    const c = mergeReadCounter();
    const { log } = open({ mergeEveryCommits: 3, hooks: c.hooks, tableTap: c.tableTap });
    const blobs = new Map<string, Buffer>();
    const lastSeqs = new Map<string, number>();
    for (let i = 0; i < 8; i++) {
      const blob = randomBytes(1000 + i);
      blobs.set(`i${i}`, blob);
      await log.append([createBatch(`i${i}`, { set: { prompt: `about i${i}`, image: { $blob: blob.toString('base64') } } })]);
      const [ack] = await log.append([stepBatch(`i${i}`, 1)]);
      lastSeqs.set(`i${i}`, ack!.lastSeq);
    }
    const merged = await log.mergeOwnShard();
    // 16 commits, 3 per generation: five merged in the background or here, the sixth here.
    expect(c.counts.merges).toBe(6);
    expect(merged.shards.length).toBeGreaterThanOrEqual(1);
    expect(c.counts.shardReads).toBe(0);

    await withFreshReader(root, leases, clock, async (reader) => {
      expect((await reader.stats()).shards).toEqual([]); // everything is in the base now
      for (const [id, blob] of blobs) {
        const st = await reader.fold(id);
        expect(st.lastSeq).toBe(lastSeqs.get(id));
        expect(st.fields.prompt).toBe(`about ${id}`);
        expect(st.fields.out1).toBe(`result 1 of ${id}`);
        expect(Buffer.from(await reader.blob(id, 'image')).equals(blob)).toBe(true);
      }
    });
  });

  it('reads back a generation whose copy would exceed the cap, and merges it whole', async () => {
    const { root, clock, leases, open } = setup();
    const c = mergeReadCounter();
    const { log } = open({ mergeEveryCommits: 1_000, hooks: c.hooks, tableTap: c.tableTap });
    // Two 20 MB blobs in one generation: 40 MB of encoded rows, over the 32 MiB cap.
    const big = [randomBytes(20 * 1024 * 1024), randomBytes(20 * 1024 * 1024)];
    for (let i = 0; i < 2; i++) await log.append([createBatch(`big${i}`, { set: { image: { $blob: big[i]!.toString('base64') } } })]);
    await log.mergeOwnShard();
    expect(c.counts.merges).toBe(1);
    expect(c.counts.shardReads).toBe(1);
    await withFreshReader(root, leases, clock, async (reader) => {
      expect((await reader.stats()).shards).toEqual([]);
      for (let i = 0; i < 2; i++) expect(Buffer.from(await reader.blob(`big${i}`, 'image')).equals(big[i]!)).toBe(true);
    });
  });
});
