/**
 * The snapshot scenario the local and the RGW suites both run: a snapshot of a log whose events
 * sit partly in the base and partly in two writers' unmerged shards (one item deleted before it);
 * then more appends, a state change, a delete, the writers' merges, maintenance with every
 * retention 0 (clean-up prunes everything it may, the deleted item is purged); then the export of
 * the snapshot must equal, byte for byte, the export taken right after it, and its report the
 * same counts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { openLog, type OpenLogOptions } from '../../lib/index.ts';
import { exportItems } from '../../lib/export/export.ts';
import type { CheckpointLog } from '../../lib/api.ts';
import { report } from '../../lib/report/report.ts';

export const BLOB = Buffer.from('snapshot bytes \x00\x01\xfe', 'binary');
const b64 = BLOB.toString('base64');

export interface ScenarioResult {
  /** The log object that took the snapshot (open; the caller closes it). */
  log: CheckpointLog;
  /** What `snapshot('s1')` answered. */
  baseVersion: number | null;
  events: number;
}

/** Every file below `dir`, relative path -> bytes. */
function files(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.set(path.relative(dir, p), readFileSync(p));
    }
  };
  walk(dir);
  return out;
}

/** The three exports the scenario compares: JSON Lines with blob files, and Parquet. */
async function exportsOf(log: CheckpointLog, dir: string, snapshot?: string): Promise<{ jsonl: Buffer; parquet: Buffer; blobs: Map<string, Buffer> }> {
  const s = snapshot === undefined ? {} : { snapshot };
  await exportItems(log, { out: path.join(dir, 'items.jsonl'), status: 'any', blobs: path.join(dir, 'blobs'), ...s });
  await exportItems(log, { out: path.join(dir, 'items.parquet'), status: 'any', ...s });
  return { jsonl: readFileSync(path.join(dir, 'items.jsonl')), parquet: readFileSync(path.join(dir, 'items.parquet')), blobs: files(path.join(dir, 'blobs')) };
}

const ids = (jsonl: Buffer) => jsonl.toString('utf8').trim().split('\n').map((l) => (JSON.parse(l) as { item_id: string }).item_id);

export async function snapshotScenario(o: { root: string; env?: Record<string, string>; dir: string }): Promise<ScenarioResult> {
  const open = (owner: string) =>
    openLog({
      root: o.root,
      pipeline: 'p',
      experiment: 'e',
      owner,
      ...(o.env ? { env: o.env } : {}),
      // Nothing merges unless the test says so; maintenance keeps nothing it may drop.
      mergeEveryCommits: 10_000,
      mergeEveryBytes: 2 ** 30,
      mergeIdleMs: 0,
      versionRetentionMs: 0,
      deletionRetentionMs: 0,
    } satisfies OpenLogOptions);
  const w1 = await open('writer-1');
  const w2 = await open('writer-2');
  const r = await open('reader');

  // In the base: eight items, a blob, and the two that get deleted.
  await w1.append([
    ...Array.from({ length: 8 }, (_, k) => ({ itemId: `a-${k}`, runId: 'r1', create: {}, step: { name: 'load', index: 0 }, set: { n: k, title: `t${k}` } })),
    { itemId: 'gone-before', runId: 'r1', create: {}, step: { name: 'load', index: 0 }, set: { n: 100 } },
    { itemId: 'gone-after', runId: 'r1', create: {}, step: { name: 'load', index: 0 }, set: { n: 101, image: { $blob: b64 } }, terminal: 'completed' },
  ]);
  await w1.mergeOwnShard();
  // Unmerged, in two writers' shards.
  await w1.append([
    { itemId: 'a-0', runId: 'r1', step: { name: 'gen', index: 1 }, set: { out: 'x0' }, terminal: 'completed' },
    { itemId: 'a-1', runId: 'r1', step: { name: 'gen', index: 1 }, failed: { errorType: 'Timeout', traceback: 'Traceback\nTimeout: slow' } },
    { itemId: 'a-2', runId: 'r1', step: { name: 'gen', index: 1 }, set: { out: 'x2' } },
  ]);
  await w2.append([
    { itemId: 'b-0', runId: 'r1', create: {}, step: { name: 'load', index: 0 }, set: { n: 200, image: { $blob: b64 } }, terminal: 'completed' },
    { itemId: 'b-1', runId: 'r1', create: {}, step: { name: 'load', index: 0 }, set: { n: 201 }, append: { log: ['one'] } },
  ]);
  await w1.deleteItem('gone-before');

  const before = await r.stats();
  const unmerged = before.shards.reduce((n, s) => n + s.rows, 0);
  expect(new Set(before.shards.map((s) => s.slot)).size).toBe(2);
  const s1 = await r.snapshot('s1');
  expect(s1).toMatchObject({ name: 's1', created: true, baseVersion: before.base.version, tailRows: unmerged });
  // Right after: what every later read of the snapshot must give.
  const atSnapshot = await exportsOf(r, path.join(o.dir, 'live-then'));
  const reportThen = (await report(r)).data;
  expect(s1.events).toBe(reportThen.events);
  expect(ids(atSnapshot.jsonl)).toContain('gone-after');
  expect(ids(atSnapshot.jsonl)).not.toContain('gone-before');
  expect(atSnapshot.blobs.size).toBe(2);
  // The same name again, nothing changed: the same snapshot.
  expect(await r.snapshot('s1')).toEqual({ ...s1, created: false });

  // Later: new events, a state change, a delete, merges, maintenance that drops what it may.
  await w1.append([
    { itemId: 'a-2', runId: 'r1', terminal: 'completed' },
    { itemId: 'a-9', runId: 'r2', create: {}, step: { name: 'load', index: 0 }, set: { n: 9 } },
  ]);
  await w2.append([{ itemId: 'b-1', runId: 'r2', step: { name: 'gen', index: 1 }, append: { log: ['two'] } }]);
  await w1.deleteItem('gone-after');
  await expect(r.snapshot('s1')).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'name', message: expect.stringMatching(/^name: snapshot "s1" already exists in .* and the log holds other events now/) });
  await w1.mergeOwnShard();
  await w2.close();
  await w1.close();
  const m1 = await r.maintain();
  expect(m1.failures).toEqual([]);
  expect(m1.purgedItems).toBe(2); // both deleted items: the one deleted before the snapshot too
  const m2 = await r.maintain();
  expect(m2.failures).toEqual([]);
  const after = await r.stats();
  expect(after.shards).toEqual([]);
  expect(after.base.version).toBeGreaterThan(before.base.version);

  // The snapshot reads as it was: the purged item, its blob, the old states.
  const fromSnapshot = await exportsOf(r, path.join(o.dir, 'snapshot-now'), 's1');
  expect(fromSnapshot.jsonl.equals(atSnapshot.jsonl)).toBe(true);
  expect(fromSnapshot.parquet.equals(atSnapshot.parquet)).toBe(true);
  expect(fromSnapshot.blobs).toEqual(atSnapshot.blobs);
  // ... while the log moved on.
  const liveNow = await exportsOf(r, path.join(o.dir, 'live-now'));
  expect(ids(liveNow.jsonl)).not.toContain('gone-after');
  expect(ids(liveNow.jsonl)).toContain('a-9');
  const reportNow = (await report(r, { snapshot: 's1' })).data;
  expect({ events: reportNow.events, items: reportNow.itemCount, status: reportNow.status, failures: reportNow.failures }).toEqual({
    events: reportThen.events,
    items: reportThen.itemCount,
    status: reportThen.status,
    failures: reportThen.failures,
  });
  expect(reportNow.snapshot).toMatchObject({ name: 's1', baseVersion: before.base.version, tailRows: unmerged });
  expect(reportNow.stats.base.version).toBe(before.base.version);

  // Names: unknown ones are NOT_FOUND naming the snapshots there are; bad ones INVALID_INPUT.
  await expect(exportItems(r, { out: path.join(o.dir, 'x.jsonl'), snapshot: 'nope' })).rejects.toMatchObject({ code: 'NOT_FOUND', message: expect.stringMatching(/no snapshot "nope" in .*; its snapshots: "s1"$/) });
  await expect(report(r, { snapshot: 'a/b' })).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'snapshot' });
  expect(await r.snapshots()).toEqual([{ name: 's1', createdAtMs: s1.createdAtMs, baseVersion: before.base.version, tailRows: unmerged, events: s1.events }]);
  return { log: r, baseVersion: s1.baseVersion, events: s1.events };
}
