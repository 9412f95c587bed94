/**
 * A client that pipelines an item's steps (step 1 and step 2 as two append calls, one worker, as
 * I5 allows) sees step 1 fail UNAVAILABLE (the outcome is unknown) and step 2 acknowledged (it
 * went in the next group commit). Its retry of the very same step-1 batch must be written (or
 * answered duplicate), and the cursor must stay at step 2.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UnavailableError } from '../lib/errors.ts';
import { openLog } from '../lib/index.ts';
import { createBatch, stepBatch } from './support/batches.ts';

describe('retry of a batch whose append failed, after the next step of its item was acknowledged', () => {
  it('is written (or answered duplicate), never INVALID_INPUT', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-rev-retry-'));
    let armed = false;
    let second: Promise<unknown> | null = null;
    const log = await openLog({
      root,
      pipeline: 'p',
      experiment: 'e',
      hooks: {
        beforeCommit: async () => {
          if (!armed) return;
          armed = false;
          // The client's next call (step 2) is queued while step 1's group commit is under way...
          second = log.append([stepBatch('x', 2)]);
          // ...and step 1's commit fails (storage did not answer).
          throw new UnavailableError('storage did not answer');
        },
      },
    });
    try {
      await log.append([createBatch('x')]);
      armed = true;
      const step1 = stepBatch('x', 1);
      const first = await log.append([step1]).then(() => 'acked', (e: unknown) => (e as { code?: string }).code);
      expect(first).toBe('UNAVAILABLE');
      expect(await second).toMatchObject([{ duplicate: false }]);
      const retry = await log.append([step1]).then(() => 'written', (e: unknown) => `${(e as { code?: string }).code}: ${(e as Error).message}`);
      expect(retry).toBe('written');
      expect((await log.fold('x')).cursor).toMatchObject({ stepIndex: 2 });
    } finally {
      await log.close();
    }
  });
});
