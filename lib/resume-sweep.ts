/**
 * Resuming what stalled (docs/operations.md, "Resuming stalled items after an outage"): every
 * item that is not terminal and whose last event is older than a duration, page by page, and
 * sending each a resume instruction.
 *
 * `stalledItems` walks the item listing a page at a time (`items({limit, after})`), so memory
 * holds one page; for the page's non-terminal items one streaming read of four narrow columns,
 * filtered to those ids, finds each one's last event (greatest seq) and its time. The time is the
 * writer's clock at the append (`event_ts`), so writers' clocks must roughly agree for the age to
 * mean anything.
 *
 * `sendResumes` folds each stalled item again just before sending: an item that got an event
 * since (`moved`), ended or was deleted is not sent. An instruction carries the item's `lastSeq`,
 * so sending twice is harmless: on a FIFO queue (item, lastSeq) is the deduplication id, and a
 * worker drops an instruction whose `lastSeq` is below the item's (functions/shared/resume-sink.ts).
 */
import { mapLimit } from './map-limit.ts';
import type * as arrow from 'apache-arrow';
import type { CheckpointLog, ItemPage } from './api.ts';
import { readsOf } from './log/reads.ts';
import { InvalidInputError, NotFoundError } from './errors.ts';
import { formatEventTs } from './fold.ts';
import { Int64Column, Utf8Column } from './log/columns.ts';
import type { EventVisitor, ScanOptions } from './log/read/stream.ts';
import { sqlIn } from './log/tables.ts';
import { resumeInstruction, type ResumeInstruction } from './resume.ts';
import type { Cursor, ItemQuery, ItemState, ItemStatus } from './types.ts';
import type { Where } from './select/where.ts';

/** What a sweep reads of a log: its listing, and scans of its read side (lib/log/reads.ts). */
export interface SweepLog {
  items(query: ItemQuery): Promise<ItemPage>;
  scanEvents<T>(o: ScanOptions, make: () => EventVisitor<T>): Promise<T>;
}

/** A log `openLog` returned, as a sweep reads it. */
function sweepLogOf(log: CheckpointLog | SweepLog): SweepLog {
  if ('scanEvents' in log) return log;
  const reads = readsOf(log);
  return { items: (q) => log.items(q), scanEvents: (o, make) => reads.scanEvents(o, make) };
}

export interface StalledItem {
  itemId: string;
  status: ItemStatus;
  cursor: Cursor | null;
  /** The seq of the item's last event. */
  lastSeq: number;
  /** When the last event was appended (ISO 8601 UTC, microseconds). */
  lastEventAt: string;
  /** How long before the sweep's `now` that was, in milliseconds. */
  idleMs: number;
}

/**
 * A filter over stalled items (a `--where` expression compiled by a select module, say); async
 * so that it may read more of the item. Only items it returns true for are yielded.
 */
export type StalledPredicate = (item: StalledItem) => boolean | Promise<boolean>;

export interface StalledOptions {
  /** Items whose last event is more than this many milliseconds before `now`. */
  stalledForMs: number;
  /** Milliseconds since the Unix epoch the ages are measured from; fixed for the whole sweep (default: the time of the call). */
  now?: number;
  predicate?: StalledPredicate;
  /** Only the items this filter selects (lib/select/, the listing's `where`). */
  where?: Where;
  /** Items listed per page (default 1000). */
  pageSize?: number;
  /** Stop after this many stalled items. */
  limit?: number;
}

/** How far a sweep got; updated as it goes. */
export interface SweepCounts {
  pages: number;
  /** Items listed (every status). */
  items: number;
  terminal: number;
  /** Items yielded (stalled, and accepted by the predicate). */
  stalled: number;
}

export interface StalledItems extends AsyncIterable<StalledItem> {
  readonly counts: SweepCounts;
}

export const DEFAULT_SWEEP_PAGE = 1000;
/** Largest page: the listing's own bound for one request (the fold handler's `limit`). */
export const MAX_SWEEP_PAGE = 10_000;
/** Ids per filtered read of last events (the SQL stays short; Lance answers it from the item_id index). */
const IDS_PER_READ = 1000;

function checkOptions(o: StalledOptions): Required<Pick<StalledOptions, 'stalledForMs' | 'now' | 'pageSize'>> {
  if (!Number.isSafeInteger(o.stalledForMs) || o.stalledForMs < 1) {
    throw new InvalidInputError(`stalledForMs must be a positive integer (milliseconds), got ${JSON.stringify(o.stalledForMs)}`, { field: 'stalledForMs' });
  }
  const now = o.now ?? Date.now();
  if (!Number.isSafeInteger(now) || now < 0) throw new InvalidInputError(`now must be milliseconds since the Unix epoch, got ${JSON.stringify(o.now)}`, { field: 'now' });
  const pageSize = o.pageSize ?? DEFAULT_SWEEP_PAGE;
  if (!Number.isSafeInteger(pageSize) || pageSize < 1 || pageSize > MAX_SWEEP_PAGE) {
    throw new InvalidInputError(`pageSize must be an integer from 1 to ${MAX_SWEEP_PAGE}, got ${JSON.stringify(o.pageSize)}`, { field: 'pageSize' });
  }
  if (o.limit !== undefined && (!Number.isSafeInteger(o.limit) || o.limit < 1)) {
    throw new InvalidInputError(`limit must be a positive integer, got ${JSON.stringify(o.limit)}`, { field: 'limit' });
  }
  return { stalledForMs: o.stalledForMs, now, pageSize };
}

/**
 * Every non-terminal item whose last event is more than `stalledForMs` before `now`, in item id
 * order, each once. Options are checked at the call, before any read.
 */
export function stalledItems(from: CheckpointLog | SweepLog, o: StalledOptions): StalledItems {
  const log = sweepLogOf(from);
  const checked = checkOptions(o);
  const counts: SweepCounts = { pages: 0, items: 0, terminal: 0, stalled: 0 };
  return { counts, [Symbol.asyncIterator]: () => sweep(log, { ...o, ...checked }, counts) };
}

async function* sweep(log: SweepLog, o: StalledOptions & { now: number; pageSize: number }, counts: SweepCounts): AsyncGenerator<StalledItem> {
  // Microseconds, as event_ts is stored: older than the cutoff = stalled.
  const cutoffUs = (o.now - o.stalledForMs) * 1000;
  let after: string | undefined;
  do {
    const page = await log.items({ limit: o.pageSize, ...(after === undefined ? {} : { after }), ...(o.where ? { where: o.where } : {}) });
    counts.pages++;
    counts.items += page.items.length;
    const open = page.items.filter((i) => i.status !== 'completed' && i.status !== 'filtered');
    counts.terminal += page.items.length - open.length;
    const last = await lastEvents(log, open.map((i) => i.itemId));
    for (const s of open) {
      const e = last.get(s.itemId);
      // No visible event: deleted after the listing.
      if (e === undefined || e.tsUs >= cutoffUs) continue;
      const item: StalledItem = { itemId: s.itemId, status: s.status, cursor: s.cursor, lastSeq: e.seq, lastEventAt: formatEventTs(e.tsUs), idleMs: Math.floor(o.now - e.tsUs / 1000) };
      if (o.predicate && !(await o.predicate(item))) continue;
      counts.stalled++;
      yield item;
      if (o.limit !== undefined && counts.stalled >= o.limit) return;
    }
    after = page.next;
  } while (after !== undefined);
}

interface LastEvent {
  seq: number;
  id: string;
  tsUs: number;
}

/** Each item's last event (greatest (seq, event id), as the listing orders them). */
async function lastEvents(log: SweepLog, ids: readonly string[]): Promise<Map<string, LastEvent>> {
  const out = new Map<string, LastEvent>();
  for (let i = 0; i < ids.length; i += IDS_PER_READ) {
    const chunk = ids.slice(i, i + IDS_PER_READ);
    const found = await log.scanEvents({ columns: LAST_EVENT_COLUMNS, filter: sqlIn('item_id', chunk) }, () => new LastEventVisitor());
    for (const [id, e] of found) out.set(id, e);
  }
  return out;
}

const LAST_EVENT_COLUMNS = ['item_id', 'item_seq', 'event_id', 'event_ts'] as const;

class LastEventVisitor implements EventVisitor<Map<string, LastEvent>> {
  private readonly last = new Map<string, LastEvent>();
  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    const items = new Utf8Column(b, 'item_id');
    const seqs = new Int64Column(b, 'item_seq');
    const ids = new Utf8Column(b, 'event_id');
    const ts = new Int64Column(b, 'event_ts');
    for (let r = 0; r < b.numRows; r++) {
      if (!keep(r)) continue;
      const itemId = items.get(r)!;
      const seq = seqs.get(r)!;
      const cur = this.last.get(itemId);
      if (cur !== undefined && seq < cur.seq) continue;
      const id = ids.get(r) ?? '';
      if (cur !== undefined && seq === cur.seq && id <= cur.id) continue;
      this.last.set(itemId, { seq, id, tsUs: ts.get(r)! });
    }
  }
  done(): Map<string, LastEvent> {
    return this.last;
  }
}

// ------------------------------------------------------------------------------ sending

/** An error as a sender reports it (functions/shared/errors.ts ErrorSummary has these). */
export interface SendError {
  name: string;
  code: string;
  message: string;
  retryable: boolean;
}

/** Where instructions go (functions/shared/resume-sink.ts: SQS, or memory). */
export interface ResumeSender {
  /** Sends every instruction it can; never throws for one that failed (see `failed`). */
  send(instructions: readonly ResumeInstruction[]): Promise<{ sent: readonly ResumeInstruction[]; failed: ReadonlyArray<{ instruction: ResumeInstruction; error: SendError }> }>;
}

/**
 * Why a stalled item was not sent: it got an event since the sweep saw it (`moved`), ended
 * (`terminal`), was deleted (`missing`), or its fold or send failed (`failed`, with `error`).
 */
export type NotSentReason = 'moved' | 'terminal' | 'missing' | 'failed';

export interface SendResult {
  item: StalledItem;
  sent: boolean;
  /** What was sent (`sent`), as the fold just before found the item. */
  instruction?: ResumeInstruction;
  reason?: NotSentReason;
  /** The item's status when it turned out terminal. */
  status?: ItemStatus;
  error?: SendError;
}

export interface SendOptions {
  pipeline: string;
  experiment: string;
  /** Stalled items folded and sent together (default 50). */
  chunk?: number;
  /** Folds at once (default 8). */
  concurrency?: number;
}

/**
 * Sends a resume instruction for each stalled item, `chunk` at a time, and yields what became of
 * each, in order. Stopping the iteration early stops after the chunk being sent.
 */
export async function* sendResumes(
  log: { fold(itemId: string): Promise<ItemState> },
  stalled: AsyncIterable<StalledItem>,
  sender: ResumeSender,
  o: SendOptions,
): AsyncGenerator<SendResult> {
  const size = o.chunk ?? 50;
  let chunk: StalledItem[] = [];
  for await (const item of stalled) {
    chunk.push(item);
    if (chunk.length >= size) {
      yield* await sendChunk(log, chunk, sender, o);
      chunk = [];
    }
  }
  if (chunk.length > 0) yield* await sendChunk(log, chunk, sender, o);
}

async function sendChunk(log: { fold(itemId: string): Promise<ItemState> }, items: StalledItem[], sender: ResumeSender, o: SendOptions): Promise<SendResult[]> {
  const results = await mapLimit(items, o.concurrency ?? 8, async (item): Promise<SendResult> => {
    let state: ItemState;
    try {
      state = await log.fold(item.itemId);
    } catch (e) {
      if (e instanceof NotFoundError) return { item, sent: false, reason: 'missing' };
      return { item, sent: false, reason: 'failed', error: errorOf(e) };
    }
    const instruction = resumeInstruction(o, state);
    if (instruction === null) return { item, sent: false, reason: 'terminal', status: state.status };
    if (state.lastSeq !== item.lastSeq) return { item, sent: false, reason: 'moved' };
    return { item, sent: false, instruction };
  });
  const pending = results.filter((r) => r.instruction !== undefined && r.reason === undefined);
  if (pending.length === 0) return results;
  // A sweep yields each item once, so the item id names its instruction within a chunk.
  const byItem = new Map(pending.map((r) => [r.item.itemId, r]));
  let outcome: Awaited<ReturnType<ResumeSender['send']>>;
  try {
    outcome = await sender.send(pending.map((r) => r.instruction!));
  } catch (e) {
    const error = errorOf(e);
    outcome = { sent: [], failed: pending.map((r) => ({ instruction: r.instruction!, error })) };
  }
  for (const i of outcome.sent) {
    const r = byItem.get(i.itemId);
    if (r) r.sent = true;
  }
  for (const f of outcome.failed) {
    const r = byItem.get(f.instruction.itemId);
    if (r) Object.assign(r, { sent: false, reason: 'failed', error: f.error });
  }
  // Neither sent nor failed by the sender's account: not sent, as far as anyone knows.
  for (const r of pending) if (!r.sent && r.reason === undefined) Object.assign(r, { reason: 'failed', error: { name: 'UnavailableError', code: 'UNAVAILABLE', message: 'the sender reported the instruction neither sent nor failed', retryable: true } });
  return results;
}

function errorOf(e: unknown): SendError {
  const d = e as { name?: unknown; code?: unknown; message?: unknown; retryable?: unknown } | null;
  return {
    name: typeof d?.name === 'string' ? d.name : 'Error',
    code: typeof d?.code === 'string' ? d.code : 'INTERNAL',
    message: typeof d?.message === 'string' ? d.message : String(e),
    retryable: d?.retryable === true,
  };
}
