/**
 * npm run test:sim [-- options]
 *   --seeds N    run N seeded schedules (default 200)
 *   --start S    first seed (default 1)
 *   --seed S     replay one seed, printing its configuration and whole trace
 *   --long       soak: 50,000 seeds
 *   --keep       keep the root folder of a replayed seed
 *   --json FILE  also write {seeds, seconds, failed: [{seed, violations}]} to FILE
 *   --no-regressions  skip the regression seeds (a second CI worker)
 *   --parallel K run K schedules at once in this process (default 3)
 *   --mutant G   with guard G switched off (lib/guards.ts; npm run test:mutants runs them all)
 *   --focus F    draw the configurations from scenario generator F (test/sim/config.ts)
 * Regression seeds (test/sim/regressions.ts) run first, every time. Exit code 1 if any seed
 * broke an invariant; each failing seed is printed with its violations and how to replay it.
 */
import { writeFileSync } from 'node:fs';
import { GUARDS, switchOffGuard, type Guard } from '../../lib/guards.ts';
import { REGRESSION_SEEDS } from './regressions.ts';
import { FOCUSES, type Focus } from './config.ts';
import { runSchedule, type ScheduleResult } from './schedule.ts';
import { profile } from './scheduler.ts';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function printFailure(r: ScheduleResult, withTrace: boolean): void {
  console.log(`\nseed ${r.seed} FAILED (${r.violations.length} violations) config ${JSON.stringify(r.config)}`);
  for (const v of r.violations.slice(0, 20)) console.log(`  ${v}`);
  if (r.violations.length > 20) console.log(`  ... ${r.violations.length - 20} more`);
  if (withTrace) {
    console.log('  trace (step actor op target !fault):');
    for (const t of r.trace) console.log(`    ${t}`);
  }
  console.log(`  replay: npm run test:sim -- --seed ${r.seed} --focus ${r.config.focus}`);
}

async function main(): Promise<void> {
  const mutant = arg('--mutant');
  if (mutant !== undefined) {
    if (!(GUARDS as readonly string[]).includes(mutant)) throw new Error(`no guard ${JSON.stringify(mutant)}; guards: ${GUARDS.join(', ')}`);
    switchOffGuard(mutant as Guard);
  }
  const focusArg = arg('--focus');
  if (focusArg !== undefined && !(FOCUSES as readonly string[]).includes(focusArg)) throw new Error(`no focus ${JSON.stringify(focusArg)}; foci: ${FOCUSES.join(', ')}`);
  const focus = focusArg as Focus | undefined;
  const one = arg('--seed');
  if (one !== undefined) {
    const r = await runSchedule(Number(one), { keep: process.argv.includes('--keep'), ...(focus ? { focus } : {}) });
    console.log(`seed ${r.seed} config ${JSON.stringify(r.config)} counts ${JSON.stringify(r.counts)} ${r.ms.toFixed(0)} ms`);
    if (r.violations.length > 0) {
      printFailure(r, true);
      process.exitCode = 1;
    } else {
      for (const t of r.trace) console.log(`    ${t}`);
      console.log(`seed ${r.seed} ok`);
    }
    return;
  }
  const n = process.argv.includes('--long') ? 50_000 : Number(arg('--seeds') ?? 200);
  const start = Number(arg('--start') ?? 1);
  const failed: number[] = [];
  const report: Array<{ seed: number; name?: string; violations: string[] }> = [];
  const t0 = performance.now();
  const regressions = process.argv.includes('--no-regressions') ? [] : REGRESSION_SEEDS;
  for (const { seed, name, focus: f } of regressions) {
    const r = await runSchedule(seed, { focus: f });
    if (r.violations.length > 0) {
      console.log(`regression seed ${seed} (${name}) fails again`);
      printFailure(r, false);
      failed.push(seed);
      report.push({ seed, name, violations: r.violations });
    }
  }
  // Several schedules at once: each has its own scheduler, root and streams, so they do not
  // affect one another, and Lance's native threads stay busy while one schedule waits.
  const parallel = Number(arg('--parallel') ?? 3);
  let next = start;
  let done = 0;
  const lane = async () => {
    while (next < start + n) {
      const s = next++;
      const r = await runSchedule(s, focus ? { focus } : {});
      if (r.violations.length > 0) {
        printFailure(r, false);
        failed.push(s);
        report.push({ seed: s, violations: r.violations });
      }
      if (++done % 100 === 0) console.log(`${done}/${n} seeds, ${failed.length} failing, ${((performance.now() - t0) / done / 10).toFixed(1)} s per 100 seeds`);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, parallel) }, lane));
  failed.sort((a, b) => a - b);
  report.sort((a, b) => a.seed - b.seed);
  const secs = (performance.now() - t0) / 1000;
  console.log(`\n${n} seeds from ${start} (+${regressions.length} regression seeds) in ${secs.toFixed(1)} s; failing: ${failed.length ? failed.join(' ') : 'none'}`);
  const json = arg('--json');
  if (json) writeFileSync(json, JSON.stringify({ seeds: n + regressions.length, seconds: secs, failed: report }));
  if (process.env.SIM_PROFILE) {
    const rows = [...profile.entries()].sort((a, b) => b[1].ms - a[1].ms);
    for (const [k, v] of rows) console.log(`${k.padEnd(36)} n=${String(v.n).padStart(6)} total ${(v.ms / 1000).toFixed(1)} s  avg ${(v.ms / v.n).toFixed(2)} ms`);
  }
  if (failed.length > 0) process.exitCode = 1;
}

await main();
