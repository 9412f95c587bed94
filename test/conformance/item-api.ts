/**
 * ONE suite for the item API additions of issue 10 (create-if-missing and item-state error
 * codes, field and latest-event reads, inline bytes, deletion, filtered listings), run on every
 * kind of root like test/conformance/log.ts.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ItemExistsError, ItemNotFoundError, ItemTerminalError } from '../../lib/errors.ts';
import { openLog, type OpenLogOptions } from '../../lib/index.ts';
import type { LanceCheckpointLog } from '../../lib/log/log.ts';
import { LogReader } from '../../lib/log/reader.ts';
import { createBatch, stepBatch } from '../support/batches.ts';
import type { LogTarget } from './log.ts';

export function itemApiConformance(name: string, target: LogTarget): void {
  describe(`item API: ${name}`, () => {
    const open: LanceCheckpointLog[] = [];
    let rootInfo: { root: string; env: Record<string, string> };

    async function newLog(extra: Partial<OpenLogOptions> = {}) {
      const log = await openLog({ root: rootInfo.root, pipeline: 'p', experiment: `e-${randomUUID().slice(0, 6)}`, env: { ...process.env, ...rootInfo.env }, ...extra });
      open.push(log);
      return log;
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
          expect(valueQueries.length).toBeGreaterThan(0);
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
  });
}
