/**
 * Whole-log passes free each record batch's buffer once its visitor returns (lib/log/read/release.ts),
 * instead of leaving it for V8's next collection: dead Arrow buffers piled up to ~80 MB of
 * items()'s peak at 10^6 events. On real Lance: base rows, an unmerged shard (whose ids are also
 * looked up in the base), and the values visitors copied out must survive the release.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as arrow from 'apache-arrow';
import { expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { releaseBatch } from '../lib/log/read/release.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { readsOf } from '../lib/log/reads.ts';

it('a scan detaches every base batch it handed to the visitor and keeps the shard rows cached for the next scan; what the visitor copied out is intact', async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-release-'));
  const log = await openLog({ root, pipeline: 'p', experiment: 'e', mergeEveryCommits: 1000 });
  for (let i = 0; i < 3; i++) await log.append([createBatch(`m${i}`), stepBatch(`m${i}`, 1)]);
  await log.mergeOwnShard();
  await log.append([createBatch('unmerged')]);
  expect((await log.stats()).shards, 'one unmerged shard: the scan reads base and shard').toHaveLength(1);

  const held: arrow.RecordBatch[] = [];
  const ids = await readsOf(log).scanEvents({ columns: ['event_id'], keepTail: true }, () => {
    const out: string[] = [];
    return {
      batch(b, keep) {
        held.push(b); // kept on purpose, to look at its buffers after the scan
        const col = b.getChild('event_id')!;
        for (let r = 0; r < b.numRows; r++) if (keep(r)) out.push(String(col.get(r)));
      },
      done: () => out,
    };
  });

  const want: string[] = [];
  for (const s of await log.allStates({ fields: false })) for (const t of await log.trajectory(s.itemId)) want.push(t.eventId);
  expect(ids.sort(), 'the ids copied out during the scan').toEqual(want.sort());
  // One batch from the shard (the unmerged item's events), one from the base (the rest).
  const tail = (await log.trajectory('unmerged')).length;
  expect(held.map((b) => b.numRows).sort((a, b) => a - b)).toEqual([tail, want.length - tail].sort((a, b) => a - b));
  // The base's batches hold only the asked-for columns; the tail's also what picks one copy, and
  // the item (each item's rows are taken at one moment).
  const columnsOf = (rows: number) => held.find((b) => b.numRows === rows)!.schema.fields.map((f) => f.name).sort();
  expect(columnsOf(want.length - tail), 'base batch columns').toEqual(['event_id']);
  expect(columnsOf(tail), 'shard batch columns').toEqual(['event_id', 'item_id', 'item_seq']);
  const baseBatch = held.find((b) => b.numRows === want.length - tail)!;
  const shardBatch = held.find((b) => b.numRows === tail)!;
  const sizes = (b: arrow.RecordBatch) => {
    const d = b.getChild('event_id')!.data[0]!;
    return [d.values.byteLength, d.valueOffsets.byteLength];
  };
  expect(sizes(baseBatch), 'the base batch is released: its buffer is detached').toEqual([0, 0]);
  // The shard's rows are the reader's tail cache (lib/log/read/tail-cache.ts): kept whole for the
  // next scan, which reads no row of it again.
  expect(sizes(shardBatch).every((n) => n > 0), 'the cached shard batch is not released').toBe(true);
  const again: arrow.RecordBatch[] = [];
  const ids2 = await readsOf(log).scanEvents({ columns: ['event_id'], keepTail: true }, () => ({
    batch(b, keep) {
      again.push(b);
      for (let r = 0; r < b.numRows; r++) if (keep(r)) ids.push(String(b.getChild('event_id')!.get(r)));
    },
    done: () => ids.length,
  }));
  expect(ids2, 'the second scan sees every event again').toBe(want.length * 2);
  expect(again.filter((b) => b === shardBatch), 'the same cached batch, not a new read').toHaveLength(1);
  // A one-off pass (no keepTail: exports, reports) keeps nothing: its shard batch is released too.
  const once: arrow.RecordBatch[] = [];
  await readsOf(log).scanEvents({ columns: ['event_id'] }, () => ({ batch: (b) => void once.push(b), done: () => null }));
  const onceShard = once.filter((b) => b.numRows === tail && b !== shardBatch);
  expect(onceShard, 'its own shard batch').toHaveLength(1);
  expect(sizes(onceShard[0]!), 'released').toEqual([0, 0]);
  await log.close();
});

it('releaseBatch detaches an Arrow batch at once, is a no-op the second time, and leaves undetachable buffers alone', () => {
  const batch = (data: Int32Array) => new arrow.RecordBatch({ x: arrow.makeData({ type: new arrow.Int32(), data }) });
  const own = batch(Int32Array.of(1, 2, 3));
  const buffer = own.getChild('x')!.data[0]!.values.buffer;
  releaseBatch(own);
  expect(buffer.byteLength).toBe(0);
  expect(() => releaseBatch(own)).not.toThrow();

  // A WebAssembly memory's buffer cannot be detached: it stays as it was, nothing throws.
  const memory = new WebAssembly.Memory({ initial: 1 });
  const pinned = batch(new Int32Array(memory.buffer, 0, 3));
  pinned.getChild('x')!.data[0]!.values.set([7, 8, 9]);
  expect(() => releaseBatch(pinned)).not.toThrow();
  expect(memory.buffer.byteLength).toBe(65536);
  expect([...pinned.getChild('x')!.toArray()]).toEqual([7, 8, 9]);
});
