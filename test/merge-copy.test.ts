/**
 * A writer merges its own generations from the bytes it committed (its merge copy), without
 * reading them back from the shard (lib/log/write/own-memory.ts, "merge copies"); a generation whose
 * copy would take the copies past twice `mergeEveryBytes` is read back. Either way the base ends up with every
 * row whole: fields and blob bytes as committed. The next generation is made a few commits before
 * the rotation, so its first commit does not wait for it; close() retires it if it was never used.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { fastMergeCount } from '../lib/log/write/lance-add.ts';
import type { MergeStep } from '../lib/log/maintain/merge.ts';
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
    const { log } = open({ slot: 0, mergeEveryCommits: 3, hooks: c.hooks, tableTap: c.tableTap });
    const blobs = new Map<string, Buffer>();
    const fastBefore = fastMergeCount.n;
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
    expect(fastMergeCount.n - fastBefore, 'each merge handed its bytes to Lance as they were').toBe(6);

    // Nothing of the writer is live: the generation it made ahead for its next commit is retired too.
    const left = async () => withFreshReader(root, leases, clock, async (reader) => (await reader.stats()).shards.filter((s) => !s.retired).map((s) => ({ name: s.name, rows: s.rows })));
    expect(await left()).toEqual([]);
    await log.close();
    expect(await left()).toEqual([]);
    await withFreshReader(root, leases, clock, async (reader) => {
      for (const [id, blob] of blobs) {
        const st = await reader.fold(id);
        expect(st.lastSeq).toBe(lastSeqs.get(id));
        expect(st.fields.prompt).toBe(`about ${id}`);
        expect(st.fields.out1).toBe(`result 1 of ${id}`);
        expect(Buffer.from(await reader.blob(id, 'image')).equals(blob)).toBe(true);
      }
    });
  });

  it('makes the next generation ahead of the rotation, and its first commit does not make it again', async () => {
    const { open } = setup();
    const { log, objects } = open({ slot: 0, mergeEveryCommits: 8 });
    const madeDuring: Array<{ key: string; append: number }> = [];
    let append = 0;
    objects.tap = { after: (op, key) => void (op === 'putIfAbsent' && key.includes('/gen.') && madeDuring.push({ key, append })) };
    const next = async (i: number) => {
      append = i;
      return log.append([createBatch(`a${i}`)]);
    };
    for (let i = 1; i <= 4; i++) await next(i); // the 4th commit is 4 before the rotation at 8
    append = 0; // between appends
    await vi.waitFor(() => expect(madeDuring.map((m) => m.key)).toEqual([expect.stringMatching(/g000001$/), expect.stringMatching(/g000002$/)]), { timeout: 10_000 });
    let last: Awaited<ReturnType<typeof next>> = [];
    for (let i = 5; i <= 9; i++) last = await next(i); // 9: the first commit of generation 2
    expect(madeDuring).toHaveLength(2);
    const g2 = (await log.stats()).shards.find((s) => s.name.endsWith('g000002'));
    expect(g2?.rows).toBe(last[0]!.eventIds.length);
  });

  it('reads back a generation whose copy would exceed the cap, and merges it whole', async () => {
    const { root, clock, leases, open } = setup();
    const c = mergeReadCounter();
    const { log } = open({ mergeEveryCommits: 1_000, mergeEveryBytes: 4 * 1024 * 1024, hooks: c.hooks, tableTap: c.tableTap });
    // Two 5 MiB blobs in one commit: 10 MiB of encoded rows, over the 8 MiB cap (twice
    // mergeEveryBytes), which the commit also passes: the generation is merged after it.
    const big = [randomBytes(5 * 1024 * 1024), randomBytes(5 * 1024 * 1024)];
    await log.append([createBatch('big', { set: { image0: { $blob: big[0]!.toString('base64') }, image1: { $blob: big[1]!.toString('base64') } } })]);
    await log.idle();
    expect(c.counts.merges).toBe(1);
    expect(c.counts.shardReads).toBe(1);
    await withFreshReader(root, leases, clock, async (reader) => {
      expect((await reader.stats()).shards.filter((s) => s.rows > 0)).toEqual([]);
      for (let i = 0; i < 2; i++) expect(Buffer.from(await reader.blob('big', `image${i}`)).equals(big[i]!)).toBe(true);
    });
  });
});

// A merge copy's first commits are kept as the committed row objects (lib/log/write/own-memory.ts
// keepCopy, COPY_ROWS_MAX_BYTES) and encoded again at the merge (lib/log/write/lance-add.ts
// mergeData). A blob given as a Uint8Array (docs/api.md) was kept in the row by reference
// (lib/codec.ts): a caller that reused its buffer after the ack changed what the writer's merge put
// in the base, and the acked blob read as CORRUPT (its checksum is of the committed bytes; I1).
// Commits kept as tables were not affected (encoded at the commit). Fixed: codec.ts copies a
// Uint8Array blob before its checksum.
describe('merge copies: a Uint8Array blob reused by the caller after its ack', () => {
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

describe('the merge passes the shard\'s Arrow data through', () => {
  it('every event reads the same from the shard and from the base after the merge (several record batches, all-null columns)', async () => {
    const { open } = setup();
    const W = open({ slot: 0, slots: 1, mergeEveryCommits: 1_000_000 });
    const out: Record<string, unknown>[] = [];
    for (let i = 0; i < 6_000; i++) {
      // The first rows carry no bool (value_bool null in whole record batches), later ones do.
      const set = i < 4_500 ? { s: `v${i}`, n: -i } : { t: i % 2 === 0, blob: { $blob: Buffer.from([i & 255, 0]).toString('base64') } };
      out.push(createBatch(`it${String(i).padStart(5, '0')}`, { set, ...(i % 7 === 0 ? { queryTags: { k: i % 3 } } : {}) }));
    }
    for (let i = 0; i < out.length; i += 2000) await W.log.append(out.slice(i, i + 2000));
    const snapshot = async () => {
      const states = await W.log.allStates();
      const blobs = await Promise.all(['it04500', 'it05999'].map(async (id) => Buffer.from(await W.log.blob(id, 'blob')).toString('hex')));
      return { states, blobs, items: await W.log.items({ tags: { k: 1 } }) };
    };
    const before = await snapshot();
    expect(before.states).toHaveLength(6_000);
    const merged = await W.log.mergeOwnShard();
    expect(merged.mergedRows, 'every event of the shard').toBe(before.states.reduce((n, st) => n + st.lastSeq, 0));
    expect(await snapshot()).toEqual(before);
    expect((await W.log.mergeOwnShard()).mergedRows, 'nothing left to merge').toBe(0);
    expect(await snapshot()).toEqual(before);
  }, 120_000);
});
