/**
 * ONE suite for the item API additions of issue 10 (create-if-missing and item-state error
 * codes, field and latest-event reads, inline bytes, deletion, filtered listings), run on every
 * kind of root like test/conformance/log.ts.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { ItemExistsError, ItemNotFoundError, ItemTerminalError } from '../../lib/errors.ts';
import { openLog, type OpenLogOptions } from '../../lib/index.ts';
import type { LanceCheckpointLog } from '../../lib/log/log.ts';
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
  });
}
