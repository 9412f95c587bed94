/**
 * `copyLog` (lib/log/admin/copy.ts), the data half of `dgcl copy`, on a local root with real
 * Lance: the target holds exactly the source's visible events, every column and blob byte, as
 * a base a writer made (markers, deleted-seq records), then the injected initRecords runs; and
 * each refusal writes nothing.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import type * as arrow from 'apache-arrow';
import { afterEach, describe, expect, it } from 'vitest';
import { openLog, type OpenLogOptions } from '../lib/index.ts';
import { copyLog } from '../lib/log/admin/copy.ts';
import { copyLog as copyWithRecords } from '../lib/admin.ts';
import { openPlace, type AdminPlace, type OpenedPlace } from '../lib/log/admin/place.ts';
import { DELETED_DIR, floorDir, META_DIR, parseMetaNames } from '../lib/log/layout.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { readsOf } from '../lib/log/reads.ts';
import { COLUMN_NAMES, rowsFromArrow } from '../lib/schema.ts';
import type { Ack, EventRow } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { tree } from './support/tree.ts';

const dirs: string[] = [];
const logs: CheckpointLog[] = [];
const places: OpenedPlace[] = [];
afterEach(async () => {
  for (const l of logs.splice(0)) await l.close().catch(() => undefined);
  for (const p of places.splice(0)) await p.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempRoot(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'dgcl-copy-'));
  dirs.push(d);
  return d;
}

async function open(o: Partial<OpenLogOptions> & { root: string }): Promise<CheckpointLog> {
  const log = await openLog({ pipeline: 'p', experiment: 'e', leaseTtlMs: 3_600_000, mergeIdleMs: 0, ...o });
  logs.push(log);
  return log;
}

async function place(root: string, pipeline = 'p', experiment = 'e'): Promise<OpenedPlace> {
  const p = await openPlace({ root, pipeline, experiment });
  places.push(p);
  return p;
}

/** Every visible event of a log, every column, by event id (the public streaming read). */
async function visibleEvents(log: CheckpointLog): Promise<Map<string, EventRow>> {
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

const blobOf = (i: number) => Buffer.from(Array.from({ length: 3000 + i * 517 }, (_, k) => (k * 31 + i) % 256));
const ids = (acks: Ack[]) => acks.flatMap((a) => a.eventIds);

/**
 * A source log: items written by a writer that closed (merged into the base, with merges along
 * the way), then by two writers left open with unmerged generations; blobs on every item; one
 * item deleted in the base, one in an unmerged generation. Returns the event ids expected in a
 * copy (acked, not deleted) and the bytes of the blobs they hold.
 */
async function sourceLog(root: string): Promise<{ expected: Set<string>; blobBytes: number; b: CheckpointLog; c: CheckpointLog }> {
  const expected = new Set<string>();
  let blobBytes = 0;
  const a = await open({ root, owner: 'writer-a', slot: 0, slots: 3, mergeEveryCommits: 2 });
  const deleted: string[] = [];
  for (let i = 0; i < 6; i++) {
    const acks = await a.append([createBatch(`a${i}`, { set: { prompt: `about a${i}`, img: blobOf(i), n: i } })]);
    ids(acks).forEach((id) => expected.add(id));
    blobBytes += blobOf(i).length;
    const more = await a.append([stepBatch(`a${i}`, 1)]);
    ids(more).forEach((id) => expected.add(id));
    if (i === 2) deleted.push(...ids(acks), ...ids(more));
  }
  expect((await a.deleteItem('a2')).deleted).toBe(true);
  blobBytes -= blobOf(2).length;
  await a.close();
  logs.splice(logs.indexOf(a), 1);

  // b's merge commits its generation to the base, then stops before retiring it: its events
  // are in the base and in a visible generation (two copies of each, one kept by reads).
  const failRetire = { on: false };
  const hooks = {
    beforeMergeStep(step: string) {
      if (failRetire.on && step === 'retire-marker') throw new Error('merge stopped before retiring');
    },
  };
  let b3Events = 0;
  const b = await open({ root, owner: 'writer-b', slot: 1, slots: 3, mergeEveryCommits: 1000, hooks });
  const c = await open({ root, owner: 'writer-c', slot: 2, slots: 3, mergeEveryCommits: 1000 });
  for (let i = 0; i < 4; i++) {
    for (const [w, name] of [[b, 'b'], [c, 'c']] as const) {
      const acks = await w.append([createBatch(`${name}${i}`, { set: { img: blobOf(10 + i), tags: { k: [i, 'x'] } } }), stepBatch(`a${i === 2 ? 0 : i}`, 10 + i + (name === 'c' ? 100 : 0))]);
      ids(acks).forEach((id) => expected.add(id));
      blobBytes += blobOf(10 + i).length;
      if (name === 'b' && i === 1) deleted.push(...ids(acks.slice(0, 1)));
      if (name === 'b' && i === 3) b3Events = acks[0]!.eventIds.length;
    }
  }
  failRetire.on = true;
  await expect(b.mergeOwnShard()).rejects.toThrow('merge stopped before retiring');
  failRetire.on = false;
  const base = await (await lancedb.connect(path.join(root, 'datagen_checkpoints', 'p', 'e'))).openTable('log');
  expect(await base.countRows(`item_id = 'b3'`), 'the fixture: b3 is in the base').toBe(b3Events);
  const meta = parseMetaNames(await (await place(root)).objects.list(META_DIR));
  expect(meta.gens.filter((g) => g.startsWith('s01-') && !meta.retired.has(g)), 'the fixture: ... and in b\'s generation, not retired').toHaveLength(1);
  base.close();
  expect((await b.deleteItem('b1')).deleted).toBe(true);
  blobBytes -= blobOf(11).length;
  for (const id of deleted) expected.delete(id);
  return { expected, blobBytes, b, c };
}

describe('copyLog', () => {
  it('copies exactly the visible events (every column, blob bytes, tails of two open writers), the deleted-seq records and the markers, then calls initRecords once', async () => {
    const root = tempRoot();
    const { expected, blobBytes, b } = await sourceLog(root);
    const source = await visibleEvents(b);
    expect(new Set(source.keys()), 'the fixture: the public read shows the acked events but the deleted items\'').toEqual(expected);
    const metaBefore = parseMetaNames(await (await place(root)).objects.list(META_DIR));
    expect(metaBefore.gens.filter((g) => !metaBefore.retired.has(g)).length, 'two writers\' unmerged generations').toBeGreaterThanOrEqual(2);

    const from = await place(root);
    const to = await place(root, 'p2', 'e2');
    const calls: Array<{ base: string | null; events: number }> = [];
    const result = await copyLog(from, to, {
      batchRows: 7, // several commits to the target
      initRecords: async (target: AdminPlace) => {
        const reader = await openLog({ root, pipeline: 'p2', experiment: 'e2' });
        try {
          calls.push({ base: await target.objects.get(`${META_DIR}/base`), events: (await visibleEvents(reader)).size });
        } finally {
          await reader.close();
        }
      },
    });
    expect(calls, 'initRecords ran once, after the base and its marker were in place').toEqual([{ base: '', events: expected.size }]);

    const copy = await open({ root, pipeline: 'p2', experiment: 'e2' });
    const copied = await visibleEvents(copy);
    expect(new Set(copied.keys())).toEqual(expected);
    for (const [id, row] of source) expect(copied.get(id), `event ${id}, every column`).toEqual(row);
    const items = new Set([...copied.values()].map((r) => r.item_id));
    expect(result.events).toBe(expected.size);
    expect(result.items).toBe(items.size);
    expect(result.bytes, 'the bytes handed to Lance hold at least every copied blob').toBeGreaterThanOrEqual(blobBytes);
    expect(await copy.blob('b3', 'img')).toEqual(new Uint8Array(blobOf(13)));

    // As a writer's base: one log id of its own, the base marker; the deleted-seq records.
    const sourceMeta = parseMetaNames(await from.objects.list(META_DIR));
    const targetMeta = parseMetaNames(await to.objects.list(META_DIR));
    expect(targetMeta.baseExists).toBe(true);
    expect(targetMeta.logId).toMatch(/^[0-9a-f]{16}$/);
    expect(targetMeta.logId).not.toBe(sourceMeta.logId);
    expect(targetMeta.gens).toEqual([]);
    expect(targetMeta.tombNames, 'deleted rows are left out, so no tombstone is needed').toEqual([]);
    expect(await to.objects.list(META_DIR)).toEqual(['base', `log.${targetMeta.logId}`]);
    const floors = async (p: AdminPlace) => (await Promise.all((await p.objects.list(DELETED_DIR)).map(async (h) => (await p.objects.list(`${DELETED_DIR}/${h}`)).map((s) => `${h}/${s}`)))).flat();
    const sourceFloors = await floors(from);
    expect(sourceFloors.map((f) => f.split('/')[0]).sort(), 'the fixture: one deleted-seq record per deleted item').toEqual([floorDir('a2'), floorDir('b1')].map((d) => d.split('/').pop()).sort());
    expect(await floors(to)).toEqual(sourceFloors);
    expect(result.deletedSeqs).toBe(2);
    expect(await to.objects.get('_dgcl/coordination'), 'the records are initRecords\' to write').toBeNull();
    await expect(copy.fold('a2'), 'a deleted item is not in the copy').rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await copy.fold('a3')).toEqual(await b.fold('a3'));
  });

  it('refuses a target that exists, a source that does not, and the source itself, writing nothing', async () => {
    const root = tempRoot();
    const w = await open({ root, owner: 'w' });
    await w.append([createBatch('x')]);
    await w.close();
    logs.splice(logs.indexOf(w), 1);
    const initRecords = async () => {
      throw new Error('initRecords must not run');
    };
    const source = await place(root);

    const occupied = await place(root, 'p', 'taken');
    await occupied.objects.putIfAbsent('stray', 'x');
    const before = tree(root);
    await expect(copyLog(source, occupied, { initRecords })).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'to' });
    expect(tree(root)).toEqual(before);

    await expect(copyLog(source, await place(root), { initRecords })).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'to' });
    await expect(copyLog(source, await place(`file://${root}`), { initRecords }), 'the same place by another spelling').rejects.toMatchObject({ code: 'INVALID_INPUT' });
    expect(tree(root)).toEqual(before);

    const missing = await place(root, 'p', 'nope');
    await expect(copyLog(missing, await place(root, 'p', 'fresh'), { initRecords })).rejects.toMatchObject({ code: 'LOG_NOT_FOUND', message: expect.stringContaining('experiments of pipeline "p": e, taken') });
    expect(tree(root)).toEqual(before);
    expect(existsSync(path.join(root, 'datagen_checkpoints', 'p', 'fresh'))).toBe(false);
  });
});

describe('dgcl copy (lib/admin.ts)', () => {
  it('a copy has records of its own: it continues every item at its seqs, answers a resent batch as the first time, and its origin does not see its writes', async () => {
    const root = tempRoot();
    const w = await open({ root, owner: 'w' });
    const acks: Ack[] = [...(await w.append([createBatch('a'), createBatch('b')])), ...(await w.append([stepBatch('a', 1)]))];
    await w.close();
    const other = tempRoot();
    await copyWithRecords(await place(root), await place(other, 'p', 'copy'));
    const c = await open({ root: other, experiment: 'copy', owner: 'c' });
    const [again] = await c.append([stepBatch('a', 1)]);
    expect({ duplicate: again!.duplicate, firstSeq: again!.firstSeq }, 'the resend is answered as the first time').toEqual({ duplicate: true, firstSeq: acks[2]!.firstSeq });
    const [next] = await c.append([stepBatch('a', 2)]);
    expect(next!.firstSeq).toBe(acks[2]!.lastSeq + 1);
    const [b] = await c.append([createBatch('b')]);
    expect({ duplicate: b!.duplicate, lastSeq: b!.lastSeq }, "b's first batch again: a duplicate").toEqual({ duplicate: true, lastSeq: acks[1]!.lastSeq });
    const origin = await open({ root, owner: 'o' });
    expect((await origin.fold('a')).lastSeq, 'the origin does not see the copy\'s event').toBe(acks[2]!.lastSeq);
  });
});
