import type { Clock } from '../../lib/clock.ts';
import type { Scheduler } from './scheduler.ts';

/**
 * Simulated time. It starts at a fixed instant (so event times replay) far from real file
 * times, and moves only when the driver advances it or a released sleep lets time pass.
 */
export class SimClock implements Clock {
  private ms = 1_700_000_000_000;
  sched: Scheduler | null = null;

  nowMs(): number {
    return this.ms;
  }

  advance(ms: number): void {
    this.ms += ms;
  }

  sleep(ms: number): Promise<void> {
    const run = async () => this.advance(Math.max(0, ms));
    if (!this.sched) return run();
    return this.sched.op({ kind: 'sleep', target: `${ms} ms`, mutating: false, faultable: false, run, error: (m) => new Error(m) });
  }
}
