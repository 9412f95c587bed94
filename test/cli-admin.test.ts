/**
 * `dgcl drop` and `dgcl copy`, run in-process on real logs in a temp folder: what they print,
 * their exit codes, and that a refusal (or a drop without --yes) changes nothing.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SLOTS } from '../lib/lease/slots.ts';
import { run } from './support/cli.ts';
import { tree } from './support/tree.ts';

for (const k of ['DGCL_ROOT', 'DGCL_PIPELINE', 'DGCL_EXPERIMENT', 'DGCL_LEASE_TABLE']) delete process.env[k];

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const lines = (...objs: unknown[]) => objs.map((o) => JSON.stringify(o)).join('\n') + '\n';
const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3, 255]);

/** A root with one log (p/e) of two items, one with a blob. */
async function rootWithLog(): Promise<{ root: string; flags: string[] }> {
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-cli-admin-'));
  dirs.push(root);
  const flags = ['--root', root, '--pipeline', 'p', '--experiment', 'e'];
  const r = await run(['append', ...flags], {
    stdin: lines(
      { itemId: 'doc-1', runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { prompt: 'hi', image: { $blob: png.toString('base64') } } },
      { itemId: 'doc-2', runId: 'r', create: {}, step: { name: 'load', index: 0 }, terminal: 'completed' },
    ),
  });
  expect(r.code, r.stderr).toBe(0);
  return { root, flags };
}

const files = (dir: string) => tree(dir).filter((l) => !l.endsWith('/')).length;

describe('dgcl drop', () => {
  it('without --yes prints what it would delete, exits 2 and deletes nothing', async () => {
    const { root, flags } = await rootWithLog();
    const before = tree(root);
    const r = await run(['drop', ...flags]);
    expect(r.code).toBe(2);
    expect(r.stdout).toContain(`dgcl drop would delete the log at ${path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance')}:`);
    expect(r.stdout).toContain(`first it takes ${DEFAULT_SLOTS} writer slot leases and the maintainer lease`);
    expect(r.stderr).toBe('dgcl: drop deletes the log for good: run it again with --yes to delete it\n');
    expect(tree(root)).toEqual(before);
  });

  it('with --yes deletes the log and prints its counts; again, there is nothing to drop (exit 0)', async () => {
    const { root, flags } = await rootWithLog();
    const objects = files(path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance'));
    const r = await run(['drop', ...flags, '--yes', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ objects, records: 0, leases: DEFAULT_SLOTS + 1 });
    expect(existsSync(path.join(root, 'datagen_checkpoints', 'p', 'e'))).toBe(false);
    expect((await run(['items', ...flags])).code, 'the log is gone').toBe(66);

    const again = await run(['drop', ...flags, '--yes']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe(`nothing to drop at ${path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance')}`);
    const dry = await run(['drop', ...flags]);
    expect([dry.code, dry.stdout]).toEqual([0, again.stdout]);
  });
});

describe('dgcl copy', () => {
  it('copies the events to another experiment and prints the counts', async () => {
    const { root, flags } = await rootWithLog();
    const r = await run(['copy', ...flags, '--to-experiment', 'e2', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const counts = JSON.parse(r.stdout);
    expect(Object.keys(counts)).toEqual(['events', 'items', 'bytes']);
    const source = await run(['trajectory', ...flags, '--item', 'doc-1', '--json']);
    const doc2 = await run(['trajectory', ...flags, '--item', 'doc-2', '--json']);
    const events = source.stdout.split('\n').length + doc2.stdout.split('\n').length;
    expect(counts).toMatchObject({ events, items: 2 });
    expect(counts.bytes).toBeGreaterThanOrEqual(png.length);
    const to = ['--root', root, '--pipeline', 'p', '--experiment', 'e2'];
    expect((await run(['trajectory', ...to, '--item', 'doc-1', '--json'])).stdout).toBe(source.stdout);
    expect((await run(['blob', ...to, '--item', 'doc-1', '--field', 'image'])).bytes).toEqual(png);
  });

  it('refuses the source itself, a target that exists and a missing source, writing nothing', async () => {
    const { root, flags } = await rootWithLog();
    const other = mkdtempSync(path.join(tmpdir(), 'dgcl-cli-admin-'));
    dirs.push(other);
    const before = tree(root);
    const same = await run(['copy', ...flags]);
    expect([same.code, same.stderr]).toEqual([2, expect.stringContaining('INVALID_INPUT: to: the copy\'s target is its source')]);
    expect((await run(['copy', ...flags, '--to-root', other])).code).toBe(0);
    const otherTree = tree(other);
    const exists = await run(['copy', ...flags, '--to-root', other]);
    expect([exists.code, exists.stderr]).toEqual([2, expect.stringContaining('exists')]);
    const missing = await run(['copy', '--root', root, '--pipeline', 'p', '--experiment', 'nope', '--to-experiment', 'e3']);
    expect([missing.code, missing.stderr]).toEqual([66, expect.stringContaining('LOG_NOT_FOUND')]);
    expect(tree(root)).toEqual(before);
    expect(tree(other)).toEqual(otherTree);
  });
});
