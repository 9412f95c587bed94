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

  it('a late completion of an earlier step leaves a later failed step failed (status, failures(), items(), resume attempt)', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-late-status-'));
    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    try {
      await log.append([createBatch('x')]);
      const abandoned = stepBatch('x', 1);
      await log.append([stepBatch('x', 1, { attempt: 2 })]);
      await log.append([stepBatch('x', 2)]);
      await log.append([{ itemId: 'x', runId: 'r1', step: { name: 'step3', index: 3 }, attempt: 1, failed: { errorType: 'Boom', errorDump: 'boom' } }]);
      await log.append([abandoned]);
      const st = await log.fold('x');
      expect(st.status).toBe('failed');
      expect(st.cursor).toMatchObject({ stepIndex: 2 });
      expect(resumePoint(st)).toMatchObject({ nextStepIndex: 3, attempt: 2 });
      expect((await log.failures()).map((f) => [f.itemId, f.errorType])).toEqual([['x', 'Boom']]);
      expect((await log.items()).items.map((i) => i.status)).toEqual(['failed']);
      // The same through the listing projection maintenance builds.
      await log.close();
      const again = await openLog({ root, pipeline: 'p', experiment: 'e' });
      try {
        await again.maintain();
        expect((await again.items()).items.map((i) => i.status)).toEqual(['failed']);
        expect((await again.failures()).map((f) => f.errorType)).toEqual(['Boom']);
      } finally {
        await again.close();
      }
    } finally {
      await log.close();
    }
  });
});
