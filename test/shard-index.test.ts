/**
 * The item index of unmerged shard generations (lib/log/read/shard-index.ts): point reads take an
 * item's rows by offset instead of scanning the generation. On real Lance datasets: the rows it
 * returns are exactly what a filtered scan returns, at the latest version as commits land, and at
 * older (sealed) versions after it learned newer ones; a failed learning leaves it able to go on.
 * Through the log: folds with several live writers equal the folds after everything is merged.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { ShardItemIndex } from '../lib/log/read/shard-index.ts';
import { sqlIn, type Table } from '../lib/log/tables.ts';
import { EVENT_SCHEMA, rowsFromArrow, rowsToArrow } from '../lib/schema.ts';
import type { EventRow } from '../lib/types.ts';
import { rowsOf } from '../bench/common.ts';
import { createBatch, stepBatch } from './support/batches.ts';

const COLUMNS = ['event_id', 'item_id', 'item_seq', 'event_type'];

/** A seeded generator (mulberry32), so a failure replays. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function shardTable(): Promise<Table> {
  const db = await lancedb.connect(mkdtempSync(path.join(tmpdir(), 'dgcl-shard-index-')), { readConsistencyInterval: 0 });
  return db.createEmptyTable('g', EVENT_SCHEMA, { mode: 'create', storageOptions: { new_table_data_storage_version: '2.1' } } as never);
}

/** One commit: a few items' batches, interleaved by item as a group commit writes them. */
function commitRows(next: () => number, commit: number, items: readonly string[]): EventRow[] {
  const rows: EventRow[] = [];
  const n = 1 + Math.floor(next() * 4);
  for (let b = 0; b < n; b++) {
    const item = items[Math.floor(next() * items.length)]!;
    rows.push(...rowsOf(createBatch(item), `${commit}-${b}`));
  }
  return rows;
}

async function scanned(t: Table, items: readonly string[]): Promise<string[]> {
  const rows = rowsFromArrow(await t.query().select(COLUMNS).where(sqlIn('item_id', items)).toArrow());
  return rows.map((r) => `${r.item_id}/${r.event_id}`).sort();
}

const keys = (rows: readonly EventRow[]) => rows.map((r) => `${r.item_id}/${r.event_id}`).sort();

describe('ShardItemIndex', () => {
  it('returns what a filtered scan returns, commit after commit, and at every older version', async () => {
    const next = rng(7);
    const t = await shardTable();
    const items = Array.from({ length: 12 }, (_, i) => `it-${i}`);
    const index = new ShardItemIndex();
    const versions: Array<{ version: number; want: Map<string, string[]> }> = [];
    for (let c = 0; c < 25; c++) {
      await t.add(rowsToArrow(commitRows(next, c, items)) as never);
      const want = new Map<string, string[]>();
      for (const probe of [[items[c % 12]!], [items[(c * 5) % 12]!, items[(c * 7 + 1) % 12]!], ['never-written']]) {
        const got = keys(await index.rowsOf(t, 'g', probe, COLUMNS));
        const expected = await scanned(t, probe);
        expect(got, `commit ${c}, items ${probe.join(',')}`).toEqual(expected);
        want.set(probe.join(','), expected);
      }
      versions.push({ version: await t.version(), want });
    }
    // Reads at older versions (a sealed generation read below what was learned at latest).
    for (const { version, want } of versions.filter((_, i) => i % 6 === 0)) {
      const old = t;
      await old.checkout(version);
      for (const [probe, expected] of want) {
        expect(keys(await index.rowsOf(old, 'g', probe.split(','), COLUMNS)), `version ${version}, items ${probe}`).toEqual(expected);
      }
      await old.checkoutLatest();
    }
  });

  it('a learning that fails leaves the index able to go on; a forgotten generation is learned again', async () => {
    const t = await shardTable();
    const next = rng(11);
    for (let c = 0; c < 4; c++) await t.add(rowsToArrow(commitRows(next, c, ['a', 'b', 'c'])) as never);
    let failTakes = 1;
    const flaky = new Proxy(t, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver) as unknown;
        if (prop === 'takeOffsets' && failTakes > 0) {
          failTakes--;
          return () => ({ select: () => ({ toArrow: () => Promise.reject(new Error('injected take failure')) }) });
        }
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const index = new ShardItemIndex();
    await expect(index.rowsOf(flaky, 'g', ['a'], COLUMNS)).rejects.toThrow('injected take failure');
    expect(keys(await index.rowsOf(flaky, 'g', ['a'], COLUMNS))).toEqual(await scanned(t, ['a']));
    await t.add(rowsToArrow(commitRows(next, 9, ['a', 'd'])) as never);
    index.forget('g');
    expect(keys(await index.rowsOf(t, 'g', ['a', 'd'], COLUMNS))).toEqual(await scanned(t, ['a', 'd']));
  });
});

it('folds with four live writers (unmerged shards) equal the folds after everything is merged', async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-shard-index-log-'));
  const at = { root, pipeline: 'p', experiment: 'e' };
  const writers = await Promise.all([0, 1, 2, 3].map((slot) => openLog({ ...at, slot, mergeEveryCommits: 1000 })));
  const items = Array.from({ length: 8 }, (_, i) => `item-${i}`);
  // Items change hands between writers (each step on another writer), so an item's events lie in
  // several generations.
  for (const [k, id] of items.entries()) await writers[k % 4]!.append([createBatch(id)]);
  for (let step = 1; step <= 5; step++) {
    for (const [k, id] of items.entries()) await writers[(k + step) % 4]!.append([stepBatch(id, step)]);
  }
  const reader = await openLog(at);
  expect((await reader.stats()).shards.length, 'every writer has an unmerged generation').toBe(4);
  const live = new Map<string, unknown>();
  for (const id of items) live.set(id, await reader.fold(id));
  // A reader that learned the generations, then more commits land: it sees them.
  await writers[0]!.append([stepBatch('item-3', 6)]);
  const after = await reader.fold('item-3');
  expect(after, 'the new commit is read').not.toEqual(live.get('item-3'));
  live.set('item-3', after);
  await Promise.all(writers.map((w) => w.close()));
  await reader.maintain();
  expect((await reader.stats()).shards, 'all merged').toHaveLength(0);
  for (const id of items) expect(await reader.fold(id), id).toEqual(live.get(id));
  await reader.close();
});

it('fields() and latestEvents() of items in live shards (rows taken, then kept in JS) equal the same reads of the merged base (SQL)', async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-shard-index-keep-'));
  const at = { root, pipeline: 'p', experiment: 'e' };
  const writers = await Promise.all([0, 1].map((slot) => openLog({ ...at, slot, mergeEveryCommits: 1000 })));
  const blob = (s: string) => ({ $blob: Buffer.from(s).toString('base64') });
  const items = ['i-0', 'i-1', 'i-2'];
  for (const [k, id] of items.entries()) await writers[k % 2]!.append([createBatch(id, { set: { 'a.x': `x of ${id}`, 'a.y': k, ab: blob(`bytes of ${id}`), b: { value: null } } })]);
  for (let step = 1; step <= 4; step++) {
    for (const [k, id] of items.entries()) {
      await writers[(k + step) % 2]!.append([stepBatch(id, step, { append: { log: [`s${step}`, blob(`part ${step}`)] }, set: { 'a.x': `x${step}`, [`c${step}`]: step } })]);
    }
  }
  const queries = (log: Awaited<ReturnType<typeof openLog>>, id: string) => [
    () => log.fields(id),
    () => log.fields(id, { names: [] }),
    () => log.fields(id, { names: ['a.x', 'b', 'missing'] }),
    () => log.fields(id, { prefix: 'a.' }),
    () => log.fields(id, { prefix: 'a', names: ['log'], inlineBytes: 64 }),
    () => log.fields(id, { names: ['ab', 'log'], inlineBytes: 4 }),
    () => log.latestEvents(id, { limit: 1000 }),
    () => log.latestEvents(id, { limit: 3 }),
    () => log.latestEvents(id, { limit: 2, eventTypes: ['STEP_COMPLETED'] }),
    () => log.latestEvents(id, { limit: 5, eventTypes: ['FIELD_SET', 'FIELD_APPEND'], beforeSeq: 12, inlineBytes: 64 }),
    () => log.latestEvents(id, { limit: 4, beforeSeq: 2 }),
    () => log.latestEvents(id, { limit: 4, eventTypes: ['FAILED'] }),
  ];
  const reader = await openLog(at);
  expect((await reader.stats()).shards.length, 'both writers have unmerged generations').toBe(2);
  const live: unknown[] = [];
  for (const id of [...items, 'never-written']) for (const q of queries(reader, id)) live.push(await q().catch((e: Error) => `${e.name}: ${e.message}`));
  await Promise.all(writers.map((w) => w.close()));
  await reader.maintain();
  expect((await reader.stats()).shards, 'all merged').toHaveLength(0);
  const merged: unknown[] = [];
  for (const id of [...items, 'never-written']) for (const q of queries(reader, id)) merged.push(await q().catch((e: Error) => `${e.name}: ${e.message}`));
  expect(live).toEqual(merged);
  expect(merged.filter((m) => typeof m === 'string'), 'only the unwritten item is missing').toHaveLength(queries(reader, 'x').length);
  await reader.close();
});
