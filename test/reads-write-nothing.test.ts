/**
 * Reads must not write, and rejected input writes nothing: after an item's writer closed (its
 * shard merged and deleted), folding, listing and a refused append leave the log folder exactly
 * as it was (no `_dgcl/shards/` recreated by a connection, no lease, no marker). A closed log
 * refuses every call.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../lib/errors.ts';
import { openLog } from '../lib/index.ts';
import { tree } from './support/tree.ts';
import { createBatch, stepBatch } from './support/batches.ts';

describe('reads write nothing', () => {
  it('fold, items, stats and a refused append after the writer closed leave the folder unchanged', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-ro-'));
    const w = await openLog({ root, pipeline: 'p', experiment: 'e' });
    await w.append([createBatch('t', { terminal: 'completed' })]);
    await w.close();
    const before = tree(root);
    expect(before.some((l) => l.includes('_dgcl/shards/')), 'the merged shard is gone').toBe(false);

    const r = await openLog({ root, pipeline: 'p', experiment: 'e' });
    expect((await r.fold('t')).status).toBe('completed');
    expect((await r.items()).items.map((i) => i.itemId)).toEqual(['t']);
    await r.stats();
    await expect(r.append([stepBatch('t', 1)])).rejects.toBeInstanceOf(InvalidInputError);
    await expect(r.fold('never-written')).rejects.toThrow(/not found/);
    await r.close();
    expect(tree(root)).toEqual(before);
  });
  it('a closed log refuses reads, appends, deletes and maintenance with a clear error, and writes nothing', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-closed-'));
    const w = await openLog({ root, pipeline: 'p', experiment: 'e' });
    await w.append([createBatch('t', { terminal: 'completed' })]);
    expect((await w.fold('t')).status, 'the check below can fail: it reads while open').toBe('completed');
    await w.close();
    const before = tree(root);
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['fold', () => w.fold('t')],
      ['items', () => w.items()],
      ['failures', () => w.failures()],
      ['trajectory', () => w.trajectory('t')],
      ['stats', () => w.stats()],
      ['append', () => w.append([stepBatch('t', 1)])],
      ['deleteItem', () => w.deleteItem('t')],
      ['maintain', () => w.maintain()],
    ];
    for (const [name, call] of calls) {
      const err = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err, name).toMatchObject({ code: 'INTERNAL', message: expect.stringMatching(/closed/) });
    }
    expect(tree(root)).toEqual(before);
  });
});
