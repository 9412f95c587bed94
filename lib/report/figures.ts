/** The report's figures from what its pass collected: per-step statistics and the progress series. */
import type { ProgressSeries, StepStats } from './model.ts';

export interface StepAgg {
  name: string;
  index: number | null;
  itemsPassed: number;
  completions: number;
  failures: number;
  retriedCompletions: number;
  firstMs: number | null;
  lastMs: number | null;
  durations: number[];
  /** Completions whose duration could not be measured (aggregate.ts, STEP_TIME). */
  unmeasured: number;
}

/** Time points of the progress chart. */
const PROGRESS_POINTS = 240;

export function quantile(sorted: number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export function stepStats(s: StepAgg): StepStats {
  const d = s.durations.sort((a, b) => a - b);
  const span = s.firstMs !== null && s.lastMs !== null ? s.lastMs - s.firstMs : 0;
  return {
    name: s.name,
    index: s.index,
    itemsPassed: s.itemsPassed,
    completions: s.completions,
    failures: s.failures,
    retriedCompletions: s.retriedCompletions,
    firstMs: s.firstMs,
    lastMs: s.lastMs,
    perMinute: s.completions >= 2 && span > 0 ? (s.completions * 60_000) / span : null,
    durationMs: {
      count: d.length,
      unmeasured: s.unmeasured,
      mean: d.length ? d.reduce((a, b) => a + b, 0) / d.length : null,
      p50: quantile(d, 0.5),
      p95: quantile(d, 0.95),
      max: d.length ? d[d.length - 1]! : null,
    },
  };
}

/** Cumulative items created / ending completed or filtered, and FAILED events, at evenly spaced times. */
export function progressSeries(created: number[], ends: Record<'completed' | 'filtered', number[]>, failures: number[]): ProgressSeries {
  const all = [created, ends.completed, ends.filtered, failures];
  let lo = Infinity;
  let hi = -Infinity;
  for (const a of all) {
    a.sort((x, y) => x - y);
    if (a.length) {
      lo = Math.min(lo, a[0]!);
      hi = Math.max(hi, a[a.length - 1]!);
    }
  }
  const out: ProgressSeries = { t: [], created: [], completed: [], filtered: [], failures: [] };
  if (lo === Infinity) return out;
  const n = hi > lo ? PROGRESS_POINTS : 1;
  const idx = [0, 0, 0, 0];
  for (let p = 0; p <= n; p++) {
    const t = p === n ? hi : lo + ((hi - lo) * p) / n;
    all.forEach((a, k) => {
      while (idx[k]! < a.length && a[idx[k]!]! <= t) idx[k]!++;
    });
    out.t.push(t);
    out.created.push(idx[0]!);
    out.completed.push(idx[1]!);
    out.filtered.push(idx[2]!);
    out.failures.push(idx[3]!);
  }
  return out;
}
