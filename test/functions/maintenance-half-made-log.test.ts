/**
 * A log whose `log.lance` folder exists but whose meta folder shows nothing yet: a first writer
 * that took its slot and put its item markers (coordination store inside log.lance) but died (or
 * is still working) before its first generation's marker. The scheduled maintenance picks
 * experiments by their `log.lance` folder; maintain() of that log must not fail the run (which
 * would fail again on every run until someone writes there): it reports that there is nothing yet
 * and creates nothing.
 */
import './support/env.ts';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { handler as maintenanceHandler, type MaintenanceResult } from '../../functions/maintenance.ts';
import { logCache } from '../../functions/shared/logs.ts';
import { openLog } from '../../lib/index.ts';
import { createBatch, ctx, freshFileRoot } from './support/fixtures.ts';

const maintenance = maintenanceHandler as unknown as (event: unknown, context: ReturnType<typeof ctx>) => Promise<MaintenanceResult>;

afterAll(async () => {
  await logCache.closeAll();
});

describe('scheduled maintenance and a first write that did not get far', () => {
  it('the run passes (the half-made experiment has nothing to maintain)', async () => {
    const dir = freshFileRoot();
    const ok = await openLog({ root: process.env.DGCL_ROOT!, pipeline: 'p', experiment: 'fine' });
    await ok.append([createBatch('a')]);
    await ok.close();
    // The first writer of p/new: slot taken, markers put, then its commit never happens (it
    // crashes here: the log object is never closed, as after a SIGKILL).
    const w = await openLog({
      root: process.env.DGCL_ROOT!,
      pipeline: 'p',
      experiment: 'new',
      hooks: {
        beforeCommit: () => {
          throw new Error('killed');
        },
      },
    });
    await w.append([createBatch('b')]).catch(() => undefined);
    expect(existsSync(path.join(dir, 'datagen_checkpoints', 'p', 'new', 'log.lance'))).toBe(true);
    const res = await maintenance({}, ctx('maintenance', 900_000)).then(
      (r) => r.summary,
      (e: unknown) => `${(e as Error).name}: ${(e as Error).message}`,
    );
    expect(res).toMatchObject({ failed: 0 });
    const entry = (await maintenance({ pipeline: 'p', experiment: 'new' }, ctx('maintenance', 900_000))).experiments[0];
    expect(entry).toMatchObject({ experiment: 'p/new', ran: false, empty: true, failures: [] });
  });
});
