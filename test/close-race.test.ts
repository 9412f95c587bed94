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
import { tree } from './support/tree.ts';

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

// A log closed before its first append or delete has no writer yet; `getWriter()` made one after
// close, so an append of a new item (no marker: sequencing reads nothing) was acknowledged, took a
// writer slot and started a lease keeper nobody would stop, against api.ts ("Every later call
// fails (INTERNAL: the log is closed)"); a delete wrote the item's marker before its read refused.
describe('a log closed before it ever wrote', () => {
  it('refuses an append of a new item and a delete, and writes nothing', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-closed-unwritten-'));
    const w = await openLog({ root, pipeline: 'p', experiment: 'e' });
    const [ack] = await w.append([createBatch('t')]);
    await w.close();
    // A reader process (never appended), closed.
    const r = await openLog({ root, pipeline: 'p', experiment: 'e', owner: 'reader' });
    expect((await r.fold('t')).lastSeq, 'the check below can fail: it reads while open').toBe(ack!.lastSeq);
    await r.close();
    const before = tree(root);
    const outcomes: Array<[string, unknown]> = [];
    for (const [name, call] of [
      ['append of a new item', () => r.append([createBatch('new-item')])],
      ['deleteItem', () => r.deleteItem('t')],
    ] as const) {
      const got = await call().then(
        (v: unknown) => ({ answered: v }),
        (e: unknown) => ({ code: (e as { code?: string }).code }),
      );
      outcomes.push([name, got]);
    }
    const after = tree(root);
    try {
      expect({ outcomes, written: after.filter((l) => !before.includes(l)) }).toEqual({
        outcomes: [
          ['append of a new item', { code: 'INTERNAL' }],
          ['deleteItem', { code: 'INTERNAL' }],
        ],
        written: [],
      });
    } finally {
      await r.close(); // stops the lease keeper the append started (if it did)
    }
  });
});
