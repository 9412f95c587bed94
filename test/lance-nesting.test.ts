/**
 * Shard generations, seals and claims live inside the base dataset's folder. If a Lance upgrade
 * made the base's compaction/cleanup delete unknown files there, shard data would be lost: this
 * keeps checking that it does not (notes/lancedb-0.39-facts.md).
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { createBatch } from './support/batches.ts';

it("the base's compaction and version cleanup leave _dgcl/ (shards, seals, claims) untouched", async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-nest-'));
  const log = await openLog({ root, pipeline: 'p', experiment: 'e', mergeEveryCommits: 1000 });
  for (let i = 0; i < 3; i++) {
    await log.append([createBatch(`m${i}`)]);
    await log.mergeOwnShard();
  }
  await log.append([createBatch('unmerged')]);
  const stray = path.join(log.uri, '_dgcl', 'meta', 'stray-file');
  mkdirSync(path.dirname(stray), { recursive: true });
  writeFileSync(stray, 'keep me');
  const before = await log.stats();
  expect(before.shards).toHaveLength(1);
  // what maintenance does to the base, with the most aggressive cleanup Lance offers
  const { LanceTables } = await import('../lib/log/tables.ts');
  const { LocalObjectStore } = await import('../lib/storage/local.ts');
  const base = (await new LanceTables(log.uri, undefined, new LocalObjectStore(log.uri)).base(true))!;
  const stats = await base.optimize({ cleanupOlderThan: new Date(Date.now() + 1000), deleteUnverified: true });
  expect(stats.compaction.fragmentsRemoved).toBeGreaterThan(0);
  expect(readFileSync(stray, 'utf8')).toBe('keep me');
  expect(existsSync(path.join(log.uri, '_dgcl', 'shards', `${before.shards[0]!.name}.lance`))).toBe(true);
  expect((await log.fold('unmerged')).lastSeq).toBe(3);
  expect((await log.items()).items).toHaveLength(4);
  await log.close();
});
