/**
 * An un-acked batch sent again is written once or answered duplicate (docs/design/invariants.md:
 * "retrying it (on any writer) is always safe"), also when its item has moved on to a later step
 * meanwhile: an abandoned attempt of step 1 that never landed, delivered again by an
 * at-least-once queue after step 2, is written (the simulation's "redeliver-old" delivery), and
 * the cursor stays at step 2 (lib/step-order.ts).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { resumePoint } from '../lib/resume.ts';
import { createBatch, stepBatch } from './support/batches.ts';

describe('redelivery of a batch that was never written', () => {
  it('an abandoned attempt of step 1, redelivered after step 2, is written or answered (never INVALID_INPUT)', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-rev-redeliver-'));
    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    try {
      await log.append([createBatch('x')]);
      // Step 1, attempt 1: its delivery failed before landing (the client saw UNAVAILABLE) and
      // the client gave it up for attempt 2 (allowed: it cannot still land).
      const abandoned = stepBatch('x', 1);
      await log.append([stepBatch('x', 1, { attempt: 2 })]);
      await log.append([stepBatch('x', 2)]);
      // The queue delivers attempt 1 again.
      const r = await log.append([abandoned]).then((acks) => ({ acks }), (e: unknown) => ({ error: e as Error & { code?: string } }));
      expect('error' in r ? `${r.error.code}: ${r.error.message}` : 'ok').toBe('ok');
      expect((await log.fold('x')).cursor).toMatchObject({ stepIndex: 2 });
    } finally {
      await log.close();
    }
  });

  it('a retried step-1 batch whose first delivery failed is still accepted after step 2 (same iteration)', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-rev-redeliver-'));
    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    try {
      await log.append([createBatch('y', { step: { name: 'load', index: 0, iteration: 1 } })]);
      const late = stepBatch('y', 1, { step: { name: 'step1', index: 1, iteration: 1 }, attempt: 1 });
      await log.append([stepBatch('y', 1, { step: { name: 'step1', index: 1, iteration: 1 }, attempt: 2 })]);
      await log.append([stepBatch('y', 2, { step: { name: 'step2', index: 2, iteration: 1 } })]);
      const r = await log.append([late]).then((acks) => ({ acks }), (e: unknown) => ({ error: e as Error & { code?: string } }));
      expect('error' in r ? `${r.error.code}: ${r.error.message}` : 'ok').toBe('ok');
      expect((await log.fold('y')).cursor).toMatchObject({ stepIndex: 2, iteration: 1 });
    } finally {
      await log.close();
    }
  });

  it('the status follows the log; the cursor of steps without an index follows the log too (items() agrees with fold)', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-step-status-'));
    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    try {
      // A step named only (no index) fails after an indexed one: the item is failed.
      await log.append([createBatch('a')]);
      await log.append([{ itemId: 'a', runId: 'r1', step: { name: 'gen' }, attempt: 1, failed: { errorType: 'Boom', errorDump: 'boom' } }]);
      const a = await log.fold('a');
      expect([a.status, resumePoint(a).attempt]).toEqual(['failed', 2]);
      // Loop steps without an index after an indexed step: the cursor is the latest of them.
      await log.append([createBatch('b')]);
      await log.append([{ itemId: 'b', runId: 'r1', step: { name: 'gen', iteration: 0 }, attempt: 1 }]);
      expect((await log.fold('b')).cursor).toMatchObject({ stepName: 'gen', iteration: 0 });
      await log.append([{ itemId: 'b', runId: 'r1', step: { name: 'gen', iteration: 1 }, attempt: 1, failed: { errorType: 'Boom', errorDump: 'boom' } }]);
      const b = await log.fold('b');
      expect([b.status, b.cursor?.iteration]).toEqual(['failed', 0]);
      for (const listing of [await log.items()]) {
        expect(listing.items.map((i) => [i.itemId, i.status, i.cursor?.stepName ?? null])).toEqual([
          ['a', 'failed', a.cursor?.stepName ?? null],
          ['b', 'failed', 'gen'],
        ]);
      }
      await log.close();
      // The same through the listing projection maintenance builds.
      const again = await openLog({ root, pipeline: 'p', experiment: 'e' });
      try {
        await again.maintain();
        expect((await again.items()).items.map((i) => [i.itemId, i.status, i.cursor?.stepName ?? null])).toEqual([
          ['a', 'failed', a.cursor?.stepName ?? null],
          ['b', 'failed', 'gen'],
        ]);
      } finally {
        await again.close();
      }
    } finally {
      await log.close();
    }
  });
});
