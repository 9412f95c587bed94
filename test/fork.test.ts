/**
 * `log.fork` (lib/fork.ts, lib/log/admin/fork.ts) on a local root with real Lance: a `where`
 * cohort (with its children) keeps exactly its events before the fork's step (ids, seqs, values,
 * blob bytes), gets its lineage (fold, items, report, after maintenance), resumes at that step
 * under durable steps, is a no-op when run again, and every refusal writes nothing; the source
 * is never touched.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type * as arrow from 'apache-arrow';
import { afterEach, describe, expect, it } from 'vitest';
import { openLog, parseWhere, report, type CheckpointLog, type OpenLogOptions } from '../lib/index.ts';
import { readsOf } from '../lib/log/reads.ts';
import { COLUMN_NAMES, rowsFromArrow } from '../lib/schema.ts';
import type { EventRow } from '../lib/types.ts';
import { LINEAGE_FIELD } from '../lib/lineage.ts';
import { coordDbPath } from './support/coord.ts';

const dirs: string[] = [];
const logs: CheckpointLog[] = [];
afterEach(async () => {
  for (const l of logs.splice(0)) await l.close().catch(() => undefined);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempRoot(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'dgcl-fork-'));
  dirs.push(d);
  return d;
}

async function open(root: string, experiment = 'e', o: Partial<OpenLogOptions> = {}): Promise<CheckpointLog> {
  const log = await openLog({ root, pipeline: 'p', experiment, leaseTtlMs: 3_600_000, mergeIdleMs: 0, ...o });
  logs.push(log);
  return log;
}

/** Every visible event of a log, every column, by event id. */
async function events(log: CheckpointLog): Promise<Map<string, EventRow>> {
  return readsOf(log).scanEvents({ columns: COLUMN_NAMES }, () => {
    const out = new Map<string, EventRow>();
    return {
      batch(b: arrow.RecordBatch, keep: (r: number) => boolean) {
        const rows = rowsFromArrow({ numRows: b.numRows, getChild: (n: string) => b.getChild(n) } as unknown as arrow.Table);
        rows.forEach((r, i) => keep(i) && out.set(r.event_id, r));
      },
      done: () => out,
    };
  });
}

/** A local log's markers (keys: their bodies are random) and claims (without the random `claimedBy`), read from its SQLite file. */
function records(logDir: string): Array<[string, unknown]> {
  const db = new (process.getBuiltinModule('node:sqlite') as typeof import('node:sqlite')).DatabaseSync(coordDbPath(logDir), { readOnly: true });
  try {
    const rows = db.prepare('SELECT key, body FROM records ORDER BY key').all() as Array<{ key: string; body: string }>;
    return rows.map(({ key, body }) => {
      if (!key.startsWith('_dgcl/claims/')) return [key, key.startsWith('_dgcl/items/') ? 'marker' : body];
      const { claimedBy: _, ...claim } = JSON.parse(body) as Record<string, unknown>;
      return [key, claim];
    });
  } finally {
    db.close();
  }
}

const STEPS = [
  ['draft', 0],
  ['review', 1],
  ['publish', 2],
] as const;

/**
 * Source: items a0..a5 (group x: even ones), each runs draft, review, publish; a0's review fails
 * once first; a4 stops after draft; child c0 (parent a0) runs draft and review; a2 is completed.
 */
async function buildSource(root: string): Promise<CheckpointLog> {
  const log = await open(root);
  for (let i = 0; i < 6; i++) {
    const id = `a${i}`;
    const it = await log.item(id, { runId: 'r1' });
    const last = i === 4 ? 1 : 3;
    for (const [name, index] of STEPS.slice(0, last)) {
      if (id === 'a0' && name === 'review') await it.step(name, index, () => { throw new Error('flaky'); }).catch(() => undefined);
      await it.step(name, index, () => ({ set: { [`${name}_out`]: `${id}-${name}`, ...(name === 'draft' ? { group: i % 2 === 0 ? 'x' : 'y', raw: { $blob: Buffer.from(`bytes of ${id}`).toString('base64') } } : {}) } }));
    }
    if (id === 'a2') await it.terminal('completed');
  }
  const child = await log.item('c0', { runId: 'r1', create: { rootItemId: 'a0', parentItemId: 'a0' } });
  for (const [name, index] of STEPS.slice(0, 2)) await child.step(name, index, () => ({ set: { [`${name}_out`]: `c0-${name}` } }));
  await log.mergeOwnShard();
  return log;
}

describe('fork', () => {
  it('keeps a where-selected cohort (and children) before the step, with its lineage, and resumes it there', async () => {
    const root = tempRoot();
    const src = await buildSource(root);
    const before = await events(src);

    const r = await src.fork({ where: parseWhere('group = x'), fromStep: 'review', to: { experiment: 'f' }, children: true });
    expect(r.unchanged).toBe(false);
    expect(r.items).toBe(4); // a0, a2, a4, c0

    // The source is untouched.
    expect(await events(src)).toEqual(before);

    const fork = await open(root, 'f');
    const forked = await events(fork);
    const ids = [...new Set([...forked.values()].map((e) => e.item_id))].sort();
    expect(ids).toEqual(['a0', 'a2', 'a4', 'c0']);
    let lineageEvents = 0;
    for (const id of ids) {
      const mine = [...before.values()].filter((e) => e.item_id === id);
      const cut = Math.min(...mine.filter((e) => e.step_name === 'review').map((e) => e.item_seq));
      const kept = mine.filter((e) => e.item_seq < cut);
      const lastKeptSeq = Math.max(...kept.map((e) => e.item_seq));
      // Every kept event equal, every column (blob bytes included).
      for (const e of kept) expect(forked.get(e.event_id)).toEqual(e);
      const extra = [...forked.values()].filter((e) => e.item_id === id && !before.has(e.event_id));
      expect(extra.map((e) => [e.field_name, e.item_seq])).toEqual([[LINEAGE_FIELD, lastKeptSeq + 1]]);
      lineageEvents += extra.length;
      expect([...forked.values()].filter((e) => e.item_id === id).length).toBe(kept.length + 1);
      const state = await fork.fold(id);
      expect(state.forkedFrom).toEqual({ pipeline: 'p', experiment: 'e', itemId: id, lastKeptSeq });
      expect(state.fields).not.toHaveProperty(LINEAGE_FIELD);
      expect(state.violations).toEqual([]);
      if (id === 'a4') expect(state.cursor?.stepName).toBe('draft');
    }
    expect(lineageEvents).toBe(4);
    expect(r.events).toBe(forked.size);
    expect(r.keptEvents).toBe(forked.size - 4);
    // a0's failed review attempt went with the step; a2's terminal event too.
    const a0 = await fork.fold('a0');
    expect(a0.failures).toEqual([]);
    expect(a0.cursor?.stepName).toBe('draft');
    expect(a0.status).toBe('in_progress');
    expect((await fork.fold('a2')).status).toBe('in_progress');
    expect(Buffer.from(await fork.blob('a0', 'raw')).toString()).toBe('bytes of a0');

    // Lineage in items() and the report's item records.
    const page = await fork.items();
    expect(page.items.map((i) => [i.itemId, i.forkedFrom?.experiment, i.forkedFrom?.lastKeptSeq])).toEqual(
      ids.map((id) => [id, 'e', forked.get([...forked.values()].find((e) => e.item_id === id && e.field_name === LINEAGE_FIELD)!.event_id)!.item_seq - 1]),
    );
    const rep = await report(fork);
    expect(rep.data.items.map((i) => [i.id, i.forkedFrom?.itemId]).sort()).toEqual(ids.map((id) => [id, id]));
    // The source's listing has no lineage.
    expect((await src.items()).items.every((i) => i.forkedFrom === undefined)).toBe(true);

    // Durable steps on the fork run review and publish, never draft.
    const calls: string[] = [];
    for (const id of ['a0', 'a2', 'a4']) {
      const it = await fork.item(id, { runId: 'r2' });
      for (const [name, index] of STEPS) await it.step(name, index, () => void calls.push(`${id}:${name}`));
    }
    expect(calls).toEqual(['a0:review', 'a0:publish', 'a2:review', 'a2:publish', 'a4:review', 'a4:publish']);
    expect((await fork.fold('a0')).cursor?.stepName).toBe('publish');

    // Lineage survives maintenance; the same fork again changes nothing (after the items moved on).
    await fork.close();
    const fork2 = await open(root, 'f', { versionRetentionMs: 0 });
    await fork2.maintain();
    expect((await fork2.fold('a0')).forkedFrom).toEqual({ pipeline: 'p', experiment: 'e', itemId: 'a0', lastKeptSeq: (await events(fork2)).get([...forked.values()].find((e) => e.item_id === 'a0' && e.field_name === LINEAGE_FIELD)!.event_id)!.item_seq - 1 });
    const after = await events(fork2);
    const again = await src.fork({ where: parseWhere('group = x'), fromStep: 'review', to: { experiment: 'f' }, children: true });
    expect(again).toMatchObject({ unchanged: true, events: 0, items: 4 });
    expect(await events(fork2)).toEqual(after);
    expect(await events(src)).toEqual(before);
  });

  it("writes the fork's records from what it committed: the markers and claims a repair rebuilds from its events", async () => {
    const root = tempRoot();
    const src = await buildSource(root);
    await src.fork({ where: parseWhere('group = x'), fromStep: 'review', to: { experiment: 'f' }, children: true });
    const dir = path.join(root, 'datagen_checkpoints', 'p', 'f', 'log.lance');
    const written = records(dir);
    const fork = await open(root, 'f');
    const checkpoints = new Set([...(await events(fork)).values()].map((e) => e.checkpoint_id));
    const report = await fork.repair();
    expect({ markers: report.markers, claims: report.claims }).toEqual({ markers: 4, claims: checkpoints.size });
    expect(records(dir)).toEqual(written);
  });

  it('forks exact item ids from a step index; an item that never reached the step keeps everything', async () => {
    const root = tempRoot();
    const src = await buildSource(root);
    const r = await src.fork({ itemIds: ['a4', 'a1'], fromStep: 2, to: { experiment: 'g' } });
    expect(r.items).toBe(2);
    const fork = await open(root, 'g');
    const all = await events(src);
    const a4 = [...all.values()].filter((e) => e.item_id === 'a4');
    expect((await fork.fold('a4')).forkedFrom?.lastKeptSeq).toBe(Math.max(...a4.map((e) => e.item_seq)));
    expect((await fork.fold('a1')).cursor?.stepName).toBe('review');
    expect((await fork.items()).items.map((i) => i.itemId)).toEqual(['a1', 'a4']);
  });

  it('refuses a target holding anything else, and bad options, writing nothing', async () => {
    const root = tempRoot();
    const src = await buildSource(root);
    const before = await events(src);
    await src.fork({ itemIds: ['a1'], fromStep: 'review', to: { experiment: 'f' } });
    const fork = await open(root, 'f');
    const forkBefore = await events(fork);
    // Another cut, another set of items, the same ids from another step: refused.
    await expect(src.fork({ itemIds: ['a1'], fromStep: 'publish', to: { experiment: 'f' } })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringContaining('another source or cut') });
    await expect(src.fork({ itemIds: ['a1', 'a3'], fromStep: 'review', to: { experiment: 'f' } })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringContaining('"a3"') });
    await expect(src.fork({ itemIds: ['a3'], fromStep: 'review', to: { experiment: 'f' } })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    expect(await events(fork)).toEqual(forkBefore);
    // A log that is not a fork.
    const other = await open(root, 'other');
    await other.append([{ itemId: 'z', runId: 'r', create: {}, set: { v: 1 } }]);
    const otherBefore = await events(other);
    await expect(src.fork({ itemIds: ['a1'], fromStep: 'review', to: { experiment: 'other' } })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringContaining('not a fork') });
    expect(await events(other)).toEqual(otherBefore);
    // Options.
    await expect(src.fork({ itemIds: ['a1'], fromStep: 'review', to: { experiment: 'e' } })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringContaining('its source') });
    await expect(src.fork({ itemIds: ['nope'], fromStep: 'review', to: { experiment: 'h' } })).rejects.toMatchObject({ code: 'NOT_FOUND', message: expect.stringContaining('"nope"') });
    await expect(src.fork({ where: parseWhere('group = none'), fromStep: 'review', to: { experiment: 'h' } })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(src.fork({ itemIds: ['a1'], fromStep: 'draft', to: { experiment: 'h' } })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringContaining('no event before') });
    await expect(src.fork({ itemIds: ['a1'], fromStep: -1, to: { experiment: 'h' } })).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'fromStep' });
    await expect(src.fork({ fromStep: 'review', to: { experiment: 'h' } })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    const h = await open(root, 'h');
    await expect(h.items()).rejects.toMatchObject({ code: 'LOG_NOT_FOUND' });
    // A batch may not set the lineage field itself.
    await expect(other.append([{ itemId: 'z', runId: 'r', set: { [LINEAGE_FIELD]: 1 } }])).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    expect(await events(src)).toEqual(before);
  });
});
