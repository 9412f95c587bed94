/**
 * The bounded CI run of the interleaving simulation (test/sim/): SIM_SEEDS seeded schedules
 * (default 600, every scenario generator mixed) plus the named regression seeds, split over two
 * worker processes so both cores of a CI machine work. The mutants (test/sim/mutants.test.ts)
 * prove that such seeds see each guard's windows. Fails listing every failing seed, its first violations and how to
 * replay it (`npm run test:sim -- --seed N`).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const SEEDS = Number(process.env.SIM_SEEDS ?? 600);
const START = Number(process.env.SIM_START ?? 1);
const WORKERS = 2;

interface WorkerReport {
  seeds: number;
  seconds: number;
  failed: Array<{ seed: number; name?: string; violations: string[] }>;
}

function worker(start: number, n: number, out: string, regressions: boolean): Promise<WorkerReport> {
  const args = ['--import', 'tsx', 'test/sim/run.ts', '--seeds', String(n), '--start', String(start), '--json', out];
  if (!regressions) args.push('--no-regressions');
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, args, { cwd: path.resolve(import.meta.dirname, '../..'), stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('error', reject);
    p.on('exit', () => {
      try {
        resolve(JSON.parse(readFileSync(out, 'utf8')) as WorkerReport);
      } catch {
        reject(new Error(`simulation worker ${start}..${start + n - 1} wrote no report; stderr:\n${stderr.slice(-4000)}`));
      }
    });
  });
}

describe('interleaving simulation', () => {
  it(`${SEEDS} seeded schedules and the regression seeds keep I1-I5`, async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-sim-ci-'));
    try {
      const per = Math.ceil(SEEDS / WORKERS);
      const reports = await Promise.all(
        Array.from({ length: WORKERS }, (_, i) => worker(START + i * per, Math.min(per, SEEDS - i * per), path.join(dir, `w${i}.json`), i === 0)),
      );
      const ran = reports.reduce((s, r) => s + r.seeds, 0);
      const failed = reports.flatMap((r) => r.failed).sort((a, b) => a.seed - b.seed);
      const lines = failed.map(
        (f) => `seed ${f.seed}${f.name ? ` (regression: ${f.name})` : ''}: ${f.violations.length} violations, first: ${f.violations[0]}\n  replay: npm run test:sim -- --seed ${f.seed}`,
      );
      expect(ran).toBeGreaterThanOrEqual(SEEDS);
      expect(lines, `${failed.length} of ${ran} schedules broke an invariant:\n${lines.join('\n')}`).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 3_600_000);
});
