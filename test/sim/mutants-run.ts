/**
 * npm run test:mutants [-- options]: the simulation against each guard switched off
 * (test/sim/mutants.ts). A mutant is found by a seed whose schedule breaks one of the invariants
 * that guard keeps. Exit code 1 unless every mutant is found (and, with --regressions, every
 * regression seed fails on its guard).
 *   --budget N   seeds tried per mutant before it counts as not found (default: enough to find
 *                every mutant found in 5% of seeds, in all but 1 of 1,000 runs of the catalogue)
 *   --rate N     run N seeds per mutant without stopping at the first find; print each rate
 *   --start S    first seed (default: drawn at random, printed for a replay)
 *   --only A,B   these guards only (default: the proven ones, test/sim/mutants.ts; --all: every one)
 *   --json FILE  write the outcome per mutant to FILE
 *   --workers K  worker processes (default 2)
 *   --regressions-only  only the regression seeds (test/sim/regressions.ts): each must fail on its
 *                guard's mutant and pass with every guard on
 * Replay a find: npm run test:sim -- --mutant GUARD --focus FOCUS --seed N
 */
import { fork, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Guard } from '../../lib/guards.ts';
import { MUTANTS, type MutantSpec } from './mutants.ts';
import { REGRESSION_SEEDS } from './regressions.ts';
import type { SeedOutcome, WorkerJob } from './worker.ts';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** Seeds that find a mutant found in `rate` of seeds, in all but `miss` of runs of `mutants` mutants. */
export function budgetFor(rate: number, mutants: number, miss = 0.01): number {
  return Math.ceil(Math.log(miss / mutants) / Math.log(1 - rate));
}

interface Outcome {
  guard: Guard;
  found: SeedOutcome | null;
  seeds: number;
  hits: number;
  kinds: Record<string, number>;
  /** The first seed that showed each kind of violation (a replay of something unexpected). */
  firstSeed: Record<string, number>;
  seconds: number;
}

class Worker {
  private readonly p: ChildProcess;
  constructor() {
    this.p = fork(path.join(import.meta.dirname, 'worker.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  }
  run(job: WorkerJob): Promise<SeedOutcome[]> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`simulation worker exited (${code}) running ${job.guard ?? 'no mutant'} seeds ${job.seeds.join(' ')}`));
      this.p.once('exit', onExit);
      this.p.once('message', (m) => {
        this.p.off('exit', onExit);
        resolve(m as SeedOutcome[]);
      });
      this.p.send(job);
    });
  }
  stop(): void {
    this.p.kill();
  }
}

async function runMutant(spec: MutantSpec, workers: Worker[], start: number, budget: number, all: boolean): Promise<Outcome> {
  const t0 = performance.now();
  const out: Outcome = { guard: spec.guard, found: null, seeds: 0, hits: 0, kinds: {}, firstSeed: {}, seconds: 0 };
  let next = start;
  const end = start + budget;
  // Small chunks: a mutant found early stops the run soon; 2 schedules at a time per worker keep Lance's threads busy.
  const chunk = all ? 6 : 2;
  const lane = async (w: Worker) => {
    while (next < end && (all || out.found === null)) {
      const seeds: number[] = [];
      while (seeds.length < chunk && next < end) seeds.push(next++);
      for (const r of await w.run({ guard: spec.guard, focus: spec.focus, seeds, parallel: 2 })) {
        out.seeds++;
        for (const k of r.kinds) {
          out.kinds[k] = (out.kinds[k] ?? 0) + 1;
          out.firstSeed[k] = Math.min(out.firstSeed[k] ?? Infinity, r.seed);
        }
        if (r.kinds.some((k) => (spec.finds as readonly string[]).includes(k))) {
          out.hits++;
          if (out.found === null || r.seed < out.found.seed) out.found = r;
        }
      }
    }
  };
  await Promise.all(workers.map(lane));
  out.seconds = (performance.now() - t0) / 1000;
  return out;
}

const REPLAYS = 3;

/** Each regression seed on its guard's mutant, then with every guard on. */
async function regressions(workers: Worker[]): Promise<Array<{ seed: number; guard: Guard; name: string; failsWithout: boolean; passesWith: boolean; kinds: string[] }>> {
  const out: Array<{ seed: number; guard: Guard; name: string; failsWithout: boolean; passesWith: boolean; kinds: string[] }> = [];
  for (const r of REGRESSION_SEEDS) {
    if (r.guard === undefined) continue;
    const spec = MUTANTS.find((m) => m.guard === r.guard)!;
    const onRun = workers[1 % workers.length]!.run({ guard: null, focus: r.focus, seeds: [r.seed], parallel: 1 });
    // A replay is not exact (a log's id is random, Lance's own timing varies): the seed must fail
    // on its mutant in one of REPLAYS runs.
    let kinds: string[] = [];
    let failsWithout = false;
    for (let i = 0; i < REPLAYS && !failsWithout; i++) {
      kinds = (await workers[0]!.run({ guard: r.guard, focus: r.focus, seeds: [r.seed], parallel: 1 }))[0]!.kinds;
      failsWithout = kinds.some((k) => (spec.finds as readonly string[]).includes(k));
    }
    const on = await onRun;
    const passesWith = on[0]!.kinds.length === 0;
    console.log(`seed ${String(r.seed).padEnd(9)} ${r.guard.padEnd(38)} ${failsWithout ? 'fails on its mutant' : `NO LONGER FAILS on its mutant (${kinds.join(' ') || 'no violations'})`}${passesWith ? '' : `; FAILS with every guard on: ${on[0]!.first}`}`);
    out.push({ seed: r.seed, guard: r.guard, name: r.name, failsWithout, passesWith, kinds });
  }
  return out;
}

async function main(): Promise<void> {
  if (process.argv.includes('--regressions-only')) {
    const workers = Array.from({ length: 2 }, () => new Worker());
    try {
      const rs = await regressions(workers);
      const json = arg('--json');
      if (json) writeFileSync(json, JSON.stringify({ start: 0, budget: 0, outcomes: [], regressions: rs }, null, 1));
      if (rs.some((r) => !r.failsWithout || !r.passesWith)) process.exitCode = 1;
    } finally {
      for (const w of workers) w.stop();
    }
    return;
  }
  const only = arg('--only')?.split(',');
  const specs = only ? MUTANTS.filter((m) => only.includes(m.guard)) : process.argv.includes('--all') ? MUTANTS : MUTANTS.filter((m) => m.proven);
  if (only && specs.length !== only.length) throw new Error(`unknown guard in --only: ${only.filter((g) => !MUTANTS.some((m) => m.guard === g)).join(', ')}`);
  const rate = arg('--rate');
  const budget = Number(rate ?? arg('--budget') ?? budgetFor(0.05, specs.length, 0.001));
  const start = Number(arg('--start') ?? 1_000_000 + Math.floor(Math.random() * 1_000_000_000));
  const workers = Array.from({ length: Number(arg('--workers') ?? 2) }, () => new Worker());
  console.log(`${specs.length} mutants, ${rate ? `${budget} seeds each` : `up to ${budget} seeds each`}, from seed ${start}`);
  const outcomes: Outcome[] = [];
  const t0 = performance.now();
  try {
    for (const spec of specs) {
      const o = await runMutant(spec, workers, start, budget, rate !== undefined);
      outcomes.push(o);
      const kinds = Object.entries(o.kinds).map(([k, n]) => `${k}:${n}@${o.firstSeed[k]}`).join(' ');
      const verdict = o.found ? `found by seed ${o.found.seed}` : 'NOT FOUND';
      const share = rate ? ` ${o.hits}/${o.seeds} (${((100 * o.hits) / o.seeds).toFixed(1)}%)` : ` after ${o.seeds} seeds`;
      console.log(`${spec.guard.padEnd(38)} ${verdict}${share} in ${o.seconds.toFixed(0)} s  [${kinds || 'no violations'}]`);
      if (o.found) console.log(`    ${o.found.first?.slice(0, 240)}\n    replay: npm run test:sim -- --mutant ${spec.guard} --focus ${spec.focus} --seed ${o.found.seed}`);
    }
  } finally {
    for (const w of workers) w.stop();
  }
  const missed = outcomes.filter((o) => o.found === null);
  console.log(`\n${outcomes.length - missed.length} of ${outcomes.length} mutants found in ${((performance.now() - t0) / 1000).toFixed(0)} s${missed.length ? `; not found: ${missed.map((o) => o.guard).join(', ')}` : ''}`);
  const json = arg('--json');
  if (json) writeFileSync(json, JSON.stringify({ start, budget, outcomes }, null, 1));
  if (missed.length > 0) process.exitCode = 1;
}

if (import.meta.filename === process.argv[1] || process.argv[1]?.endsWith('mutants-run.ts')) await main();
