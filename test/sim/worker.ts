/**
 * A simulation worker process for the mutants run (test/sim/mutants-run.ts): it is sent
 * `{ guard, seeds, parallel }`, switches that guard off (null: none), runs the seeds' schedules
 * and answers with what each found. One guard at a time: the switch is the process's.
 */
import { switchOffGuard, type Guard } from '../../lib/guards.ts';
import type { Focus } from './config.ts';
import { runSchedule } from './schedule.ts';
import { violationKind } from './kinds.ts';

export interface WorkerJob {
  guard: Guard | null;
  /** The scenario generator to draw the seeds' configurations from (default: the seed's own). */
  focus?: Focus;
  seeds: number[];
  parallel: number;
}

export interface SeedOutcome {
  seed: number;
  kinds: string[];
  first: string | null;
  ms: number;
}

process.on('message', (job: WorkerJob) => {
  void (async () => {
    switchOffGuard(job.guard);
    const out: SeedOutcome[] = [];
    const queue = [...job.seeds];
    const lane = async () => {
      for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
        const r = await runSchedule(s, job.focus ? { focus: job.focus } : {});
        out.push({ seed: s, kinds: [...new Set(r.violations.map(violationKind))], first: r.violations[0] ?? null, ms: r.ms });
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, job.parallel) }, lane));
    switchOffGuard(null);
    process.send!(out.sort((a, b) => a.seed - b.seed));
  })();
});
