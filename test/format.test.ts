/** Tables on a local root are written in Lance file format 2.1 (docs/design/performance.md, "Folds"). */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { dataStorageVersion } from '../lib/log/tables.ts';
import { fileFormat } from './support/lance-format.ts';

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
