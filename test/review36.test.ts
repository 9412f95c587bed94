/**
 * review36: what bda0746 (a failed read opens the base's handles again) leaves of review33 F2.
 * The pinned base is dropped only when a read through it fails. A listing through the projection
 * can succeed on a handle pinned at a version number of a deleted log: the fragment row count
 * reads no file, and a recount of a deleted-then-recreated item through the old log's item_id
 * index (cached in the process's Lance session) finds no rows without reading a file.
 */
import { promises as fs } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createBatch } from './support/batches.ts';
import { raceFixture } from './support/race-kit.ts';

const { setup } = raceFixture(60_000);

describe('review36: a listing on a base pinned at a version number of a deleted log', () => {
  it('a process that listed the old log lists the new one (same shape, same version)', async () => {
    const { open } = setup();
    const R = open({}); // a long-lived reader
    const shape = async (a: string, b: string, tag: string) => {
      const W = open({ mergeEveryCommits: 1000 });
      await W.log.append([createBatch(a, { set: { prompt: tag } }), createBatch(b, { set: { prompt: tag } })]);
      await W.log.deleteItem(b); // a tombstone: listings recount b through the base
      await W.log.append([createBatch(b, { set: { prompt: `${tag} again` } })]);
      await W.log.mergeOwnShard();
      await W.log.close();
      expect((await open({}).log.maintain()).failures).toEqual([]);
    };
    await shape('a', 'b', 'OLD');
    // R pins the base, counts its fragments, and recounts b through the base's item_id index.
    expect((await R.log.items()).items.map((i) => i.itemId)).toEqual(['a', 'b']);
    const v = (await R.log.stats()).base.version;

    await fs.rm(R.log.uri, { recursive: true, force: true });
    await shape('x', 'y', 'NEW');
    const F = open({});
    expect((await F.log.stats()).base.version, 'the new base is at the version R pinned').toBe(v);
    const want = (await F.log.items()).items;
    expect(want.map((i) => i.itemId)).toEqual(['x', 'y']);
    const seen: string[][] = [];
    for (let i = 0; i < 3; i++) seen.push((await R.log.items()).items.map((a) => a.itemId));
    expect(seen, 'R lists the new log as a fresh process does, every time').toEqual([['x', 'y'], ['x', 'y'], ['x', 'y']]);
  });
});

describe('review36: the local read plan of rows files (the end, then the rest) returns the right rows', () => {
  it('every item of files from 100 B to 200 KB, directories shorter and longer than the end, items across its start', async () => {
    const { randomBytes } = await import('node:crypto');
    const { decodeRowsFile, encodeRowsFile, RowsDirectories } = await import('../lib/log/projection/fold-rows.ts');
    const { LocalObjectStore } = await import('../lib/storage/local.ts');
    const { tempRoot } = await import('./support/race-kit.ts');
    const { fullRow } = await import('./support/rows.ts');
    const row = (itemId: string, seq: number, tb: string) =>
      fullRow({ event_id: `e-${itemId}-${seq}`, item_id: itemId, root_item_id: itemId, item_seq: seq, checkpoint_id: `c-${seq}`, field_type: 'dgcl.float64', value_kind: 'float', value_i64: null, value_f64: 1.5, traceback: tb });
    const objects = new LocalObjectStore(tempRoot());
    let checked = 0;
    for (const [n, idLen, tbLen] of [[1, 1, 0], [3, 4, 10], [20, 8, 400], [60, 40, 250], [200, 120, 30], [40, 20, 4000], [1000, 10, 100]] as const) {
      const ids = Array.from({ length: n }, (_, i) => `${String(i).padStart(5, '0')}${randomBytes(idLen).toString('hex')}`);
      const items = ids.map((id) => [id, [row(id, 1, randomBytes(tbLen).toString('base64')), row(id, 2, '')]] as const);
      const key = `_dgcl/projection/rows-v1-${n}-${idLen}-${tbLen}.bin`;
      const file = encodeRowsFile(items);
      await objects.putIfAbsent(key, file);
      expect(decodeRowsFile(file)).toEqual(items);
      const dirs = new RowsDirectories(objects);
      for (const [id, rows] of items) {
        expect(await dirs.itemRows(key, id), `${key} ${id} (file ${file.length} B)`).toEqual(rows);
        checked++;
      }
      expect(await dirs.itemRows(key, 'zzz-none')).toEqual([]);
    }
    expect(checked).toBe(1324);
  });
});
