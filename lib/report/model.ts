/**
 * The data a report page shows: plain JSON (the page embeds it as is). Built by
 * lib/report/aggregate.ts and lib/report/trajectories.ts; rendered by lib/report/render.ts and
 * the page's own script (lib/report/assets/page.js).
 */
import type { LogStats, ShardStats } from '../api.ts';
import type { ForkedFrom, ItemStatus } from '../types.ts';

export interface StatusCounts {
  in_progress: number;
  failed: number;
  completed: number;
  filtered: number;
}

/** Cumulative counts at each time point (ms since the Unix epoch). */
export interface ProgressSeries {
  t: number[];
  /** Items created. */
  created: number[];
  /** Items whose TERMINAL is `completed` / `filtered`. */
  completed: number[];
  filtered: number[];
  /** FAILED events (each a retry or a final failure), not items failed now. */
  failures: number[];
}

export interface StepStats {
  name: string;
  /** The smallest step_index seen with this name (null when never numbered): the page's order. */
  index: number | null;
  /** Distinct items with a STEP_COMPLETED of this step. */
  itemsPassed: number;
  completions: number;
  /** FAILED events at this step: each one is a retry or a final failure. */
  failures: number;
  /** Completions with attempt > 1 (a retry that went through). */
  retriedCompletions: number;
  firstMs: number | null;
  lastMs: number | null;
  /** Completions per minute between the step's first and last completion (null below 2). */
  perMinute: number | null;
  /**
   * Step durations where they can be measured (lib/report/aggregate.ts, STEP_TIME): `count`
   * measured, `unmeasured` completions without one.
   */
  durationMs: { count: number; unmeasured: number; mean: number | null; p50: number | null; p95: number | null; max: number | null };
}

export interface FailureGroup {
  errorType: string;
  /** FAILED events of this type. */
  events: number;
  /** Distinct items that failed with it at least once. */
  items: number;
  /** Items whose status is `failed` with this as their last error. */
  failedNow: number;
  steps: string[];
  latest: { itemId: string; stepName: string | null; attempt: number; atMs: number; traceback: string | null };
}

export interface ItemRow {
  id: string;
  /** A display name where the id alone does not say what the item is (a LangGraph thread). */
  name: string | null;
  status: ItemStatus;
  /** `index:name#iteration (attempt n)` of the last STEP_COMPLETED, or null. */
  cursor: string | null;
  attempts: number;
  events: number;
  lastMs: number;
  /** Where the item resumes, in words. */
  resume: string;
  lastError: string | null;
  /** Set on an item a fork made: where it came from. */
  forkedFrom?: ForkedFrom;
}

/** One trajectory event, light columns only: blob fields show their size, never bytes. */
export interface TrajectoryRow {
  seq: number;
  type: string;
  step: string | null;
  stepIndex: number | null;
  iteration: number | null;
  attempt: number;
  field: string | null;
  valueKind: string | null;
  size: number | null;
  terminal: string | null;
  errorType: string | null;
  atMs: number;
  writerEpoch: string;
  /** What the field holds, in words, where its name does not say (a LangGraph thread's fields). */
  label: string | null;
}

export interface ReportData {
  title: string;
  /** How step durations are measured, in words (shown with them). */
  stepTime: string;
  uri: string;
  /** The filter the report is limited to (`formatWhere`), or null: every item. */
  where: string | null;
  /** The snapshot the report reads (`report({snapshot})`), or null: the log's current state. */
  snapshot: { name: string; createdAtMs: number; baseVersion: number | null; tailRows: number } | null;
  generatedAtMs: number;
  /** Events of the items reported. */
  events: number;
  itemCount: number;
  status: StatusCounts;
  progress: ProgressSeries;
  steps: StepStats[];
  failures: FailureGroup[];
  /** At most `maxItems` rows (failed and in-progress items first when there are more). */
  items: ItemRow[];
  itemsOmitted: number;
  trajectories: Record<string, TrajectoryRow[]>;
  /** `stats()`, each shard generation with its state in words (as `dgcl stats` prints it). */
  stats: LogStats & { shards: Array<ShardStats & { label: string }> };
  /** With `report({compare})`: this cohort beside the fork made from it; absent otherwise. */
  compare?: CompareData;
}

/** A numeric field's final values over one side's items (`report({compare: {field}})`). */
export interface FieldDistribution {
  name: string;
  /** Items with a finite number as the field's final value. */
  count: number;
  /** Items without one (unset, or not a number). */
  missing: number;
  min: number | null;
  /** Nearest rank: the value at position floor(q * count) of the sorted values. */
  p50: number | null;
  p90: number | null;
  max: number | null;
  mean: number | null;
}

/** One side of a comparison: the source's cohort, or the fork's items made from it. */
export interface CompareSide {
  experiment: string;
  uri: string;
  itemCount: number;
  events: number;
  status: StatusCounts;
  /** `passRate`: itemsPassed / itemCount (null without items). */
  steps: Array<{ name: string; index: number | null; itemsPassed: number; passRate: number | null; failures: number }>;
  failures: Array<{ errorType: string; events: number; items: number; failedNow: number }>;
  field: FieldDistribution | null;
}

/** The source beside a fork made from it (lib/report/compare.ts). */
export interface CompareData {
  source: CompareSide;
  fork: CompareSide;
}
