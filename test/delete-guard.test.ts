/**
 * deleteItem(itemId, {throughSeq}) (docs/design/deletion.md, "Guarded deletes"): a delete whose
 * answer was lost, retried (or delivered twice) after the item was deleted and created again,
 * must not delete the new incarnation, before or after the purge. Real Lance on a local root;
 * the objects are listed with a LocalObjectStore on the log's folder to prove what was written.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConflictError, InvalidInputError } from '../lib/errors.ts';
import { openLog, type OpenLogOptions } from '../lib/index.ts';
import { floorDir, itemKey, META_DIR } from '../lib/log/layout.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logLocation, parseRoot } from '../lib/storage/location.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { localCoord } from './support/coord.ts';

const open: CheckpointLog[] = [];
afterEach(async () => {
  for (const l of open.splice(0)) await l.close().catch(() => undefined);
});

/** One experiment on a fresh local root; `objects` reads the log's folder directly. */
function experiment(extra: Partial<OpenLogOptions> = {}) {
  const root = `file://${mkdtempSync(path.join(tmpdir(), 'dgcl-delguard-'))}`;
  const name = `e-${randomUUID().slice(0, 6)}`;
  const loc = logLocation(parseRoot(root), 'p', name);
  if (loc.kind !== 'file') throw new Error('a local root');
  const objects = new LocalObjectStore(loc.dir);
  const newLog = async (owner: string, more: Partial<OpenLogOptions> = {}) => {
    const log = await openLog({ root, pipeline: 'p', experiment: name, owner, ...extra, ...more });
    open.push(log);
    return log;
  };
  return {
    newLog,
    /** Tombstone names in the meta folder. */
    tombs: async () => (await objects.list(META_DIR)).filter((n) => n.startsWith('tomb.')),
    /** The item's deleted-seq records. */
    floors: async (itemId: string) => objects.list(floorDir(itemId)),
    marker: async (itemId: string) => {
      const coord = await localCoord(objects);
      try {
        return await coord.get(itemKey(itemId));
      } finally {
        coord.close?.();
      }
    },
    objects,
  };
}

/** Creates `itemId` in three batches (three commits); the acks. */
async function threeBatches(log: CheckpointLog, itemId: string): Promise<Ack[]> {
  const acks: Ack[] = [];
  acks.push(...(await log.append([createBatch(itemId)])));
  acks.push(...(await log.append([stepBatch(itemId, 1)])));
  acks.push(...(await log.append([stepBatch(itemId, 2)])));
  return acks;
}

describe('a retried delete never deletes a newer incarnation', () => {
  for (const purged of [false, true]) {
    it(`the same delete again after the item was created again ${purged ? 'after the purge (only the deleted-seq record remains)' : 'before the purge (the tombstone is there)'}: deleted: false, the new incarnation intact`, async () => {
      const x = experiment({ deletionRetentionMs: 0, versionRetentionMs: 0 });
      const w = await x.newLog('writer');
      const acks = await threeBatches(w, 'a');
      const last = acks[2]!.lastSeq;
      const del = await w.deleteItem('a', { throughSeq: last });
      expect(del).toEqual({ itemId: 'a', deleted: true, throughSeq: last });
      if (purged) {
        await w.mergeOwnShard();
        const m = await x.newLog('maintainer');
        expect((await m.maintain()).purgedItems).toBe(1);
        expect(await x.tombs(), 'the purge dropped the tombstone').toEqual([]);
      } else {
        expect(await x.tombs()).toHaveLength(1);
      }
      // The new incarnation, written by another process.
      const other = await x.newLog('other-writer');
      const [again] = await other.append([createBatch('a')]);
      const [step] = await other.append([stepBatch('a', 1, { set: { out1: 'second incarnation' } })]);
      expect(again!.firstSeq).toBe(last + 1);
      const reader = await x.newLog('reader');
      const before = await reader.fold('a');
      expect([before.lastSeq, before.fields.out1, before.violations]).toEqual([step!.lastSeq, 'second incarnation', []]);

      // The first delete's answer was lost: retried through the first writer, and delivered
      // once more to the other writer (an at-least-once queue).
      expect(await w.deleteItem('a', { throughSeq: last })).toEqual({ itemId: 'a', deleted: false, throughSeq: last });
      expect(await other.deleteItem('a', { throughSeq: last })).toEqual({ itemId: 'a', deleted: false, throughSeq: last });
      expect(await reader.fold('a')).toEqual(before);
      expect((await reader.trajectory('a')).map((e) => e.itemSeq)).toEqual(Array.from({ length: step!.lastSeq - last }, (_, i) => last + 1 + i));
      const fresh = await x.newLog('fresh-reader');
      expect(await fresh.fold('a')).toEqual(before);
      expect(await x.floors('a'), 'no deleted-seq record beyond the first delete').toEqual([String(last).padStart(12, '0')]);

      // The guard does not stand in the way of deleting the new incarnation as seen.
      expect(await other.deleteItem('a', { throughSeq: step!.lastSeq })).toEqual({ itemId: 'a', deleted: true, throughSeq: step!.lastSeq });
      await expect(fresh.fold('a')).rejects.toMatchObject({ code: 'NOT_FOUND' });
      // A late copy of the first delete still finds it done (answered with the highest deleted seq).
      expect(await w.deleteItem('a', { throughSeq: last })).toEqual({ itemId: 'a', deleted: false, throughSeq: step!.lastSeq });
    });
  }

  it('an unguarded retry still deletes the new incarnation (why the guard exists; documented)', async () => {
    const x = experiment();
    const w = await x.newLog('writer');
    const acks = await threeBatches(w, 'a');
    expect((await w.deleteItem('a')).throughSeq).toBe(acks[2]!.lastSeq);
    const [again] = await w.append([createBatch('a')]);
    expect(await w.deleteItem('a')).toEqual({ itemId: 'a', deleted: true, throughSeq: again!.lastSeq });
  });
});

describe('a guarded delete of an item with events the caller did not see', () => {
  it('appends after the seen seq: ConflictError naming the item, the seq given and the last seq; nothing deleted', async () => {
    const x = experiment();
    const w = await x.newLog('writer');
    const acks = await threeBatches(w, 'c');
    const seen = acks[1]!.lastSeq;
    const last = acks[2]!.lastSeq;
    const before = await w.fold('c');
    const e = await w.deleteItem('c', { throughSeq: seen }).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(ConflictError);
    expect(e, 'the same seq again gets the same answer').toMatchObject({ code: 'CONFLICT', retryable: false });
    const msg = (e as Error).message;
    expect([msg.includes('"c"'), msg.includes(`seq ${seen}`), msg.includes(`last seq is ${last}`)], msg).toEqual([true, true, true]);
    expect([await x.tombs(), await x.floors('c')]).toEqual([[], []]);
    expect(await (await x.newLog('reader')).fold('c')).toEqual(before);
    // Having read the item again, the caller deletes what it now saw.
    expect(await w.deleteItem('c', { throughSeq: last })).toEqual({ itemId: 'c', deleted: true, throughSeq: last });
  });
});

describe('bad throughSeq values and options: InvalidInputError, nothing written', () => {
  it('refuses malformed values before writing anything (not even the item marker), and seqs the item never had', async () => {
    const x = experiment();
    const w = await x.newLog('writer');
    const acks = await threeBatches(w, 'b');
    const last = acks[2]!.lastSeq;
    const before = await w.fold('b');
    const marker = await x.marker('b');
    expect(marker).not.toBeNull();
    const malformed: Array<[string, unknown, string]> = [
      ['0', { throughSeq: 0 }, 'throughSeq'],
      ['-1', { throughSeq: -1 }, 'throughSeq'],
      ['1.5', { throughSeq: 1.5 }, 'throughSeq'],
      ['NaN', { throughSeq: Number.NaN }, 'throughSeq'],
      ['Infinity', { throughSeq: Number.POSITIVE_INFINITY }, 'throughSeq'],
      ['beyond safe integers', { throughSeq: 2 ** 53 }, 'throughSeq'],
      ['a string', { throughSeq: String(last) }, 'throughSeq'],
      ['null', { throughSeq: null }, 'throughSeq'],
      ['a misspelt key', { throughseq: last }, 'options.throughseq'],
      ['options not an object', last, 'options'],
      ['options null', null, 'options'],
    ];
    for (const [what, options, field] of malformed) {
      const e = await (w.deleteItem as (id: string, o: unknown) => Promise<unknown>)('b', options).catch((err: unknown) => err);
      expect(e, what).toBeInstanceOf(InvalidInputError);
      expect(e, what).toMatchObject({ code: 'INVALID_INPUT', field });
      expect(await x.marker('b'), `${what}: the marker is untouched`).toBe(marker);
    }
    for (const [what, seq] of [
      ['one beyond the last seq', last + 1],
      ['far beyond', 1_000_000],
    ] as const) {
      const e = await w.deleteItem('b', { throughSeq: seq }).catch((err: unknown) => err);
      expect(e, what).toBeInstanceOf(InvalidInputError);
      expect(e, what).toMatchObject({ code: 'INVALID_INPUT', field: 'throughSeq' });
      expect((e as Error).message, what).toContain(`last visible seq is ${last}`);
    }
    // Never created: no seq to delete through.
    await expect(w.deleteItem('never', { throughSeq: 1 })).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'throughSeq' });
    expect([await x.tombs(), await x.floors('b'), await x.floors('never')]).toEqual([[], [], []]);
    expect(await (await x.newLog('reader')).fold('b')).toEqual(before);
    // Deleted (no visible row): a seq above the deleted one is one it never had.
    await w.deleteItem('b', { throughSeq: last });
    await expect(w.deleteItem('b', { throughSeq: last + 1 })).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'throughSeq' });
    expect(await x.tombs()).toHaveLength(1);
    expect(await x.floors('b')).toEqual([String(last).padStart(12, '0')]);
  });
});

describe('a deleted-seq record without its tombstone (a delete that died between the two PUTs)', () => {
  it('does not count as deleted: the guarded retry deletes; an older, completed delete is still answered as done', async () => {
    const x = experiment({ deletionRetentionMs: 0, versionRetentionMs: 0 });
    const w = await x.newLog('writer');
    const first = await threeBatches(w, 'h');
    const gone = first[2]!.lastSeq;
    expect((await w.deleteItem('h', { throughSeq: gone })).deleted).toBe(true);
    await w.mergeOwnShard();
    expect((await (await x.newLog('maintainer')).maintain()).purgedItems).toBe(1);
    const [again] = await w.append([createBatch('h')]);
    const last = again!.lastSeq;
    // The second delete wrote its record, then died before the tombstone.
    expect(await x.objects.putIfAbsent(`${floorDir('h')}/${String(last).padStart(12, '0')}`, '')).toBe(true);
    expect((await w.fold('h')).lastSeq, 'still visible').toBe(last);
    expect(await w.deleteItem('h', { throughSeq: gone })).toEqual({ itemId: 'h', deleted: false, throughSeq: gone });
    expect((await w.fold('h')).lastSeq).toBe(last);
    expect(await w.deleteItem('h', { throughSeq: last })).toEqual({ itemId: 'h', deleted: true, throughSeq: last });
    await expect((await x.newLog('reader')).fold('h')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
