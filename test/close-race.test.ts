/**
 * An append called before close() is served (close(): "Serves the appends queued before it"),
 * also while the log object's first append still checks that the base reads: the append is
 * queued at once and the check runs in the writer's loop, which close() waits for.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { createBatch } from './support/batches.ts';

describe('append called right before close()', () => {
  it('is served on a new log (no base yet)', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-rev-close-'));
    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    const p = log.append([createBatch('a')]);
    const c = log.close();
    const r = await p.then((acks) => ({ acks }), (e: unknown) => ({ error: e as Error }));
    await c;
    expect('error' in r ? `${r.error.name}: ${r.error.message}` : 'ok').toBe('ok');
  });

  it('is served on a log whose base exists (first append of this log object)', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-rev-close-'));
    const first = await openLog({ root, pipeline: 'p', experiment: 'e' });
    await first.append([createBatch('a')]);
    await first.maintain();
    await first.close();
    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    const p = log.append([createBatch('b')]);
    const c = log.close();
    const r = await p.then((acks) => ({ acks }), (e: unknown) => ({ error: e as Error }));
    await c;
    expect('error' in r ? `${r.error.name}: ${r.error.message}` : 'ok').toBe('ok');
  });
});
