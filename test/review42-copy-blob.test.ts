/**
 * review42 F1: a merge copy's first commits are kept as the committed row objects
 * (lib/log/write/own-memory.ts keepCopy, COPY_ROWS_MAX_BYTES) and encoded again at the merge
 * (lib/log/write/lance-add.ts mergeData). A blob given as a Uint8Array (docs/api.md) was kept in the
 * row by reference (lib/codec.ts): a caller that reused its buffer after the ack changed what the
 * writer's merge put in the base, and the acked blob read as CORRUPT (its checksum is of the
 * committed bytes; I1). Commits kept as tables were not affected (encoded at the commit). Fixed:
 * codec.ts copies a Uint8Array blob before its checksum.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createBatch } from './support/batches.ts';
import { raceFixture, withFreshReader } from './support/race-kit.ts';

const { setup } = raceFixture(60_000);

describe('review42 F1: a Uint8Array blob reused after its ack', () => {
  for (const [label, size] of [['kept as rows (small)', 1000], ['kept as a table (over the first MiB)', 2 * 1024 * 1024]] as const) {
    it(`the merged base holds the bytes that were committed and acked: ${label}`, async () => {
      const { root, clock, leases, open } = setup();
      const { log } = open({ slot: 0, mergeEveryCommits: 1000, mergeIdleMs: 0 });
      const buf = new Uint8Array(randomBytes(size));
      const committed = Buffer.from(buf);
      await log.append([createBatch('x', { set: { image: buf } })]);
      buf.fill(9); // the caller reuses its buffer once the append returned
      await log.mergeOwnShard();
      await withFreshReader(root, leases, clock, async (r) => {
        expect((await r.stats()).shards.filter((s) => s.rows > 0), 'merged').toEqual([]);
        expect(Buffer.from(await r.blob('x', 'image')).equals(committed)).toBe(true);
      });
    });
  }
});
