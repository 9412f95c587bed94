/**
 * Item listings (`items()`, `failures()`) by one streaming pass over light columns: each item's
 * status, cursor, last seq, attempts and last failure, without building a row object per event
 * or reading any value column. Equal to `summarize(foldItem(...))` of lib/fold.ts (a property
 * test holds them together), computed order-insensitively: every aspect is "the event with the
 * greatest (item_seq, event_id)" of some kind (the cursor: greatest (iteration, step index,
 * item_seq, event_id), lib/step-order.ts), or a maximum, so batches may arrive in any order
 * (base, then shards) as long as each event arrives once (lib/log/read/stream.ts).
 *
 * Memory: one small record per item (not per event); the value and blob columns are never read.
 */
import type * as arrow from 'apache-arrow';
import type { FailureSummary, ItemSummary } from '../../api.ts';
import { CorruptError } from '../../errors.ts';
import { compareStepRank } from '../../step-order.ts';
import type { Cursor, Failure, ItemStatus } from '../../types.ts';
import { Int32Column, Int64Column, Utf8Column } from '../columns.ts';
import type { EventVisitor } from './stream.ts';

/** What a summary pass reads. */
export const SUMMARY_SCAN_COLUMNS = [
  'event_id',
  'item_id',
  'root_item_id',
  'parent_item_id',
  'item_seq',
  'checkpoint_id',
  'event_type',
  'step_name',
  'step_index',
  'step_instance_id',
  'iteration',
  'attempt',
  'terminal',
  'error_type',
  'error_dump',
  'traceback',
] as const;

const EVENT_TYPES = ['FIELD_SET', 'FIELD_APPEND', 'ITEM_CREATED', 'STEP_COMPLETED', 'FAILED', 'TERMINAL'] as const;
const EVENT_TYPE_BYTES = EVENT_TYPES.map((t) => Buffer.from(t, 'utf8'));

/** The row's event type, compared as bytes (decoding a string per row costs more than the rest). */
function eventTypeAt(col: Utf8Column, r: number): string | null {
  for (let k = 0; k < EVENT_TYPES.length; k++) if (col.is(r, EVENT_TYPE_BYTES[k]!)) return EVENT_TYPES[k]!;
  return col.get(r);
}

/** The position of an event in its item's order: (item_seq, event_id). */
export interface Pos {
  seq: number;
  id: string;
}

/** Whether the event at row r (seq `seq`) comes after `than`; decodes its id only on a seq tie. */
function after(seq: number, ids: Utf8Column, r: number, than: Pos | null): boolean {
  if (than === null) return true;
  if (seq !== than.seq) return seq > than.seq;
  return (ids.get(r) ?? '') > than.id;
}

function before(seq: number, ids: Utf8Column, r: number, than: Pos | null): boolean {
  if (than === null) return true;
  if (seq !== than.seq) return seq < than.seq;
  return (ids.get(r) ?? '') < than.id;
}

function posOf(seq: number, ids: Utf8Column, r: number): Pos {
  return { seq, id: ids.get(r) ?? '' };
}

export interface ItemAggregate {
  itemId: string;
  lastSeq: number;
  attempts: number;
  /** The first event (root/parent shown when there is no ITEM_CREATED). */
  first: Pos | null;
  firstRoot: string;
  firstParent: string | null;
  created: Pos | null;
  root: string | null;
  parent: string | null;
  cursorAt: Pos | null;
  cursor: Cursor | null;
  /** The last STEP_COMPLETED or FAILED, and whether it was a FAILED. */
  stepAt: Pos | null;
  stepFailed: boolean;
  failureAt: Pos | null;
  failure: Failure | null;
  terminalAt: Pos | null;
  terminal: 'completed' | 'filtered' | null;
}

export function statusOf(a: ItemAggregate): ItemStatus {
  return a.terminal ?? (a.stepFailed ? 'failed' : 'in_progress');
}

export function summaryOf(a: ItemAggregate): ItemSummary {
  // The cursor is copied: an aggregate may be the process's cached projection's
  // (lib/log/projection/projection.ts), and a caller changing its page must not change later listings.
  return { itemId: a.itemId, status: statusOf(a), cursor: a.cursor && { ...a.cursor }, lastSeq: a.lastSeq };
}

export function failureOf(a: ItemAggregate): FailureSummary | null {
  if (statusOf(a) !== 'failed' || a.failure === null) return null;
  return { itemId: a.itemId, status: 'failed', ...a.failure };
}

/** Root and parent ids as fold shows them (ITEM_CREATED's, else the first event's). */
export function lineageOf(a: ItemAggregate): { rootItemId: string; parentItemId: string | null } {
  return a.created ? { rootItemId: a.root!, parentItemId: a.parent } : { rootItemId: a.firstRoot, parentItemId: a.firstParent };
}

/** A visitor building one aggregate per item; `done()` returns them ordered by item id. */
export class SummaryVisitor implements EventVisitor<ItemAggregate[]> {
  private readonly items = new Map<string, ItemAggregate>();

  /**
   * `seed`: aggregates of events already counted (lib/log/projection/projection.ts); the rows fed then
   * update them. Never modified (an aggregate is copied when a row first updates it).
   */
  constructor(private readonly seed?: ReadonlyMap<string, ItemAggregate>) {}

  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    const itemIds = new Utf8Column(b, 'item_id');
    const eventIds = new Utf8Column(b, 'event_id');
    const seqs = new Int64Column(b, 'item_seq');
    const attempts = new Int32Column(b, 'attempt');
    const types = new Utf8Column(b, 'event_type');
    const roots = new Utf8Column(b, 'root_item_id');
    const parents = new Utf8Column(b, 'parent_item_id');
    let agg: ItemAggregate | null = null;
    let aggRow = -1;
    for (let r = 0; r < b.numRows; r++) {
      if (!keep(r)) continue;
      // Rows of one item come in runs: decode the id only when it changes.
      if (agg === null || !itemIds.same(r, aggRow)) {
        const itemId = itemIds.get(r);
        if (itemId === null) throw new CorruptError(`column item_id is null in a stored event (row ${r})`);
        agg = this.items.get(itemId) ?? null;
        if (agg === null) {
          const seeded = this.seed?.get(itemId);
          // Shallow is enough: a row replaces the nested objects, never changes them.
          agg = seeded ? { ...seeded } : newAggregate(itemId);
          this.items.set(itemId, agg);
        }
      }
      aggRow = r;
      const seq = seqs.get(r);
      if (seq === null) throw new CorruptError(`column item_seq is null in a stored event of item ${agg.itemId}`);
      if (seq > agg.lastSeq) agg.lastSeq = seq;
      const attempt = attempts.get(r) ?? 0;
      if (attempt > agg.attempts) agg.attempts = attempt;
      if (before(seq, eventIds, r, agg.first)) {
        agg.first = posOf(seq, eventIds, r);
        agg.firstRoot = roots.get(r) ?? '';
        agg.firstParent = parents.get(r);
      }
      const type = eventTypeAt(types, r);
      switch (type) {
        case 'FIELD_SET':
        case 'FIELD_APPEND':
          break;
        case 'ITEM_CREATED':
          if (before(seq, eventIds, r, agg.created)) {
            agg.created = posOf(seq, eventIds, r);
            agg.root = roots.get(r);
            agg.parent = parents.get(r);
          }
          break;
        case 'STEP_COMPLETED': {
          const stepIndex = new Int64Column(b, 'step_index').get(r);
          const iteration = new Int64Column(b, 'iteration').get(r);
          const rank = agg.cursor === null ? 1 : compareStepRank(iteration, stepIndex, agg.cursor.iteration, agg.cursor.stepIndex);
          if (rank > 0 || (rank === 0 && after(seq, eventIds, r, agg.cursorAt))) {
            agg.cursorAt = posOf(seq, eventIds, r);
            agg.cursor = {
              stepName: str(b, 'step_name', r),
              stepIndex,
              stepInstanceId: str(b, 'step_instance_id', r),
              iteration,
              attempt,
              checkpointId: str(b, 'checkpoint_id', r) ?? '',
            };
          }
          if (after(seq, eventIds, r, agg.stepAt)) {
            agg.stepAt = posOf(seq, eventIds, r);
            agg.stepFailed = false;
          }
          break;
        }
        case 'FAILED':
          if (after(seq, eventIds, r, agg.failureAt)) {
            agg.failureAt = posOf(seq, eventIds, r);
            agg.failure = {
              stepName: str(b, 'step_name', r),
              attempt,
              errorType: str(b, 'error_type', r),
              errorDump: str(b, 'error_dump', r),
              traceback: str(b, 'traceback', r),
              seq,
            };
          }
          if (after(seq, eventIds, r, agg.stepAt)) {
            agg.stepAt = posOf(seq, eventIds, r);
            agg.stepFailed = true;
          }
          break;
        case 'TERMINAL': {
          const kind = str(b, 'terminal', r);
          if (kind !== 'completed' && kind !== 'filtered') {
            throw new CorruptError(`event ${eventIds.get(r)} (item ${JSON.stringify(agg.itemId)}, seq ${seq}): TERMINAL with terminal ${JSON.stringify(kind)}`);
          }
          if (after(seq, eventIds, r, agg.terminalAt)) {
            agg.terminalAt = posOf(seq, eventIds, r);
            agg.terminal = kind;
          }
          break;
        }
        default:
          throw new CorruptError(`event ${eventIds.get(r)} (item ${JSON.stringify(agg.itemId)}, seq ${seq}): unknown event_type ${JSON.stringify(type)}; upgrade dgcl`);
      }
    }
  }

  done(): ItemAggregate[] {
    const out = [...this.items.values()];
    if (this.seed) for (const [id, a] of this.seed) if (!this.items.has(id)) out.push(a);
    return out.sort((a, b) => compareUtf8(a.itemId, b.itemId));
  }
}

/** Whether `b` is set and comes before `a` (unset: nothing yet) in the item's order. */
function earlier(b: Pos | null, a: Pos | null): boolean {
  if (b === null) return false;
  return a === null || (b.seq !== a.seq ? b.seq < a.seq : b.id < a.id);
}

/** Whether `b` is set and comes after `a` (unset: nothing yet). */
function later(b: Pos | null, a: Pos | null): boolean {
  if (b === null) return false;
  return a === null || (b.seq !== a.seq ? b.seq > a.seq : b.id > a.id);
}

/** Whether `b`'s cursor is set and comes after `a`'s in step order (lib/step-order.ts). */
function laterStep(b: ItemAggregate, a: ItemAggregate): boolean {
  if (b.cursor === null) return false;
  if (a.cursor === null) return true;
  const rank = compareStepRank(b.cursor.iteration, b.cursor.stepIndex, a.cursor.iteration, a.cursor.stepIndex);
  return rank > 0 || (rank === 0 && later(b.cursorAt, a.cursorAt));
}

/**
 * The aggregate of an item's events in `a` and in `b` together (two disjoint sets of rows, e.g.
 * two base fragments): each aspect is the earliest or latest of both, as the visitor would pick.
 */
export function mergeAggregates(a: ItemAggregate, b: ItemAggregate): ItemAggregate {
  const m: ItemAggregate = { ...a, lastSeq: Math.max(a.lastSeq, b.lastSeq), attempts: Math.max(a.attempts, b.attempts) };
  if (earlier(b.first, a.first)) Object.assign(m, { first: b.first, firstRoot: b.firstRoot, firstParent: b.firstParent });
  if (earlier(b.created, a.created)) Object.assign(m, { created: b.created, root: b.root, parent: b.parent });
  if (laterStep(b, a)) Object.assign(m, { cursorAt: b.cursorAt, cursor: b.cursor });
  if (later(b.stepAt, a.stepAt)) Object.assign(m, { stepAt: b.stepAt, stepFailed: b.stepFailed });
  if (later(b.failureAt, a.failureAt)) Object.assign(m, { failureAt: b.failureAt, failure: b.failure });
  if (later(b.terminalAt, a.terminalAt)) Object.assign(m, { terminalAt: b.terminalAt, terminal: b.terminal });
  return m;
}

/** Rare columns (only on step events) are read through a column made per use. */
function str(b: arrow.RecordBatch, name: string, r: number): string | null {
  return new Utf8Column(b, name).get(r);
}

function newAggregate(itemId: string): ItemAggregate {
  return {
    itemId,
    lastSeq: -Infinity,
    attempts: 0,
    first: null,
    firstRoot: '',
    firstParent: null,
    created: null,
    root: null,
    parent: null,
    cursorAt: null,
    cursor: null,
    stepAt: null,
    stepFailed: false,
    failureAt: null,
    failure: null,
    terminalAt: null,
    terminal: null,
  };
}

/**
 * Item ids in UTF-8 byte order, the order Lance's SQL compares strings in (so a page cursor
 * pushed down as `item_id > after` agrees with the listing). JavaScript's `<` compares UTF-16
 * code units, which orders U+E000..U+FFFF after astral characters; UTF-8 does the opposite.
 */
export function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Below the surrogates both orders agree; otherwise compare the encoded bytes.
    if (x < 0xd800 && y < 0xd800) return x - y;
    // Start at the whole character (a pair that differs in its low surrogate shares the high one).
    const from = i > 0 && x >= 0xdc00 && x < 0xe000 ? i - 1 : i;
    return Buffer.compare(Buffer.from(a.slice(from), 'utf8'), Buffer.from(b.slice(from), 'utf8'));
  }
  return a.length - b.length;
}
