/**
 * Durable steps: run a pipeline step's code at most once per success, on the log.
 *
 *   const item = await log.item('doc-1', { runId });
 *   const out = await item.step('generate', 2, async (ctx) => ({ set: { answer } }));
 *   await item.terminal('completed');
 *
 * `step` runs the function only when the step (name, index) has no STEP_COMPLETED yet; otherwise
 * it returns the recorded fields without calling it (Temporal/DBOS-style replay). A throw is
 * recorded as FAILED (error type, message, stack) and rethrown; the next call of that step runs
 * it again with attempt + 1. The step's checkpoint batch is the durable record: its ack is the
 * moment the step counts as done, so a crash before the ack reruns the function, a crash after it
 * does not (at most once per success, at least once until one succeeds).
 *
 * Errors: a step of a terminal item that never completed, or a second terminal(), throws
 * ItemTerminalError (ITEM_TERMINAL) and writes nothing. What the function returns is checked
 * before anything is written (InvalidInputError naming the step; the step runs again next time):
 * nothing (`undefined`: STEP_COMPLETED alone), or an object of `set` (field -> value) and
 * `append` (field -> array) only; a misspelt key, a bare value or fields at the top level are
 * refused rather than recorded as a step that set nothing. A step whose index is below the
 * item's cursor (the completed step last in step order, lib/step-order.ts; steps run here have no
 * iteration) is refused before the function runs: the pipeline is running its steps out of order,
 * and a resume from the cursor would never run that step. The log itself accepts such a batch
 * (a late delivery of a valid batch is always written or answered duplicate).
 *
 * One process per item at a time (route an item to one worker, as the log's I5 asks): two
 * processes running the same step concurrently may both run it; the log then keeps both batches
 * (different content) and the later one wins for the fields.
 */
import { z } from 'zod';
import { parseBatch } from './batch.ts';
import { decodeValue, valueColumns } from './codec.ts';
import { InvalidInputError, ItemTerminalError, NotFoundError } from './errors.ts';
import { StepChooser } from './step-order.ts';
import type { Ack, CheckpointBatchInput, EventRow, OutputValue, PreparedBatch, TerminalKind, TrajectoryEvent } from './types.ts';

/** What a step function returns: the fields its checkpoint batch sets and appends. */
export interface StepResult {
  set?: Record<string, unknown>;
  append?: Record<string, unknown[]>;
}

/** A step's recorded output, as the log returns it (blobs as `$blobRef`, large ints as `$int`). */
export interface StepOutput {
  set: Record<string, OutputValue>;
  append: Record<string, OutputValue[]>;
  /** True when the output was replayed from the log and the function was not called. */
  replayed: boolean;
  attempt: number;
  checkpointId: string;
}

export interface StepContext {
  itemId: string;
  runId: string;
  stepName: string;
  stepIndex: number | null;
  /** 1 on the first run of this step, + 1 after each recorded failure. */
  attempt: number;
}

export type StepFn = (ctx: StepContext) => Promise<StepResult | void> | StepResult | void;

/**
 * What durable steps use of a log: the two methods of CheckpointLog (lib/api.ts) they call.
 * Named here, not taken from CheckpointLog, because CheckpointLog's `item()` returns a
 * DurableItem: api.ts imports this file, and this file importing api.ts made an import loop.
 */
export interface StepLog {
  append(batches: CheckpointBatchInput[]): Promise<Ack[]>;
  trajectory(itemId: string): Promise<TrajectoryEvent[]>;
}

export interface ItemOptions {
  runId: string;
  /** Used when the item does not exist yet (its first step's batch creates it). */
  create?: { rootItemId?: string; parentItemId?: string };
  queryTags?: Record<string, unknown>;
}

interface Recorded {
  set: Record<string, OutputValue>;
  append: Record<string, OutputValue[]>;
  attempt: number;
  checkpointId: string;
}

const stepKey = (name: string, index: number | null) => `${index ?? ''}\u0000${name}`;

/** What a step function may return; the values themselves are checked by parseBatch. */
const StepResultSchema = z.strictObject({
  set: z.record(z.string(), z.unknown()).optional(),
  append: z.record(z.string(), z.array(z.unknown())).optional(),
});

/** The item's cursor (lib/step-order.ts): name, index and iteration. */
interface StepMark {
  name: string;
  index: number | null;
  iteration: number | null;
}

/** One item of a log, driven step by step. Obtain with `item(log, id, options)` or `log.item`. */
export class DurableItem {
  private created: boolean;
  private terminalKind: TerminalKind | null;
  private readonly completed: Map<string, Recorded>;
  /** Highest attempt recorded per step (failed or not). */
  private readonly attempts: Map<string, number>;
  /** Completed steps, for the cursor. */
  private readonly marks: StepChooser<StepMark>;

  constructor(
    private readonly log: Pick<StepLog, 'append'>,
    readonly itemId: string,
    private readonly o: ItemOptions,
    events: readonly TrajectoryEvent[],
  ) {
    const s = scanEvents(events);
    this.created = events.length > 0;
    this.terminalKind = s.terminal;
    this.completed = s.completed;
    this.attempts = s.attempts;
    this.marks = s.marks;
  }

  private get cursor(): StepMark | null {
    return this.marks.chosen;
  }

  /** The item's terminal kind, or null while it is open. */
  get terminalState(): TerminalKind | null {
    return this.terminalKind;
  }

  /** Whether step (name, index) has completed (its function will not run again). */
  isCompleted(name: string, index: number | null = null): boolean {
    return this.completed.has(stepKey(name, index));
  }

  async step(name: string, index: number | null, fn: StepFn): Promise<StepOutput> {
    const key = stepKey(name, index);
    const done = this.completed.get(key);
    if (done) return { ...done, replayed: true };
    if (this.terminalKind !== null) {
      throw new ItemTerminalError(`item ${JSON.stringify(this.itemId)} is terminal (${this.terminalKind}); step ${JSON.stringify(name)} never completed and cannot run`, this.itemId, {
        field: 'step',
      });
    }
    const what = `step ${JSON.stringify(name)}${index !== null ? ` (index ${index})` : ''} of item ${JSON.stringify(this.itemId)}`;
    const c = this.cursor;
    if (index !== null && c !== null && c.index !== null && c.iteration === null && index < c.index) {
      throw new InvalidInputError(
        `${what} comes after step ${JSON.stringify(c.name)} (index ${c.index}) completed: steps complete in index order, so a resume never runs a completed step again`,
        { field: 'step.index' },
      );
    }
    const attempt = (this.attempts.get(key) ?? 0) + 1;
    const base = this.baseBatch({ name, ...(index !== null ? { index } : {}) }, attempt);
    // Validate what we would write before running user code, so a bad name fails fast.
    parseBatch(base);
    let returned: unknown;
    try {
      returned = await fn({ itemId: this.itemId, runId: this.o.runId, stepName: name, stepIndex: index, attempt });
    } catch (e) {
      await this.record({ ...base, failed: failureOf(e) });
      this.attempts.set(key, attempt);
      throw e;
    }
    // Checked before anything is written: a wrong shape would otherwise complete the step with
    // no fields, and its output would be lost for good (the step never runs again).
    const result = checkResult(returned, what);
    const batch: CheckpointBatchInput = { ...base };
    if (result?.set) batch.set = result.set;
    if (result?.append) batch.append = result.append;
    let prepared: PreparedBatch;
    try {
      prepared = parseBatch(batch);
    } catch (e) {
      if (e instanceof InvalidInputError) throw new InvalidInputError(`${what} returned a value that cannot be stored: ${e.message}`, { field: e.field ?? 'result', cause: e });
      throw e;
    }
    const [ack] = await this.record(batch);
    this.attempts.set(key, attempt);
    const rec: Recorded = { ...outputsOf(prepared), attempt, checkpointId: ack!.checkpointId };
    this.completed.set(key, rec);
    this.marks.offer({ name, index, iteration: null });
    return { ...rec, replayed: false };
  }

  /** End the item (`completed` or `filtered`), optionally setting last fields. Idempotent. */
  async terminal(kind: TerminalKind, fields?: Record<string, unknown>): Promise<void> {
    if (this.terminalKind === kind) return;
    if (this.terminalKind !== null) {
      throw new ItemTerminalError(`item ${JSON.stringify(this.itemId)} is already terminal (${this.terminalKind})`, this.itemId, { field: 'terminal' });
    }
    await this.record({ ...this.baseBatch(null, 1), ...(fields ? { set: fields } : {}), terminal: kind });
    this.terminalKind = kind;
  }

  private baseBatch(step: CheckpointBatchInput['step'] | null, attempt: number): CheckpointBatchInput {
    const b: CheckpointBatchInput = { itemId: this.itemId, runId: this.o.runId, attempt };
    if (step) b.step = step;
    // ifMissing: another process may have created the item since this handle read it.
    if (!this.created) b.create = { ...this.o.create, ifMissing: true };
    if (this.o.queryTags) b.queryTags = this.o.queryTags;
    return b;
  }

  private async record(batch: CheckpointBatchInput) {
    const acks = await this.log.append([batch]);
    this.created = true;
    return acks;
  }
}

/** Open an item for durable steps: reads its events once (none if it does not exist yet). */
export async function item(log: StepLog, itemId: string, o: ItemOptions): Promise<DurableItem> {
  if (!o || typeof o.runId !== 'string') throw new InvalidInputError('runId must be a non-empty string', { field: 'runId' });
  let events: TrajectoryEvent[] = [];
  try {
    events = await log.trajectory(itemId);
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
  }
  return new DurableItem(log, itemId, o, events);
}

/** `returned` as a StepResult, or InvalidInputError naming the step and what is wrong. */
function checkResult(returned: unknown, what: string): StepResult | undefined {
  if (returned === undefined) return undefined;
  const r = StepResultSchema.safeParse(returned);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const at = issue.path.length > 0 ? issue.path.join('.') : null;
  const shape = returned === null ? 'null' : Array.isArray(returned) ? 'an array' : typeof returned === 'object' ? `an object with keys ${Object.keys(returned).map((k) => JSON.stringify(k)).join(', ') || '(none)'}` : `a ${typeof returned}`;
  const why = issue.code === 'unrecognized_keys' ? `unknown key${issue.keys.length === 1 ? '' : 's'} ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}` : at ? `${at}: ${issue.message}` : issue.message;
  throw new InvalidInputError(`${what} returned ${shape} (${why}); return nothing, or {set?: {field: value}, append?: {field: [values]}}; nothing was written, the step runs again next time`, {
    field: at ? `result.${at}` : 'result',
  });
}

function scanEvents(events: readonly TrajectoryEvent[]) {
  const completed = new Map<string, Recorded>();
  const attempts = new Map<string, number>();
  const byCheckpoint = new Map<string, { set: Record<string, OutputValue>; append: Record<string, OutputValue[]> }>();
  let terminal: TerminalKind | null = null;
  const marks = new StepChooser<StepMark>();
  for (const e of events) {
    let out = byCheckpoint.get(e.checkpointId);
    if (!out) byCheckpoint.set(e.checkpointId, (out = { set: {}, append: {} }));
    if (e.eventType === 'FIELD_SET' && e.fieldName !== undefined) out.set[e.fieldName] = e.value!;
    else if (e.eventType === 'FIELD_APPEND' && e.fieldName !== undefined) (out.append[e.fieldName] ??= []).push(e.value!);
    else if (e.eventType === 'TERMINAL') terminal = e.terminal ?? null;
    if (e.stepName === undefined) continue;
    const key = stepKey(e.stepName, e.stepIndex ?? null);
    if (e.eventType === 'FAILED' || e.eventType === 'STEP_COMPLETED') attempts.set(key, Math.max(attempts.get(key) ?? 0, e.attempt));
    // A batch's STEP_COMPLETED comes after its field events (lib/batch.ts), so `out` is whole.
    if (e.eventType === 'STEP_COMPLETED' && !completed.has(key)) completed.set(key, { ...out, attempt: e.attempt, checkpointId: e.checkpointId });
    // Events come in log order: of equal rank, the later one is the cursor (as the fold chooses).
    if (e.eventType === 'STEP_COMPLETED') marks.offer({ name: e.stepName, index: e.stepIndex ?? null, iteration: e.iteration ?? null });
  }
  return { completed, attempts, terminal, marks };
}

/** The output values of a prepared batch, exactly as a read of its events would decode them. */
function outputsOf(p: PreparedBatch): { set: Record<string, OutputValue>; append: Record<string, OutputValue[]> } {
  const set: Record<string, OutputValue> = {};
  const append: Record<string, OutputValue[]> = {};
  for (const e of p.events) {
    if (e.value === null || e.fieldName === null) continue;
    const v = decodeValue({ ...valueColumns(e.value), event_id: e.eventId } as EventRow);
    if (e.eventType === 'FIELD_SET') set[e.fieldName] = v;
    else (append[e.fieldName] ??= []).push(v);
  }
  return { set, append };
}

function failureOf(e: unknown): { errorType: string; errorDump?: string; traceback?: string } {
  if (e instanceof Error) {
    const errorType = (e.constructor?.name || e.name || 'Error').slice(0, 512);
    return { errorType, errorDump: e.message, ...(e.stack ? { traceback: e.stack } : {}) };
  }
  return { errorType: typeof e, errorDump: String(e) };
}
