import type { Clock } from '../../lib/clock.ts';
import type { Scheduler } from './scheduler.ts';

/**
 * Simulated true time, shared by every process of a schedule. It starts at a fixed instant (so
 * event times replay) far from real file times, and moves only when the driver advances it or a
 * released sleep lets time pass. Stores that stamp times themselves (object times, DynamoDB's
 * TTL deletions) use it.
 */
export class SimTime {
  ms = 1_700_000_000_000;
  /** The largest distance any process's clock has had from true time so far. */
  maxSkewMs = 0;
}

/**
 * One process's clock: true time plus its own offset (skew), which a jump moves. Its timers are
 * scheduler operations that become eligible once its clock has reached their time; in the
 * unscheduled final phase they never fire.
 */
export class SimClock implements Clock {
  sched: Scheduler | null = null;

  constructor(
    readonly time: SimTime = new SimTime(),
    private offset = 0,
  ) {
    this.note();
  }

  get offsetMs(): number {
    return this.offset;
  }

  /** Move this process's clock by `ms` (forward or back) against true time. */
  jump(ms: number): void {
    this.offset += ms;
    this.note();
  }

  private note(): void {
    this.time.maxSkewMs = Math.max(this.time.maxSkewMs, Math.abs(this.offset));
  }

  nowMs(): number {
    return this.time.ms + this.offset;
  }

  /** True time passes (every process's clock moves with it). */
  advance(ms: number): void {
    this.time.ms += ms;
  }

  sleep(ms: number): Promise<void> {
    const run = async () => this.advance(Math.max(0, ms));
    if (!this.sched) return run();
    return this.sched.op({ kind: 'sleep', target: `${ms} ms`, mutating: false, faultable: false, run, error: (m) => new Error(m) });
  }

  setTimer(ms: number, fn: () => void): () => void {
    const sched = this.sched;
    if (!sched || sched.direct) return () => undefined;
    const due = this.nowMs() + ms;
    const token = { cancelled: false };
    void sched
      .op({ kind: 'timer', target: `${ms} ms`, mutating: false, faultable: false, run: async () => undefined, error: (m) => new Error(m), notBefore: () => this.nowMs() >= due, token })
      .then(() => {
        if (!token.cancelled) fn();
      });
    return () => {
      token.cancelled = true;
    };
  }
}
