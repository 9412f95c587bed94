/**
 * ONE suite for the item API additions of issue 10 (create-if-missing and item-state error
 * codes, field and latest-event reads, inline bytes, deletion, filtered listings), run on every
 * kind of root like test/conformance/log.ts.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ItemExistsError, ItemNotFoundError, ItemTerminalError } from '../../lib/errors.ts';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { openLog, type OpenLogOptions } from '../../lib/index.ts';
import { lanceStorageOptions, logUri, parseRoot } from '../../lib/storage/location.ts';
import type { CheckpointLog } from '../../lib/api.ts';
import { LogReads } from '../../lib/log/reads.ts';
import { LogReader } from '../../lib/log/read/reader.ts';
import { createBatch, stepBatch } from '../support/batches.ts';
import type { LogTarget } from './log.ts';

export function itemApiConformance(name: string, target: LogTarget): void {
  describe(`item API: ${name}`, () => {
    const open: CheckpointLog[] = [];
    let rootInfo: { root: string; env: Record<string, string> };

    async function newLog(extra: Partial<OpenLogOptions> = {}) {
      const log = await openLog({ root: rootInfo.root, pipeline: 'p', experiment: `e-${randomUUID().slice(0, 6)}`, env: { ...process.env, ...rootInfo.env }, ...extra });
      open.push(log);
      return log;
    }

    /**
     * Rows matching `filter` in every Lance dataset of the experiment, opened with Lance
     * directly (the base and every shard generation folder there is, listed or not).
     */
    async function rawRows(experiment: string, filter: string): Promise<Record<string, number>> {
      const root = parseRoot(rootInfo.root);
      const uri = logUri(root, 'p', experiment);
      const storageOptions = lanceStorageOptions(root, { ...process.env, ...rootInfo.env });
      const out: Record<string, number> = {};
      const parent = await lancedb.connect(uri.slice(0, uri.lastIndexOf('/')), { storageOptions });
      out.base = (await parent.tableNames()).includes('log') ? await (await parent.openTable('log')).countRows(filter) : 0;
      const shards = await lancedb.connect(`${uri}/_dgcl/shards`, { storageOptions });
      for (const name of await shards.tableNames()) out[name] = await (await shards.openTable(name)).countRows(filter);
      return out;
    }

    /** Local roots: files under the log folder whose bytes contain `needle`. */
    function filesContaining(experiment: string, needle: string): string[] {
      const root = parseRoot(rootInfo.root);
      if (root.kind !== 'file') return [];
      const dir = path.join(root.dir, 'datagen_checkpoints', 'p', experiment, 'log.lance');
      const hits: string[] = [];
      const walk = (d: string) => {
        for (const f of readdirSync(d)) {
          const p = path.join(d, f);
          if (statSync(p).isDirectory()) walk(p);
          else if (readFileSync(p).includes(needle)) hits.push(path.relative(dir, p));
        }
      };
      walk(dir);
      return hits;
    }

    afterEach(async () => {
      for (const l of open.splice(0)) await l.close().catch(() => undefined);
    });

    it('create "ifMissing" creates once, then applies the rest; item-state refusals have their own codes and write nothing', async () => {
      rootInfo = await target.newRoot();
      const log = await newLog();
      const b = { itemId: 'm', runId: 'r', create: 'ifMissing', step: { name: 'load', index: 0 }, set: { x: 1 } };
      const [first] = await log.append([b]);
      expect(first).toMatchObject({ firstSeq: 1, lastSeq: 3, duplicate: false });
      const [again] = await log.append([b]);
      expect(again).toEqual({ ...first, duplicate: true });
      const next = { ...b, step: { name: 'gen', index: 1 }, set: { x: 2 } };
      const [applied] = await log.append([next]);
      expect(applied).toMatchObject({ firstSeq: 4, lastSeq: 5, duplicate: false });
      expect(applied!.eventIds).toHaveLength(2);
      const s = await log.fold('m');
      expect([s.fields.x, s.cursor?.stepName, s.lastSeq, s.violations]).toEqual([2, 'gen', 5, []]);
      const before = await log.trajectory('m');

      const refusals = [
        [createBatch('m'), ItemExistsError, 'ITEM_EXISTS', 'create'],
        [stepBatch('ghost', 1), ItemNotFoundError, 'ITEM_NOT_FOUND', 'itemId'],
      ] as const;
      for (const [batch, cls, code, field] of refusals) {
        const e = await log.append([batch]).catch((x: unknown) => x);
        expect(e).toBeInstanceOf(cls);
        expect(e).toMatchObject({ code, field, retryable: false });
      }
      await log.append([stepBatch('m', 2, { terminal: 'completed' })]);
      const e = await log.append([stepBatch('m', 3)]).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ItemTerminalError);
      expect(e).toMatchObject({ code: 'ITEM_TERMINAL', itemId: 'm' });
      const traj = await log.trajectory('m');
      expect(traj.slice(0, before.length)).toEqual(before);
      expect(traj.at(-1)!.eventType).toBe('TERMINAL');
      await expect(log.fold('ghost')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    });

    it('reads selected fields by name or prefix, and the latest events, from those rows only; small blobs inline', async () => {
      rootInfo = await target.newRoot();
      const log = await newLog({ mergeEveryCommits: 1000 });
      const small = Buffer.from('tiny bytes');
      const big = Buffer.alloc(5000, 7);
      const b64 = (b: Buffer) => ({ $blob: b.toString('base64') });
      await log.append([createBatch('x', { set: { 'ch.a': 1, 'ch.b': { k: [1, 2] }, other: 'o'.repeat(1000), small: b64(small), big: b64(big) } })]);
      await log.append([{ itemId: 'x', runId: 'r1', step: { name: 's1', index: 1 }, set: { 'ch.a': 2 }, append: { parts: [b64(Buffer.from('p1')), b64(Buffer.from('p2'))] } }]);
      for (let i = 2; i <= 6; i++) await log.append([stepBatch('x', i)]);
      await log.append([createBatch('y', { set: { 'ch.a': 'not x' } })]);

      for (const phase of ['in a shard', 'merged']) {
        if (phase === 'merged') {
          const rows = (await log.trajectory('x')).length + (await log.trajectory('y')).length;
          expect((await log.mergeOwnShard()).mergedRows).toBe(rows);
        }
        const full = await log.fold('x');
        const traj = await log.trajectory('x');
        const spy = vi.spyOn(LogReader.prototype, 'scanListing');
        try {
          expect((await log.fields('x', { names: ['other'] })).fields, phase).toEqual({ other: full.fields.other });
          expect((await log.fields('x', { prefix: 'ch.' })).fields, phase).toEqual({ 'ch.a': 2, 'ch.b': { k: [1, 2] } });
          expect((await log.fields('x', { names: ['out3'], prefix: 'ch.' })).fields, phase).toEqual({ 'ch.a': 2, 'ch.b': { k: [1, 2] }, out3: 'result 3 of x' });
          expect((await log.fields('x', { names: [] })).fields).toEqual({});
          expect((await log.fields('x', { names: ['nope'] })).fields).toEqual({});
          // every query named the item and, for values, the fields
          for (const [, filter, columns] of spy.mock.calls) {
            expect(filter).toContain(`item_id = 'x'`);
            if (columns.includes('value_str')) expect(filter).toMatch(/field_name IN|starts_with\(field_name|false/);
          }
          spy.mockClear();
          const latest = await log.latestEvents('x', { limit: 3 });
          expect(latest, phase).toEqual(traj.slice(-3));
          // the values read are those of the events at or above the third newest seq
          const valueQueries = spy.mock.calls.filter(([, , columns]) => columns.includes('value_str'));
          // One query of the value columns: the rows of the window, nothing before it.
          expect(valueQueries).toHaveLength(1);
          for (const [, filter] of valueQueries) expect(filter).toContain(`item_seq >= ${traj.at(-3)!.itemSeq}`);
        } finally {
          spy.mockRestore();
        }
        expect((await log.fields('x')).fields, phase).toEqual(full.fields);
        const steps = traj.filter((e) => e.eventType === 'STEP_COMPLETED');
        expect(await log.latestEvents('x', { limit: 2, eventTypes: ['STEP_COMPLETED'] })).toEqual(steps.slice(-2));
        expect(await log.latestEvents('x', { limit: 2, eventTypes: ['STEP_COMPLETED'], beforeSeq: steps.at(-2)!.itemSeq })).toEqual(steps.slice(-4, -2));
        expect(await log.latestEvents('x', { limit: 10_000 })).toEqual(traj);
        expect(await log.latestEvents('x', { limit: 5, eventTypes: ['TERMINAL'] })).toEqual([]);

        // blobs: up to inlineBytes as bytes, larger ones as refs, elements of appended lists too
        const inl = await log.fields('x', { names: ['small', 'big', 'parts'], inlineBytes: 100 });
        expect(Buffer.from(inl.fields.small as Uint8Array).equals(small)).toBe(true);
        expect(inl.fields.big).toEqual(full.fields.big);
        expect((inl.fields.parts as Uint8Array[]).map((p) => Buffer.from(p).toString())).toEqual(['p1', 'p2']);
        const allInline = await log.fields('x', { names: ['big'], inlineBytes: 5000 });
        expect(Buffer.from(allInline.fields.big as Uint8Array).equals(big)).toBe(true);
        const ev = await log.latestEvents('x', { limit: 1000, eventTypes: ['FIELD_SET', 'FIELD_APPEND'], inlineBytes: 16 });
        const byField = (f: string) => ev.filter((e) => e.fieldName === f).map((e) => e.value);
        expect(byField('small').map((v) => Buffer.from(v as Uint8Array).toString())).toEqual(['tiny bytes']);
        expect(byField('big')).toEqual([full.fields.big]);
      }

      await expect(log.fields('ghost', { names: ['a'] })).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(log.latestEvents('ghost', { limit: 1 })).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(log.latestEvents('ghost', { limit: 1, eventTypes: ['FAILED'] })).rejects.toMatchObject({ code: 'NOT_FOUND' });
      for (const [call, field] of [
        [() => log.latestEvents('x', { limit: 0 }), 'limit'],
        [() => log.latestEvents('x', { limit: 1, eventTypes: ['NOPE' as never] }), 'eventTypes'],
        [() => log.latestEvents('x', { limit: 1, beforeSeq: 0 }), 'beforeSeq'],
        [() => log.fields('x', { inlineBytes: 1e12 }), 'inlineBytes'],
        [() => log.fields('x', { prefix: '' }), 'prefix'],
        [() => log.fields('', {}), 'itemId'],
      ] as const) {
        await expect(call(), field).rejects.toMatchObject({ code: 'INVALID_INPUT', field });
      }
    });

    it('deleting an item hides it from every read at once; maintenance purges its rows from every data file; the id can be created again', async () => {
      rootInfo = await target.newRoot();
      const experiment = `e-del-${randomUUID().slice(0, 6)}`;
      const secret = `SECRET-${randomUUID()}`;
      const opts = { experiment, deletionRetentionMs: 0, versionRetentionMs: 0, mergeEveryCommits: 1000 };
      const w = await newLog({ ...opts, owner: 'writer' });
      const keepBatches = [createBatch('keep', { set: { note: 'stays' } }), stepBatch('keep', 1)];
      await w.append([createBatch('gone', { set: { secret, img: { $blob: Buffer.from(secret).toString('base64') } } }), keepBatches[0]!]);
      await w.append([stepBatch('gone', 1)]);
      await w.mergeOwnShard(); // rows of the item in the base ...
      await w.append([stepBatch('gone', 2, { failed: { errorType: 'E', traceback: secret } }), keepBatches[1]!]); // ... and in a shard
      const r = await newLog({ experiment, owner: 'reader' });
      const before = await r.fold('gone');
      const blobRef = (before.fields.img as { $blobRef: { eventId: string } }).$blobRef;
      const keepBefore = await r.trajectory('keep');

      // the check below can fail: before the purge the rows and their bytes are there
      const everywhere = `item_id = 'gone'`;
      expect(Object.values(await rawRows(experiment, everywhere)).reduce((a, b) => a + b, 0)).toBe(before.lastSeq);
      if (parseRoot(rootInfo.root).kind === 'file') expect(filesContaining(experiment, secret).length).toBeGreaterThan(1);

      const del = await w.deleteItem('gone');
      expect(del).toEqual({ itemId: 'gone', deleted: true, throughSeq: before.lastSeq });
      expect(await w.deleteItem('gone')).toEqual({ itemId: 'gone', deleted: false, throughSeq: before.lastSeq });
      await expect(w.deleteItem('never')).resolves.toEqual({ itemId: 'never', deleted: false, throughSeq: 0 });
      const hidden = async (log: CheckpointLog, phase: string) => {
        for (const [what, call] of [
          ['fold', () => log.fold('gone')],
          ['trajectory', () => log.trajectory('gone')],
          ['fields', () => log.fields('gone')],
          ['latestEvents', () => log.latestEvents('gone', { limit: 5 })],
          ['blob', () => log.blob('gone', 'img')],
          ['loadBlob', () => log.loadBlob(blobRef.eventId)],
        ] as const) {
          await expect(call(), `${what} ${phase}`).rejects.toMatchObject({ code: 'NOT_FOUND' });
        }
        expect((await log.items()).items.map((i) => i.itemId), phase).toEqual(['keep']);
        expect(await log.failures(), phase).toEqual([]);
        expect((await log.allStates()).map((s) => s.itemId), phase).toEqual(['keep']);
        expect(await log.trajectory('keep'), phase).toEqual(keepBefore);
      };
      await hidden(r, 'after the delete');
      await hidden(w, 'after the delete, through the deleting log');
      const other = await newLog({ experiment, owner: 'other-writer' });
      await expect(other.append([stepBatch('gone', 3)])).rejects.toMatchObject({ code: 'ITEM_NOT_FOUND' });
      // rows in a live writer's shard: the purge waits for its merge
      const waiting = await (await newLog({ ...opts, owner: 'm-early' })).maintain();
      expect([waiting.purgedItems, waiting.pendingDeletions, waiting.failures]).toEqual([0, 1, []]);
      await hidden(r, 'after maintenance that had to wait');
      await w.mergeOwnShard();
      await hidden(r, 'after a merge');

      // maintenance while no generation holds the rows, but before the retention: nothing purged
      const early = await (await newLog({ ...opts, owner: 'm0', deletionRetentionMs: 3_600_000 })).maintain();
      expect([early.purgedItems, early.pendingDeletions, early.failures]).toEqual([0, 1, []]);
      await hidden(r, 'after maintenance within the retention');

      // created again (the same batch as the first time): new seqs after the deleted ones, new ids
      const [again] = await other.append([createBatch('gone')]);
      expect(again).toMatchObject({ firstSeq: del.throughSeq + 1, duplicate: false });
      expect(again!.eventIds.some((id) => before.cursor!.checkpointId === id)).toBe(false);
      expect((await other.append([createBatch('gone')]))[0]).toEqual({ ...again, duplicate: true });
      const reborn = await r.fold('gone');
      expect([reborn.status, reborn.lastSeq, reborn.fields.secret, reborn.failures, reborn.violations]).toEqual(['in_progress', again!.lastSeq, undefined, [], []]);
      expect((await r.trajectory('gone')).map((e) => e.itemSeq)).toEqual(again!.eventIds.map((_, i) => again!.firstSeq + i));
      // the old incarnation's ack is not answered as a duplicate of the new one
      const [s1] = await other.append([stepBatch('gone', 1)]);
      expect(s1).toMatchObject({ firstSeq: again!.lastSeq + 1, duplicate: false });
      const kept = await r.fold('gone');

      const m = await newLog({ ...opts, owner: 'maintainer' });
      const report = await m.maintain();
      expect([report.purgedItems, report.pendingDeletions, report.failures]).toEqual([1, 0, []]);
      const doomed = `item_id = 'gone' AND item_seq <= ${del.throughSeq}`;
      const left = await rawRows(experiment, doomed);
      expect(Object.values(left).reduce((a, b) => a + b, 0), JSON.stringify(left)).toBe(0);
      expect(left.base).toBe(0);
      expect(Object.values(await rawRows(experiment, `item_id = 'keep'`)).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(keepBefore.length);
      expect(filesContaining(experiment, secret)).toEqual([]);
      expect(await r.fold('gone')).toEqual(kept);
      expect(await r.trajectory('keep')).toEqual(keepBefore);
      // the tombstone is gone; the re-created item goes on
      expect((await m.maintain()).pendingDeletions).toBe(0);
      const [s2] = await other.append([stepBatch('gone', 2)]);
      expect(s2!.firstSeq).toBe(kept.lastSeq + 1);
      expect((await r.fold('gone')).violations).toEqual([]);
    });

    it('a purged item keeps its deleted seqs: a retried delete answers them, a re-creation continues after them with new ids', async () => {
      rootInfo = await target.newRoot();
      const experiment = `e-floor-${randomUUID().slice(0, 6)}`;
      const opts = { experiment, deletionRetentionMs: 0, versionRetentionMs: 0 };
      const w = await newLog({ ...opts, owner: 'writer' });
      const [first] = await w.append([createBatch('p', { set: { v: 1 } })]);
      await w.append([stepBatch('p', 1)]);
      await w.mergeOwnShard();
      const del = await w.deleteItem('p');
      expect(del.deleted).toBe(true);
      const m = await newLog({ ...opts, owner: 'maintainer' });
      expect((await m.maintain()).purgedItems).toBe(1);
      expect((await m.maintain()).pendingDeletions, 'the tombstone is dropped after the purge').toBe(0);
      // The delete's answer was lost and it is retried after the purge: it still names what it deleted.
      expect(await w.deleteItem('p')).toEqual({ itemId: 'p', deleted: false, throughSeq: del.throughSeq });
      // The same first batch again: a new incarnation after the deleted seqs, with ids of its own.
      const other = await newLog({ ...opts, owner: 'other' });
      const [again] = await other.append([createBatch('p', { set: { v: 1 } })]);
      expect(again).toMatchObject({ firstSeq: del.throughSeq + 1, duplicate: false });
      expect(again!.eventIds.filter((id) => first!.eventIds.includes(id))).toEqual([]);
      // Deleted and purged once more: the next incarnation continues after the second one.
      await other.mergeOwnShard();
      const del2 = await other.deleteItem('p');
      expect(del2).toEqual({ itemId: 'p', deleted: true, throughSeq: again!.lastSeq });
      expect((await m.maintain()).purgedItems).toBe(1);
      const [third] = await w.append([createBatch('p', { set: { v: 1 } })]);
      expect(third).toMatchObject({ firstSeq: del2.throughSeq + 1, duplicate: false });
      expect((await m.fold('p')).violations).toEqual([]);
    });

    it('lists items filtered by root, parent and query tags, paged, aggregating only the page', async () => {
      rootInfo = await target.newRoot();
      const log = await newLog({ mergeEveryCommits: 1000 });
      const child = (id: string, root: string, parent: string, tags?: Record<string, unknown>) => ({
        itemId: id,
        runId: 'r',
        create: { rootItemId: root, parentItemId: parent },
        step: { name: 'load', index: 0 },
        ...(tags ? { queryTags: tags } : {}),
      });
      await log.append([
        createBatch('root-a', { queryTags: { model: 'm1', lang: 'en' } }),
        createBatch('root-b', { queryTags: { model: 'm2' } }),
        child('a-1', 'root-a', 'root-a', { model: 'm1' }),
        child('a-2', 'root-a', 'root-a', { model: 'm2', lang: 'en' }),
        child('a-1-x', 'root-a', 'a-1', { model: 'm1', nested: { model: 'm1' } }),
        child('b-1', 'root-b', 'root-b'),
      ]);
      await log.mergeOwnShard(); // some rows in the base, some in a shard
      // a later batch's tags replace earlier values: a-2 moves to m1, a-1 to m3
      await log.append([stepBatch('a-2', 1, { queryTags: { model: 'm1' } }), stepBatch('a-1', 1, { queryTags: { model: 'm3' } })]);
      await log.append([stepBatch('a-1-x', 1, { failed: { errorType: 'E' } })]);
      const ids = async (q: Parameters<CheckpointLog['items']>[0]) => (await log.items(q)).items.map((i) => i.itemId);

      expect(await ids({ rootItemId: 'root-a' })).toEqual(['a-1', 'a-1-x', 'a-2', 'root-a']);
      expect(await ids({ parentItemId: 'root-a' })).toEqual(['a-1', 'a-2']);
      expect(await ids({ parentItemId: 'a-1' })).toEqual(['a-1-x']);
      expect(await ids({ tags: { model: 'm1' } })).toEqual(['a-1-x', 'a-2', 'root-a']);
      expect(await ids({ tags: { model: 'm1', lang: 'en' } })).toEqual(['a-2', 'root-a']);
      expect(await ids({ tags: { nested: { model: 'm1' } } })).toEqual(['a-1-x']);
      expect(await ids({ tags: { model: 'm3' }, rootItemId: 'root-a' })).toEqual(['a-1']);
      expect(await ids({ tags: { model: 'nope' } })).toEqual([]);
      expect(await ids({ rootItemId: 'root-a', status: 'failed' })).toEqual(['a-1-x']);
      expect(await ids({ rootItemId: 'root-a', tags: { model: 'm1' }, status: 'in_progress' })).toEqual(['a-2', 'root-a']);

      // pages: the same items as one listing, in order, `next` only while more follow
      const all = (await log.items()).items;
      // (page sizes 1 and 2 also make the first-ids pass drop ids above its bound: it holds 2n)
      for (const q of [{}, { rootItemId: 'root-a' }, { tags: { model: 'm1' } }, { status: 'in_progress' as const }]) {
        const expected = (await log.items(q)).items;
        for (const limit of [1, 2, 4]) {
          const got = [];
          let after: string | undefined;
          for (let n = 0; n < 10; n++) {
            const page = await log.items({ ...q, limit, ...(after !== undefined ? { after } : {}) });
            expect(page.items.length).toBeLessThanOrEqual(limit);
            got.push(...page.items);
            if (!page.next) break;
            after = page.next;
          }
          expect(got, `${JSON.stringify(q)} limit ${limit}`).toEqual(expected);
        }
      }
      expect(all.map((i) => i.itemId)).toEqual(['a-1', 'a-1-x', 'a-2', 'b-1', 'root-a', 'root-b']);
      // a page without a status filter aggregates only its own items
      const spy = vi.spyOn(LogReads.prototype, 'aggregates');
      try {
        const page = await log.items({ limit: 2, after: 'a-1' });
        expect(page).toEqual({ items: all.slice(1, 3), next: 'a-2' });
        expect(spy.mock.calls.map((c) => c[0])).toEqual([`item_id > 'a-1' AND item_id <= 'a-2'`]);
        // the last page has no upper bound
        spy.mockClear();
        expect(await log.items({ limit: 1001, after: 'a-1' })).toEqual({ items: all.slice(1) });
        expect(spy.mock.calls.map((c) => c[0])).toEqual([`item_id > 'a-1'`]);
      } finally {
        spy.mockRestore();
      }
      // a deleted item is not listed under any filter
      await log.deleteItem('a-2');
      expect(await ids({ tags: { model: 'm1' } })).toEqual(['a-1-x', 'root-a']);
      expect(await ids({ parentItemId: 'root-a', limit: 5 })).toEqual(['a-1']);
      for (const [q, field] of [
        [{ rootItemId: '' }, 'rootItemId'],
        [{ tags: {} }, 'tags'],
        [{ tags: { k: Number.NaN } }, 'tags.k'],
        [{ limit: 0 }, 'limit'],
      ] as const) {
        await expect(log.items(q as never), field).rejects.toMatchObject({ code: 'INVALID_INPUT', field });
      }
    });

    it('after the purge no file of the log holds a deleted item id that was indexed (the item_id index is rebuilt)', async () => {
      rootInfo = await target.newRoot();
      const experiment = `e-idx-${randomUUID().slice(0, 6)}`;
      const doomedId = `person-${randomUUID()}`;
      const opts = { experiment, deletionRetentionMs: 0, versionRetentionMs: 0 };
      const w = await newLog({ ...opts, owner: 'w' });
      for (let i = 0; i < 4; i++) await w.append([createBatch(`k${i}`)]);
      await w.append([createBatch(doomedId)]);
      await w.close();
      const m = await newLog({ ...opts, owner: 'm' });
      expect((await m.maintain()).indexes).toContain('item_id_idx');
      if (parseRoot(rootInfo.root).kind === 'file') expect(filesContaining(experiment, doomedId).length).toBeGreaterThan(1);
      const d = await newLog({ ...opts, owner: 'd' });
      expect((await d.deleteItem(doomedId)).deleted).toBe(true);
      await d.close();
      const report = await m.maintain();
      expect([report.purgedItems, report.failures]).toEqual([1, []]);
      expect(filesContaining(experiment, doomedId)).toEqual([]);
      expect(Object.values(await rawRows(experiment, `item_id = ${JSON.stringify(doomedId).replace(/"/g, "'")}`)).reduce((a, b) => a + b, 0)).toBe(0);
      expect((await m.items()).items.map((i) => i.itemId)).toEqual(['k0', 'k1', 'k2', 'k3']);
      expect((await m.fold('k2')).fields.prompt).toBe('about k2');
      expect((await m.stats()).base.indexes).toContain('item_id_idx');
    });
  });
}
