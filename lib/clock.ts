/** Time only through an injected clock, so lease, expiry and back-off logic is testable. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  nowMs(): number;
  /** Wait `ms` (back-off between retries). A simulated clock may let simulated time pass instead. */
  sleep(ms: number): Promise<void>;
  /**
   * Run `fn` once `ms` have passed, in the background (lease renewals, idle merges); the function
   * returned cancels it. Optional: without it a real timer runs (`startTimer`), which never keeps
   * the process alive. A simulated clock fires it when simulated time has passed.
   */
  setTimer?(ms: number, fn: () => void): () => void;
}

/** A background timer on `clock` (Clock.setTimer), or a real one that does not keep the process alive. */
export function startTimer(clock: Clock, ms: number, fn: () => void): () => void {
  if (clock.setTimer) return clock.setTimer(ms, fn);
  const t = setTimeout(fn, ms);
  t.unref();
  return () => clearTimeout(t);
}

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/** A clock tests move by hand; sleeping moves it forward (and yields to other tasks). */
export class ManualClock implements Clock {
  constructor(private ms = 1_700_000_000_000) {}
  nowMs(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
  async sleep(ms: number): Promise<void> {
    this.ms += Math.max(0, ms);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
