/** Tables on a local root are written in Lance file format 2.1 (docs/design/performance.md, "Folds"). */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { BASE_KEY } from '../lib/log/layout.ts';
import { dataStorageVersion } from '../lib/log/tables.ts';
import { EVENT_SCHEMA } from '../lib/schema.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { createBatch } from './support/batches.ts';
import { fileFormat } from './support/lance-format.ts';
import { pageAll } from './support/paging.ts';

function dataFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.lance') && path.basename(path.dirname(path.join(dir, f))) === 'data')
    .map((f) => path.join(dir, f));
}

it('shard and base data files of a local log are format 2.1; object stores get 2.2', async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-format-'));
  const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
  await log.append([{ itemId: 'a', runId: 'r', create: {}, set: { x: 1 } }]);
  const logDir = path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance');
  const shards = dataFiles(path.join(logDir, '_dgcl', 'shards'));
  expect(shards).toHaveLength(1);
  const shardFormat = fileFormat(readFileSync(shards[0]!));
  await log.close(); // merges the shard into the base (and deletes it)
  const base = readdirSync(path.join(logDir, 'data')).map((f) => path.join(logDir, 'data', f));
  expect(base).toHaveLength(1);
  expect([shardFormat, ...base.map((f) => fileFormat(readFileSync(f)))]).toEqual(['2.1', '2.1']);
  expect([root, `file://${root}`, 's3://b/p', 'gs://b/p'].map(dataStorageVersion)).toEqual(['2.1', '2.1', '2.2', '2.2']);
});

describe('a log whose base was created in format 2.2 (before issue 9), written on by this version', () => {
  it('2.1 shards merge into the 2.2 base; reads, pages, blobs, maintenance and deletes agree', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-format-mixed-'));
    const logDir = path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance');
    // What an earlier version left: the base made in LanceDB 0.39's default format, and its marker.
    const conn = await lancedb.connect(path.dirname(logDir));
    await conn.createEmptyTable('log', EVENT_SCHEMA, { mode: 'create', storageOptions: { new_table_data_storage_version: '2.2' } });
    conn.close();
    await new LocalObjectStore(logDir).putIfAbsent(BASE_KEY, '');

    const blob = Buffer.from([0, 1, 2, 255, 254]);
    const big = Buffer.alloc(5000, 7);
    const batches = (n: number) => [
      createBatch(`m${n}`, { set: { i: { $int: String(2n ** 62n + BigInt(n)) }, neg: -(2 ** 40), f: 1.5, t: true, nothing: { value: null }, s: 'é\u{1F600}', j: { a: [1, 'x'] }, b: { $blob: blob.toString('base64') }, big: { $blob: big.toString('base64') } } }),
      createBatch(`n${n}`),
    ];
    const first = await openLog({ root, pipeline: 'p', experiment: 'e' });
    await first.append(batches(1));
    await first.close(); // merged into the 2.2 base
    const baseFiles = readdirSync(path.join(logDir, 'data'));
    expect(baseFiles.map((f) => fileFormat(readFileSync(path.join(logDir, 'data', f))))).toEqual(['2.2']);

    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    await log.append(batches(2)); // a 2.1 shard next to the 2.2 base
    const check = async (label: string, ids: string[]) => {
      for (const id of ids.filter((i) => i.startsWith('m'))) {
        const s = await log.fold(id);
        expect(s.violations, `${label} ${id}`).toEqual([]);
        expect([s.fields.i, s.fields.neg], `${label} ${id}`).toEqual([{ $int: String(2n ** 62n + BigInt(id.slice(1))) }, -(2 ** 40)]);
        expect([s.fields.f, s.fields.t, s.fields.nothing, s.fields.s, s.fields.j], `${label} ${id}`).toEqual([1.5, true, { value: null }, 'é\u{1F600}', { a: [1, 'x'] }]);
        expect(Buffer.from(await log.blob(id, 'b')), `${label} ${id}`).toEqual(blob);
        expect(Buffer.from(await log.blob(id, 'big')), `${label} ${id}`).toEqual(big);
      }
      expect((await log.items()).items.map((s) => s.itemId), label).toEqual(ids);
      expect(await pageAll(log, 1), label).toEqual(ids);
    };
    await check('base 2.2 + shard 2.1', ['m1', 'm2', 'n1', 'n2']);
    await log.mergeOwnShard();
    await check('both merged into the 2.2 base', ['m1', 'm2', 'n1', 'n2']);
    await log.append(batches(3));
    await log.maintain();
    await check('after maintenance', ['m1', 'm2', 'm3', 'n1', 'n2', 'n3']);
    await log.deleteItem('n1');
    await log.maintain();
    expect((await log.items()).items.map((s) => s.itemId)).toEqual(['m1', 'm2', 'm3', 'n2', 'n3']);
    await log.close();
    const again = await openLog({ root, pipeline: 'p', experiment: 'e' });
    expect((await again.items()).items.map((s) => s.itemId)).toEqual(['m1', 'm2', 'm3', 'n2', 'n3']);
    expect(readdirSync(path.join(logDir, 'data')).map((f) => fileFormat(readFileSync(path.join(logDir, 'data', f)))).every((v) => v === '2.2')).toBe(true);
    await again.close();
  });
});
