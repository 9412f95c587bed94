/**
 * The guards are proven, not assumed (docs/design/invariants.md, "Guards"): each switched off in
 * turn, the simulation must report a violation of an invariant that guard keeps. Seeds start at
 * a random point each run (printed, with a replay line per mutant); the budget per mutant finds
 * any mutant found in 5% of seeds in at least 99% of runs of the whole catalogue. Also: each
 * regression seed still fails on its guard's mutant (a seed that stopped reaching its bug is
 * replaced, or its bug becomes a scenario test).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REGRESSION_SEEDS } from './regressions.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

interface RunReport {
  start: number;
  budget: number;
  outcomes: Array<{ guard: string; found: { seed: number; first: string | null } | null; seeds: number; kinds: Record<string, number> }>;
  regressions?: Array<{ seed: number; guard: string; name: string; failsWithout: boolean; passesWith: boolean; kinds: string[] }>;
}

function run(args: string[]): Promise<{ report: RunReport; stdout: string }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-mutants-'));
  const out = path.join(dir, 'report.json');
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', 'test/sim/mutants-run.ts', ...args, '--json', out], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('error', reject);
    p.on('exit', () => {
      try {
        resolve({ report: JSON.parse(readFileSync(out, 'utf8')) as RunReport, stdout });
      } catch {
        reject(new Error(`the mutants run wrote no report; stdout:\n${stdout.slice(-4000)}\nstderr:\n${stderr.slice(-4000)}`));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

describe('mutants', () => {
  it('every proven guard switched off breaks an invariant it keeps in the simulation', async () => {
    const { report, stdout } = await run([]);
    const missed = report.outcomes.filter((o) => o.found === null).map((o) => `${o.guard} (not found in ${o.seeds} seeds from ${report.start}; seen: ${JSON.stringify(o.kinds)})`);
    expect(missed, `${missed.length} mutants not found:\n${missed.join('\n')}\n\n${stdout}`).toEqual([]);
  }, 3_600_000);

  it('every regression seed fails on its guard switched off and passes with every guard on', async () => {
    const { report, stdout } = await run(['--regressions-only']);
    const bad = (report.regressions ?? []).filter((r) => !r.failsWithout || !r.passesWith).map((r) => `seed ${r.seed} (${r.guard}: ${r.name}): ${r.failsWithout ? '' : `no longer fails on its mutant (saw ${r.kinds.join(' ') || 'nothing'})`}${r.passesWith ? '' : ' fails with every guard on'}`);
    expect(report.regressions?.map((r) => r.seed), stdout).toEqual(REGRESSION_SEEDS.filter((r) => r.guard !== undefined).map((r) => r.seed));
    expect(bad, stdout).toEqual([]);
  }, 3_600_000);
});
