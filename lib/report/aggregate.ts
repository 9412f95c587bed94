/**
 * The report's one streaming pass over light columns (no value or blob column is read): status
 * counts, progress over time, per-step figures, failures by error type and one small record per
 * item for the items table. Order-insensitive like lib/log/summary.ts: every "last" is the event
 * with the greatest (item_seq, event_id), so batches may come in any order, each event once.
 *
 * Memory: one record per item (a few numbers, its last error type and the (seq, time, kind)
 * triples of its step events, for durations), one per step name and per error type; never one
 * per event beyond the batch being read.
 */
import type * as arrow from 'apache-arrow';
import { CorruptError } from '../errors.ts';
import { Int32Column, Int64Column, Utf8Column } from '../log/columns.ts';
import type { EventVisitor } from '../log/stream.ts';
import type { ItemStatus } from '../types.ts';
import type { FailureGroup, ItemRow, ProgressSeries, StatusCounts, StepStats } from './model.ts';

/** What the pass reads: light columns only. */
export const REPORT_COLUMNS = [
  'event_id',
  'item_id',
  'item_seq',
  'event_type',
  'step_name',
  'step_index',
  'iteration',
  'attempt',
  'terminal',
  'error_type',
  'traceback',
  'event_ts',
] as const;

const TYPES = ['FIELD_SET', 'FIELD_APPEND', 'ITEM_CREATED', 'STEP_COMPLETED', 'FAILED', 'TERMINAL'] as const;
const TYPE_BYTES = TYPES.map((t) => Buffer.from(t, 'utf8'));

/** Kinds of the step-event triples kept per item. */
const K_CREATED = 0;
const K_COMPLETED = 1;
const K_FAILED = 2;

interface Pos {
  seq: number;
  id: string;
}

function later(seq: number, id: () => string, than: Pos | null): boolean {
  if (than === null) return true;
  return seq !== than.seq ? seq > than.seq : id() > than.id;
}

interface ItemAgg {
  id: string;
  events: number;
  attempts: number;
  lastMs: number;
  createdMs: number | null;
  cursorAt: Pos | null;
  cursor: { step: string | null; index: number | null; iteration: number | null; attempt: number } | null;
  stepAt: Pos | null;
  stepFailed: boolean;
  stepMs: number;
  failureAt: Pos | null;
  failure: { step: string | null; attempt: number; errorType: string } | null;
  terminalAt: Pos | null;
  terminal: 'completed' | 'filtered' | null;
  terminalMs: number;
  /** Step ids this item completed (bit k = step k; steps past 30 in `moreSteps`). */
  stepBits: number;
  moreSteps: Set<number> | null;
  /** (seq, ms, kind * 65536 + step id) per ITEM_CREATED / STEP_COMPLETED / FAILED. */
  trace: number[];
}

interface StepAgg {
  name: string;
  index: number | null;
  itemsPassed: number;
  completions: number;
  failures: number;
  retriedCompletions: number;
  firstMs: number | null;
  lastMs: number | null;
  durations: number[];
}

interface ErrorAgg {
  errorType: string;
  events: number;
  items: Set<string>;
  steps: Set<string>;
  latestAt: { ms: number; id: string } | null;
  latest: FailureGroup['latest'] | null;
}

export interface Aggregate {
  events: number;
  status: StatusCounts;
  progress: ProgressSeries;
  steps: StepStats[];
  failures: FailureGroup[];
  itemCount: number;
  items: ItemRow[];
  itemsOmitted: number;
}

const UNNAMED = '(unnamed)';
/** Time points of the progress chart. */
const PROGRESS_POINTS = 240;

export class ReportVisitor implements EventVisitor<Aggregate> {
  private readonly items = new Map<string, ItemAgg>();
  private readonly steps: StepAgg[] = [];
  private readonly stepIds = new Map<string, number>();
  private readonly errors = new Map<string, ErrorAgg>();
  private events = 0;

  constructor(private readonly maxItems: number) {}

  private stepId(name: string | null, index: number | null): number {
    const key = name ?? UNNAMED;
    let id = this.stepIds.get(key);
    if (id === undefined) {
      id = this.steps.length;
      this.stepIds.set(key, id);
      this.steps.push({ name: key, index, itemsPassed: 0, completions: 0, failures: 0, retriedCompletions: 0, firstMs: null, lastMs: null, durations: [] });
    }
    const s = this.steps[id]!;
    if (index !== null && (s.index === null || index < s.index)) s.index = index;
    return id;
  }

  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    const itemIds = new Utf8Column(b, 'item_id');
    const eventIds = new Utf8Column(b, 'event_id');
    const seqs = new Int64Column(b, 'item_seq');
    const types = new Utf8Column(b, 'event_type');
    const attempts = new Int32Column(b, 'attempt');
    const tss = new Int64Column(b, 'event_ts');
    const stepNames = new Utf8Column(b, 'step_name');
    const stepIndexes = new Int64Column(b, 'step_index');
    let item: ItemAgg | null = null;
    let itemRow = -1;
    for (let r = 0; r < b.numRows; r++) {
      if (!keep(r)) continue;
      if (item === null || !itemIds.same(r, itemRow)) {
        const id = itemIds.get(r);
        if (id === null) throw new CorruptError(`column item_id is null in a stored event (row ${r})`);
        item = this.items.get(id) ?? null;
        if (item === null) this.items.set(id, (item = newItem(id)));
      }
      itemRow = r;
      this.events++;
      const seq = seqs.get(r) ?? 0;
      let idCache: string | null = null;
      const id = (): string => (idCache ??= eventIds.get(r) ?? '');
      const ms = (tss.get(r) ?? 0) / 1000;
      const attempt = attempts.get(r) ?? 0;
      item.events++;
      if (attempt > item.attempts) item.attempts = attempt;
      if (ms > item.lastMs) item.lastMs = ms;
      let t = -1;
      for (let k = 0; k < TYPES.length && t < 0; k++) if (types.is(r, TYPE_BYTES[k]!)) t = k;
      switch (t) {
        case 0:
        case 1:
          break;
        case 2:
          if (item.createdMs === null || ms < item.createdMs) item.createdMs = ms;
          item.trace.push(seq, ms, K_CREATED * 65536);
          break;
        case 3: {
          const sid = this.stepId(stepNames.get(r), stepIndexes.get(r));
          const s = this.steps[sid]!;
          s.completions++;
          if (attempt > 1) s.retriedCompletions++;
          if (s.firstMs === null || ms < s.firstMs) s.firstMs = ms;
          if (s.lastMs === null || ms > s.lastMs) s.lastMs = ms;
          if (!hasStep(item, sid)) {
            addStep(item, sid);
            s.itemsPassed++;
          }
          item.trace.push(seq, ms, K_COMPLETED * 65536 + sid);
          if (later(seq, id, item.cursorAt)) {
            item.cursorAt = { seq, id: id() };
            item.cursor = { step: stepNames.get(r), index: stepIndexes.get(r), iteration: new Int64Column(b, 'iteration').get(r), attempt };
          }
          if (later(seq, id, item.stepAt)) {
            item.stepAt = { seq, id: id() };
            item.stepFailed = false;
            item.stepMs = ms;
          }
          break;
        }
        case 4: {
          const stepName = stepNames.get(r);
          const sid = this.stepId(stepName, stepIndexes.get(r));
          this.steps[sid]!.failures++;
          item.trace.push(seq, ms, K_FAILED * 65536 + sid);
          const errorType = new Utf8Column(b, 'error_type').get(r) ?? '(no error type)';
          let e = this.errors.get(errorType);
          if (!e) this.errors.set(errorType, (e = { errorType, events: 0, items: new Set(), steps: new Set(), latestAt: null, latest: null }));
          e.events++;
          e.items.add(item.id);
          e.steps.add(stepName ?? UNNAMED);
          if (e.latestAt === null || ms > e.latestAt.ms || (ms === e.latestAt.ms && id() > e.latestAt.id)) {
            e.latestAt = { ms, id: id() };
            e.latest = { itemId: item.id, stepName, attempt, atMs: ms, traceback: new Utf8Column(b, 'traceback').get(r) };
          }
          if (later(seq, id, item.failureAt)) {
            item.failureAt = { seq, id: id() };
            item.failure = { step: stepName, attempt, errorType };
          }
          if (later(seq, id, item.stepAt)) {
            item.stepAt = { seq, id: id() };
            item.stepFailed = true;
            item.stepMs = ms;
          }
          break;
        }
        case 5: {
          const kind = new Utf8Column(b, 'terminal').get(r);
          if (kind !== 'completed' && kind !== 'filtered') {
            throw new CorruptError(`event ${id()} (item ${JSON.stringify(item.id)}, seq ${seq}): TERMINAL with terminal ${JSON.stringify(kind)}`);
          }
          if (later(seq, id, item.terminalAt)) {
            item.terminalAt = { seq, id: id() };
            item.terminal = kind;
            item.terminalMs = ms;
          }
          break;
        }
        default:
          throw new CorruptError(`event ${id()} (item ${JSON.stringify(item.id)}, seq ${seq}): unknown event_type ${JSON.stringify(types.get(r))}; upgrade dgcl`);
      }
    }
  }

  done(): Aggregate {
    const status: StatusCounts = { in_progress: 0, failed: 0, completed: 0, filtered: 0 };
    const created: number[] = [];
    const ends: Record<'completed' | 'filtered' | 'failed', number[]> = { completed: [], filtered: [], failed: [] };
    const failedNow = new Map<string, number>();
    const rows: ItemRow[] = [];
    for (const it of this.items.values()) {
      const st = statusOf(it);
      status[st]++;
      created.push(it.createdMs ?? it.lastMs);
      if (st === 'completed' || st === 'filtered') ends[st].push(it.terminalMs);
      else if (st === 'failed') {
        ends.failed.push(it.stepMs);
        const et = it.failure?.errorType;
        if (et !== undefined) failedNow.set(et, (failedNow.get(et) ?? 0) + 1);
      }
      this.durations(it);
      rows.push(rowOf(it, st));
    }
    const chosen = chooseRows(rows, this.maxItems);
    return {
      events: this.events,
      status,
      progress: progressSeries(created, ends),
      steps: this.steps.map(stepStats).sort((a, b) => (a.index ?? Infinity) - (b.index ?? Infinity) || (a.firstMs ?? 0) - (b.firstMs ?? 0)),
      failures: [...this.errors.values()]
        .map((e) => ({
          errorType: e.errorType,
          events: e.events,
          items: e.items.size,
          failedNow: failedNow.get(e.errorType) ?? 0,
          steps: [...e.steps].sort(),
          latest: e.latest!,
        }))
        .sort((a, b) => b.events - a.events || (a.errorType < b.errorType ? -1 : 1)),
      itemCount: this.items.size,
      items: chosen,
      itemsOmitted: rows.length - chosen.length,
    };
  }

  /** Each completion's time since the item's previous step event (or creation), then forget the trace. */
  private durations(it: ItemAgg): void {
    const n = it.trace.length / 3;
    const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => it.trace[a * 3]! - it.trace[b * 3]! || it.trace[a * 3 + 1]! - it.trace[b * 3 + 1]!);
    let prevMs: number | null = null;
    for (const i of order) {
      const ms = it.trace[i * 3 + 1]!;
      const code = it.trace[i * 3 + 2]!;
      if (code >> 16 === K_COMPLETED && prevMs !== null) this.steps[code & 0xffff]!.durations.push(Math.max(0, ms - prevMs));
      prevMs = ms;
    }
    it.trace = [];
  }
}

function newItem(id: string): ItemAgg {
  return {
    id,
    events: 0,
    attempts: 0,
    lastMs: 0,
    createdMs: null,
    cursorAt: null,
    cursor: null,
    stepAt: null,
    stepFailed: false,
    stepMs: 0,
    failureAt: null,
    failure: null,
    terminalAt: null,
    terminal: null,
    terminalMs: 0,
    stepBits: 0,
    moreSteps: null,
    trace: [],
  };
}

function hasStep(it: ItemAgg, sid: number): boolean {
  return sid < 30 ? (it.stepBits & (1 << sid)) !== 0 : (it.moreSteps?.has(sid) ?? false);
}

function addStep(it: ItemAgg, sid: number): void {
  if (sid < 30) it.stepBits |= 1 << sid;
  else (it.moreSteps ??= new Set()).add(sid);
}

/** fold's rule (lib/fold.ts): the last TERMINAL's kind; else failed when the last step event failed. */
function statusOf(it: ItemAgg): ItemStatus {
  return it.terminal ?? (it.stepFailed ? 'failed' : 'in_progress');
}

/** lib/resume.ts's rule, in words. */
function resumeText(it: ItemAgg, st: ItemStatus): string {
  if (st === 'completed' || st === 'filtered') return `not resumed (${st})`;
  if (st === 'failed') return `retry ${it.failure?.step ?? 'the failed step'} with attempt ${(it.failure?.attempt ?? 0) + 1}`;
  const c = it.cursor;
  if (c === null) return 'from the start: step index 0';
  if (c.index !== null) return `step index ${c.index + 1}, after ${c.step ?? '?'}`;
  return `the step after ${c.step ?? '?'}${c.iteration !== null ? ` (iteration ${c.iteration})` : ''}`;
}

function cursorText(c: ItemAgg['cursor']): string | null {
  if (c === null) return null;
  return `${c.index !== null ? `${c.index}:` : ''}${c.step ?? '?'}${c.iteration !== null ? `#${c.iteration}` : ''} (attempt ${c.attempt})`;
}

function rowOf(it: ItemAgg, st: ItemStatus): ItemRow {
  return {
    id: it.id,
    status: st,
    cursor: cursorText(it.cursor),
    attempts: it.attempts,
    events: it.events,
    lastMs: it.lastMs,
    resume: resumeText(it, st),
    lastError: it.failure ? `${it.failure.errorType} at ${it.failure.step ?? '?'} (attempt ${it.failure.attempt})` : null,
  };
}

const RANK: Record<ItemStatus, number> = { failed: 0, in_progress: 1, completed: 2, filtered: 2 };

/** All rows by id when they fit; else failed and in-progress items first (what an operator looks for). */
function chooseRows(rows: ItemRow[], max: number): ItemRow[] {
  const byId = (a: ItemRow, b: ItemRow) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  if (rows.length <= max) return rows.sort(byId);
  return rows
    .sort((a, b) => RANK[a.status] - RANK[b.status] || byId(a, b))
    .slice(0, max)
    .sort(byId);
}

function quantile(sorted: number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function stepStats(s: StepAgg): StepStats {
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
      mean: d.length ? d.reduce((a, b) => a + b, 0) / d.length : null,
      p50: quantile(d, 0.5),
      p95: quantile(d, 0.95),
      max: d.length ? d[d.length - 1]! : null,
    },
  };
}

/** Cumulative items created / ending completed, filtered, failed, at evenly spaced times. */
export function progressSeries(created: number[], ends: Record<'completed' | 'filtered' | 'failed', number[]>): ProgressSeries {
  const all = [created, ends.completed, ends.filtered, ends.failed];
  let lo = Infinity;
  let hi = -Infinity;
  for (const a of all) {
    a.sort((x, y) => x - y);
    if (a.length) {
      lo = Math.min(lo, a[0]!);
      hi = Math.max(hi, a[a.length - 1]!);
    }
  }
  const out: ProgressSeries = { t: [], created: [], completed: [], filtered: [], failed: [] };
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
    out.failed.push(idx[3]!);
  }
  return out;
}
