/**
 * `dgcl fork` run in-process (`main(argv)`) on a real log in a temp folder: a `--where` cohort
 * forked from a step name, its lineage in `fold` and `items --json`, the same fork again exit 0
 * writing nothing, `--items` from a step index into a target holding another fork exit 2, and
 * bad usage refused before a log is opened.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { run } from './support/cli.ts';

for (const k of ['DGCL_ROOT', 'DGCL_PIPELINE', 'DGCL_EXPERIMENT']) delete process.env[k];

const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-fork-cli-'));
const root = path.join(dir, 'root');
const flags = ['--root', root, '--pipeline', 'p'];
const step = (itemId: string, name: string, index: number, extra: Record<string, unknown> = {}) => ({ itemId, runId: 'r', step: { name, index }, set: { [`${name}_out`]: itemId }, ...extra });

beforeAll(async () => {
  const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
  for (const id of ['a', 'b', 'c']) {
    await log.append([step(id, 'gen', 0, { create: {}, set: { model: id === 'c' ? 'small' : 'big' } })]);
    await log.append([step(id, 'judge', 1)]);
  }
  await log.close();
});

describe('dgcl fork', () => {
  it('forks a --where cohort from a step name; lineage in fold and items --json; the same fork again is exit 0 and writes nothing', async () => {
    const r = await run(['fork', ...flags, '--experiment', 'e', '--where', 'model = big', '--from-step', 'judge', '--to-experiment', 'f', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const res = JSON.parse(r.stdout) as { items: number; events: number; keptEvents: number; unchanged: boolean };
    expect(res).toMatchObject({ items: 2, unchanged: false, events: res.keptEvents + 2 });
    const items = await run(['items', ...flags, '--experiment', 'f', '--json']);
    expect(items.code, items.stderr).toBe(0);
    const listed = items.stdout.split('\n').map((l) => JSON.parse(l) as { itemId: string; cursor: { stepName: string }; forkedFrom: { experiment: string; itemId: string } });
    expect(listed.map((i) => [i.itemId, i.cursor.stepName, i.forkedFrom.experiment, i.forkedFrom.itemId])).toEqual([
      ['a', 'gen', 'e', 'a'],
      ['b', 'gen', 'e', 'b'],
    ]);
    const fold = await run(['fold', ...flags, '--experiment', 'f', '--item', 'a', '--json']);
    expect(JSON.parse(fold.stdout)).toMatchObject({ forkedFrom: { pipeline: 'p', experiment: 'e', itemId: 'a' } });
    const again = await run(['fork', ...flags, '--experiment', 'e', '--where', 'model = big', '--from-step', 'judge', '--to-experiment', 'f']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/already holds this fork of 2 items: nothing written$/);
  });

  it('--items from a step index into a target holding another fork is exit 2; bad usage is exit 2 before a log opens', async () => {
    const other = await run(['fork', ...flags, '--experiment', 'e', '--items', 'c', '--from-step', '1', '--to-experiment', 'f']);
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(/INVALID_INPUT/);
    const ok = await run(['fork', ...flags, '--experiment', 'e', '--items', 'c,a', '--from-step', '1', '--to-experiment', 'g']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^forked 2 items /);
    const both = await run(['fork', ...flags, '--experiment', 'e', '--items', 'c', '--where', 'model = big', '--from-step', '1', '--to-experiment', 'h']);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/exactly one of --where/);
  });
});
