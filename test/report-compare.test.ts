/**
 * `report(log, {compare})` and `dgcl report --compare` on a local root with real Lance: the source
 * e (six items, two failed at judge, a numeric field `score`) and a fork f of three of them, moved
 * on after the fork. The report holds only the forked cohort, both sides' status counts, per-step
 * pass rates, failures and the score distribution, both names in the title; a fork of another
 * experiment is INVALID_INPUT naming it, a missing one LOG_NOT_FOUND.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLog, report, type CheckpointLog } from '../lib/index.ts';
import { run } from './support/cli.ts';

for (const k of ['DGCL_ROOT', 'DGCL_PIPELINE', 'DGCL_EXPERIMENT']) delete process.env[k];

const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-report-compare-'));
const root = path.join(dir, 'root');
const flags = ['--root', root, '--pipeline', 'p'];
const open = (experiment: string) => openLog({ root, pipeline: 'p', experiment, leaseTtlMs: 3_600_000, mergeIdleMs: 0 });
const judge = { name: 'judge', index: 1 };

let source: CheckpointLog;
let fork: CheckpointLog;

beforeAll(async () => {
  source = await open('e');
  // a0..a5: gen sets score 10, 20, ..., 60; a0 and a1 fail at judge; a2 and a3 complete; a4, a5 pass judge.
  for (let i = 0; i < 6; i++) {
    const itemId = `a${i}`;
    await source.append([{ itemId, runId: 'r1', create: {}, step: { name: 'gen', index: 0 }, set: { score: 10 * (i + 1) } }]);
    if (i < 2) await source.append([{ itemId, runId: 'r1', step: judge, failed: { errorType: 'Timeout' } }]);
    else await source.append([{ itemId, runId: 'r1', step: judge, set: { verdict: 'ok' }, ...(i < 4 ? { terminal: 'completed' as const } : {}) }]);
  }
  await source.fork({ itemIds: ['a0', 'a1', 'a2'], fromStep: 'judge', to: { experiment: 'f' } });
  // The fork moves on: a0 passes judge (score 100) and completes, a1 fails judge again, a2 passes (score 5).
  fork = await open('f');
  await fork.append([{ itemId: 'a0', runId: 'r2', step: judge, set: { score: 100 }, terminal: 'completed' }]);
  await fork.append([{ itemId: 'a1', runId: 'r2', step: judge, failed: { errorType: 'Timeout' } }]);
  await fork.append([{ itemId: 'a2', runId: 'r2', step: judge, set: { score: 5 } }]);
  // Another experiment that is no fork of e.
  const other = await open('g');
  await other.append([{ itemId: 'x', runId: 'r1', create: {}, step: { name: 'gen', index: 0 }, set: { score: 1 } }]);
  await other.close();
});

afterAll(async () => {
  await source?.close();
  await fork?.close();
  rmSync(dir, { recursive: true, force: true });
});

const SOURCE_SIDE = {
  experiment: 'e',
  itemCount: 3,
  status: { in_progress: 0, failed: 2, completed: 1, filtered: 0 },
  steps: [
    { name: 'gen', index: 0, itemsPassed: 3, passRate: 1, failures: 0 },
    { name: 'judge', index: 1, itemsPassed: 1, passRate: 1 / 3, failures: 2 },
  ],
  failures: [{ errorType: 'Timeout', events: 2, items: 2, failedNow: 2 }],
  field: { name: 'score', count: 3, missing: 0, min: 10, p50: 20, p90: 30, max: 30, mean: 20 },
};
const FORK_SIDE = {
  experiment: 'f',
  itemCount: 3,
  status: { in_progress: 1, failed: 1, completed: 1, filtered: 0 },
  steps: [
    { name: 'gen', index: 0, itemsPassed: 3, passRate: 1, failures: 0 },
    { name: 'judge', index: 1, itemsPassed: 2, passRate: 2 / 3, failures: 1 },
  ],
  failures: [{ errorType: 'Timeout', events: 1, items: 1, failedNow: 1 }],
  field: { name: 'score', count: 3, missing: 0, min: 5, p50: 20, p90: 100, max: 100, mean: 125 / 3 },
};

describe('report compare', () => {
  it('reports only the cohort the fork was made from, beside the fork: status, per-step pass rates, failures, score distribution', async () => {
    const r = await report(source, { compare: { log: fork, field: 'score' } });
    expect(r.data.itemCount).toBe(3);
    expect(r.data.items.map((i) => i.id)).toEqual(['a0', 'a1', 'a2']);
    expect(r.data.status).toEqual(SOURCE_SIDE.status);
    expect(r.data.title).toBe('dgcl report: p / e (compared with fork f)');
    expect(r.data.compare).toMatchObject({ source: SOURCE_SIDE, fork: FORK_SIDE });
    expect(r.data.compare!.fork.uri).toMatch(/datagen_checkpoints\/p\/f\/log\.lance$/);
    expect(r.html).toContain('<title>dgcl report: p / e (compared with fork f)</title>');
  });

  it('without a field has no distribution; without compare the data has no compare object', async () => {
    const r = await report(source, { compare: { log: fork } });
    expect(r.data.compare!.source.field).toBeNull();
    expect(r.data.compare!.fork.status).toEqual(FORK_SIDE.status);
    const plain = await report(source);
    expect(plain.data.itemCount).toBe(6);
    expect('compare' in plain.data).toBe(false);
  });

  it('a field missing on some items counts them as missing, not as values', async () => {
    const r = await report(source, { compare: { log: fork, field: 'verdict' } });
    // verdict is a string where set: no numeric value on either side.
    expect(r.data.compare!.source.field).toEqual({ name: 'verdict', count: 0, missing: 3, min: null, p50: null, p90: null, max: null, mean: null });
  });

  it('an experiment that is no fork of this one is INVALID_INPUT naming it; an empty field name is INVALID_INPUT', async () => {
    const g = await open('g');
    try {
      await expect(report(source, { compare: { log: g } })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringContaining('experiment "g"') });
      // f is a fork of e, not of g.
      await expect(report(g, { compare: { log: fork } })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringMatching(/experiment "f" .* is not a fork of p\/g: its items were forked from p\/e/) });
    } finally {
      await g.close();
    }
    await expect(report(source, { compare: { log: fork, field: '' } })).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'compare.field' });
  });

  it('a missing fork experiment is LOG_NOT_FOUND', async () => {
    const missing = await open('nope');
    try {
      await expect(report(source, { compare: { log: missing } })).rejects.toMatchObject({ code: 'LOG_NOT_FOUND' });
    } finally {
      await missing.close();
    }
  });
});

describe('dgcl report --compare', () => {
  it('--compare f --field score --json prints the summary with both sides; the page has the Compare section data', async () => {
    const out = path.join(dir, 'cmp.html');
    const r = await run(['report', ...flags, '--experiment', 'e', '--compare', 'f', '--field', 'score', '--out', out, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const res = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(res).toMatchObject({ out, items: 3, listed: 3, status: SOURCE_SIDE.status, compare: { source: SOURCE_SIDE, fork: FORK_SIDE } });
    const html = readFileSync(out, 'utf8');
    expect(html).toContain('<title>dgcl report: p / e (compared with fork f)</title>');
    expect(html).toContain('"compare":{"source":{"experiment":"e"');
  });

  it('--field without --compare is exit 2; a missing --compare experiment exit 66; a non-fork exit 2 naming it', async () => {
    const noCompare = await run(['report', ...flags, '--experiment', 'e', '--field', 'score', '--out', path.join(dir, 'x.html')]);
    expect(noCompare.code).toBe(2);
    expect(noCompare.stderr).toContain('--field needs --compare');
    const missing = await run(['report', ...flags, '--experiment', 'e', '--compare', 'nope', '--out', path.join(dir, 'x.html')]);
    expect(missing.code, missing.stderr).toBe(66);
    const notFork = await run(['report', ...flags, '--experiment', 'e', '--compare', 'g', '--out', path.join(dir, 'x.html')]);
    expect(notFork.code).toBe(2);
    expect(notFork.stderr).toContain('experiment "g"');
  });
});
