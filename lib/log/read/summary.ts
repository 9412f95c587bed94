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
import { compareInKind, inLoop, laterOfKinds, type StepRank } from '../../step-order.ts';
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

/** Whether a step (rank, at) comes after (thanRank, thanAt) of its kind: step order, then the log. */
function laterInKind(rank: StepRank, at: Pos, thanRank: StepRank | null, thanAt: Pos | null): boolean {
  if (thanRank === null) return true;
  const c = compareInKind(rank, thanRank);
  return c !== 0 ? c > 0 : later(at, thanAt);
}

const rankOf = (c: Cursor): StepRank => ({ iteration: c.iteration, index: c.stepIndex });

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
  /** The STEP_COMPLETED last in step order of the steps outside loops (no iteration). */
  cursorAt: Pos | null;
  cursor: Cursor | null;
  /** ... and of the steps of loops: the cursor is the later of both (lib/step-order.ts). */
  loopCursorAt: Pos | null;
  loopCursor: Cursor | null;
  /** The last STEP_COMPLETED or FAILED in the log, and whether it was a FAILED. */
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

/** The item's cursor: the later of the last loop step and the last step outside loops. */
export function cursorOf(a: ItemAggregate): Cursor | null {
  if (a.loopCursor === null || a.cursor === null) return a.loopCursor ?? a.cursor;
  const loop = { ...rankOf(a.loopCursor), c: a.loopCursor, at: a.loopCursorAt };
  const plain = { ...rankOf(a.cursor), c: a.cursor, at: a.cursorAt };
  return laterOfKinds(loop, plain, (x, y) => later(x.at, y.at))!.c;
}

export function summaryOf(a: ItemAggregate): ItemSummary {
  // The cursor is copied: an aggregate may be the process's cached projection's
  // (lib/log/projection/projection.ts), and a caller changing its page must not change later listings.
  const cursor = cursorOf(a);
  return { itemId: a.itemId, status: statusOf(a), cursor: cursor && { ...cursor }, lastSeq: a.lastSeq };
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
          const rank = { iteration: new Int64Column(b, 'iteration').get(r), index: new Int64Column(b, 'step_index').get(r) };
          const at = posOf(seq, eventIds, r);
          const loop = inLoop(rank);
          const now = loop ? agg.loopCursor : agg.cursor;
          if (laterInKind(rank, at, now && rankOf(now), loop ? agg.loopCursorAt : agg.cursorAt)) {
            const cursor: Cursor = {
              stepName: str(b, 'step_name', r),
              stepIndex: rank.index,
              stepInstanceId: str(b, 'step_instance_id', r),
              iteration: rank.iteration,
              attempt,
              checkpointId: str(b, 'checkpoint_id', r) ?? '',
            };
            if (loop) Object.assign(agg, { loopCursorAt: at, loopCursor: cursor });
            else Object.assign(agg, { cursorAt: at, cursor });
          }
          if (later(at, agg.stepAt)) Object.assign(agg, { stepAt: at, stepFailed: false });
          break;
        }
        case 'FAILED': {
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
          if (after(seq, eventIds, r, agg.stepAt)) Object.assign(agg, { stepAt: posOf(seq, eventIds, r), stepFailed: true });
          break;
        }
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

/** Whether cursor `b` (at `bAt`) is set and comes after `a` (of one kind) in step order, then in the log. */
function laterCursor(b: Cursor | null, bAt: Pos | null, a: Cursor | null, aAt: Pos | null): boolean {
  return b !== null && bAt !== null && laterInKind(rankOf(b), bAt, a && rankOf(a), aAt);
}

/**
 * The aggregate of an item's events in `a` and in `b` together (two disjoint sets of rows, e.g.
 * two base fragments): each aspect is the earliest or latest of both, as the visitor would pick.
 */
export function mergeAggregates(a: ItemAggregate, b: ItemAggregate): ItemAggregate {
  const m: ItemAggregate = { ...a, lastSeq: Math.max(a.lastSeq, b.lastSeq), attempts: Math.max(a.attempts, b.attempts) };
  if (earlier(b.first, a.first)) Object.assign(m, { first: b.first, firstRoot: b.firstRoot, firstParent: b.firstParent });
  if (earlier(b.created, a.created)) Object.assign(m, { created: b.created, root: b.root, parent: b.parent });
  if (laterCursor(b.cursor, b.cursorAt, a.cursor, a.cursorAt)) Object.assign(m, { cursorAt: b.cursorAt, cursor: b.cursor });
  if (laterCursor(b.loopCursor, b.loopCursorAt, a.loopCursor, a.loopCursorAt)) Object.assign(m, { loopCursorAt: b.loopCursorAt, loopCursor: b.loopCursor });
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
    loopCursorAt: null,
    loopCursor: null,
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
