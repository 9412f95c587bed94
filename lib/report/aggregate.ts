/**
 * The report's one streaming pass over light columns (no value or blob column is read): status
 * counts, progress over time, per-step figures, failures by error type and one small record per
 * item for the items table. Order-insensitive like lib/log/read/summary.ts: every "last" is the event
 * with the greatest (item_seq, event_id), so batches may come in any order, each event once.
 *
 * Step durations (STEP_TIME, shown on the page): a completion's event time minus that of the
 * item's previous step event or creation, only when both belong to one run (same run_id), the
 * previous one is not a FAILED (the wait before a retry is not step time) and was committed
 * earlier (the events of one batch, or one commit, share their time: a step whose batch created
 * the item has nothing to be measured from). Other completions are counted as not measured.
 *
 * Memory: one record per item (a few numbers, its last error type and the (seq, time, kind, run)
 * of its step events, for durations), one per step name, per error type and per run id, and the
 * time of each FAILED event; never one per event beyond the batch being read.
 */
import type * as arrow from 'apache-arrow';
import { CorruptError } from '../errors.ts';
import { Int32Column, Int64Column, Utf8Column } from '../log/columns.ts';
import type { EventVisitor } from '../log/read/stream.ts';
import { checkpointLabel, isThreadCursor } from '../langgraph/view.ts';
import { compareInKind, inLoop, laterOfKinds, type StepRank } from '../step-order.ts';
import type { ItemStatus } from '../types.ts';
import { progressSeries, stepStats, type StepAgg } from './figures.ts';
import type { FailureGroup, ItemRow, ProgressSeries, StatusCounts, StepStats } from './model.ts';

/** What the pass reads: light columns only. */
export const REPORT_COLUMNS = [
  'event_id',
  'item_id',
  'item_seq',
  'event_type',
  'step_name',
  'step_index',
  'step_instance_id',
  'iteration',
  'attempt',
  'run_id',
  'terminal',
  'error_type',
  'traceback',
  'event_ts',
] as const;

const TYPES = ['FIELD_SET', 'FIELD_APPEND', 'ITEM_CREATED', 'STEP_COMPLETED', 'FAILED', 'TERMINAL'] as const;
const TYPE_BYTES = TYPES.map((t) => Buffer.from(t, 'utf8'));

/** How the page says step durations are measured (aggregate.ts's header, in the user's words). */
export const STEP_TIME =
  "A step's duration is the time from the item's previous event (its previous step's completion, or its creation) to the step's completion, " +
  'when both are of the same run and the previous event was written earlier. Not measured: a step written together with the item\'s creation ' +
  '(as a first durable step is) or with the step before it, a retry after a FAILED (waiting to retry is not step time), and a step whose ' +
  'previous event is from another run (a resume after a crash or a rerun: the time between runs is not step time).';

/** Kinds of the step events kept per item. */
const K_CREATED = 0;
const K_COMPLETED = 1;
const K_FAILED = 2;
/** Numbers per trace entry: seq, ms, kind * 65536 + step id, run. */
const TRACE = 4;

interface Pos {
  seq: number;
  id: string;
}

function later(seq: number, id: () => string, than: Pos | null): boolean {
  if (than === null) return true;
  return seq !== than.seq ? seq > than.seq : id() > than.id;
}

/** A step event's rank (lib/step-order.ts) and position; the last of each kind is kept. */
interface StepAt extends StepRank, Pos {}

interface ByKind<T extends StepAt> {
  loop: T | null;
  plain: T | null;
}

/** Keeps `e` if it is the last of its kind so far: step order, then the log (any order of offers). */
function offer<T extends StepAt>(kinds: ByKind<T>, e: T): void {
  const k = inLoop(e) ? 'loop' : 'plain';
  const now = kinds[k];
  const c = now === null ? 1 : compareInKind(e, now);
  if (c > 0 || (c === 0 && later(e.seq, () => e.id, now))) kinds[k] = e;
}

type ReportCursor = { step: string | null; index: number | null; instance: string | null; iteration: number | null; attempt: number };

interface ItemAgg {
  id: string;
  events: number;
  attempts: number;
  lastMs: number;
  createdMs: number | null;
  /** The STEP_COMPLETED last in step order of each kind: the later of both is the cursor. */
  cursors: ByKind<StepAt & { cursor: ReportCursor }>;
  /** The last STEP_COMPLETED or FAILED in the log, and whether it was a FAILED. */
  stepAt: Pos | null;
  stepFailed: boolean;
  failureAt: Pos | null;
  failure: { step: string | null; attempt: number; errorType: string } | null;
  terminalAt: Pos | null;
  terminal: 'completed' | 'filtered' | null;
  terminalMs: number;
  /** Step ids this item completed (bit k = step k; steps past 30 in `moreSteps`). */
  stepBits: number;
  moreSteps: Set<number> | null;
  /** (seq, ms, kind * 65536 + step id, run) per ITEM_CREATED / STEP_COMPLETED / FAILED. */
  trace: number[];
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

export class ReportVisitor implements EventVisitor<Aggregate> {
  private readonly items = new Map<string, ItemAgg>();
  private readonly steps: StepAgg[] = [];
  private readonly stepIds = new Map<string, number>();
  private readonly errors = new Map<string, ErrorAgg>();
  private readonly runs = new Map<string, number>();
  /** Event time of every FAILED event (the failures-over-time line). */
  private readonly failureMs: number[] = [];
  private events = 0;

  constructor(private readonly maxItems: number) {}

  private stepId(name: string | null, index: number | null): number {
    const key = name ?? UNNAMED;
    let id = this.stepIds.get(key);
    if (id === undefined) {
      id = this.steps.length;
      this.stepIds.set(key, id);
      this.steps.push({ name: key, index, itemsPassed: 0, completions: 0, failures: 0, retriedCompletions: 0, firstMs: null, lastMs: null, durations: [], unmeasured: 0 });
    }
    const s = this.steps[id]!;
    if (index !== null && (s.index === null || index < s.index)) s.index = index;
    return id;
  }

  private runOf(runId: string | null): number {
    const key = runId ?? '';
    let n = this.runs.get(key);
    if (n === undefined) this.runs.set(key, (n = this.runs.size));
    return n;
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
    const runIds = new Utf8Column(b, 'run_id');
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
          item.trace.push(seq, ms, K_CREATED * 65536, this.runOf(runIds.get(r)));
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
          item.trace.push(seq, ms, K_COMPLETED * 65536 + sid, this.runOf(runIds.get(r)));
          // The cursor as the fold chooses it (lib/step-order.ts).
          const index = stepIndexes.get(r);
          const iteration = new Int64Column(b, 'iteration').get(r);
          const instance = new Utf8Column(b, 'step_instance_id').get(r);
          const at = { seq, id: id(), iteration, index };
          offer(item.cursors, { ...at, cursor: { step: stepNames.get(r), index, instance, iteration, attempt } });
          if (later(seq, id, item.stepAt)) Object.assign(item, { stepAt: { seq, id: id() }, stepFailed: false });
          break;
        }
        case 4: {
          const stepName = stepNames.get(r);
          const sid = this.stepId(stepName, stepIndexes.get(r));
          this.steps[sid]!.failures++;
          item.trace.push(seq, ms, K_FAILED * 65536 + sid, this.runOf(runIds.get(r)));
          this.failureMs.push(ms);
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
          if (later(seq, id, item.stepAt)) Object.assign(item, { stepAt: { seq, id: id() }, stepFailed: true });
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
    const ends: Record<'completed' | 'filtered', number[]> = { completed: [], filtered: [] };
    const failedNow = new Map<string, number>();
    const rows: ItemRow[] = [];
    for (const it of this.items.values()) {
      const st = statusOf(it);
      status[st]++;
      created.push(it.createdMs ?? it.lastMs);
      if (st === 'completed' || st === 'filtered') ends[st].push(it.terminalMs);
      else if (st === 'failed') {
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
      progress: progressSeries(created, ends, this.failureMs),
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

  /** Each completion's duration where it can be measured (STEP_TIME), then forget the trace. */
  private durations(it: ItemAgg): void {
    const t = it.trace;
    const n = t.length / TRACE;
    const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => t[a * TRACE]! - t[b * TRACE]! || t[a * TRACE + 1]! - t[b * TRACE + 1]!);
    let prev: number | null = null;
    for (const i of order) {
      const code = t[i * TRACE + 2]!;
      if (code >> 16 === K_COMPLETED) {
        const step = this.steps[code & 0xffff]!;
        const ms = t[i * TRACE + 1]!;
        if (prev !== null && t[prev * TRACE + 2]! >> 16 !== K_FAILED && t[prev * TRACE + 3] === t[i * TRACE + 3] && t[prev * TRACE + 1]! < ms) {
          step.durations.push(ms - t[prev * TRACE + 1]!);
        } else step.unmeasured++;
      }
      prev = i;
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
    cursors: { loop: null, plain: null },
    stepAt: null,
    stepFailed: false,
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

/** fold's cursor: the later of the last loop step and the last step outside loops. */
function cursorOf(it: ItemAgg): ReportCursor | null {
  return laterOfKinds(it.cursors.loop, it.cursors.plain, (a, b) => later(a.seq, () => a.id, b))?.cursor ?? null;
}

/** lib/resume.ts's rule, in words. */
function resumeText(it: ItemAgg, st: ItemStatus): string {
  if (st === 'completed' || st === 'filtered') return `not resumed (${st})`;
  if (st === 'failed') return `retry ${it.failure?.step ?? 'the failed step'} with attempt ${(it.failure?.attempt ?? 0) + 1}`;
  const c = cursorOf(it);
  if (c === null) return 'from the start: step index 0';
  if (c.index !== null) return `step index ${c.index + 1}, after ${c.step ?? '?'}`;
  return `the step after ${c.step ?? '?'}${c.iteration !== null ? ` (iteration ${c.iteration})` : ''}`;
}

function cursorText(c: ReportCursor | null): string | null {
  if (c === null) return null;
  if (isThreadCursor({ stepName: c.step, stepInstanceId: c.instance })) return `LangGraph ${checkpointLabel(c.instance)}`;
  return `${c.index !== null ? `${c.index}:` : ''}${c.step ?? '?'}${c.iteration !== null ? `#${c.iteration}` : ''} (attempt ${c.attempt})`;
}

function rowOf(it: ItemAgg, st: ItemStatus): ItemRow {
  const cursor = cursorOf(it);
  return {
    id: it.id,
    name: isThreadCursor(cursor && { stepName: cursor.step, stepInstanceId: cursor.instance }) ? 'LangGraph thread' : null,
    status: st,
    cursor: cursorText(cursor),
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
