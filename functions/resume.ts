/**
 * `resume` handler (docs/design/handlers.md). Input:
 *  - direct `{pipeline, experiment, itemIds: [...]}`;
 *  - an SQS event whose record bodies are `{pipeline, experiment, itemId}` (or `itemIds`);
 *  - an EventBridge event whose `detail` is the same;
 *  - a sweep, direct or as an EventBridge `detail` (what the stack's schedule sends):
 *    `{pipeline, experiment, stalledForMs, limit?}`, every non-terminal item whose last event is
 *    older than that (lib/resume-sweep.ts).
 * Folds each item, and for every resumable one sends to DGCL_RESUME_QUEUE_URL
 * `{pipeline, experiment, itemId, status, cursor, nextStepIndex, resumeBy, attempt, lastSeq}`
 * (lib/resume.ts: the step after the cursor, by index, or by name (`nextStepIndex` null) when
 * the cursor has no step index; a failed step again with attempt + 1). Terminal items are
 * reported, not resumed; unknown items are reported as missing.
 *
 * Returns `{sent, terminal, missing, failed}`; for SQS also `batchItemFailures` (records that
 * were invalid or whose items could not be folded or sent); for a sweep also `sweep` (what it
 * looked at, and whether it finished before the invocation's deadline). A direct or EventBridge
 * invocation with failures throws after sending the rest (a retry re-sends; duplicates are
 * harmless).
 */
import type { Context, SQSBatchResponse } from 'aws-lambda';
import { INPUT_ERROR_CODES, InternalError, InvalidInputError, NotFoundError, UnavailableError } from '../lib/errors.ts';
import { resumeInstruction } from '../lib/resume.ts';
import { sendResumes, stalledItems } from '../lib/resume-sweep.ts';
import type { ItemStatus } from '../lib/types.ts';
import { readConfig, requireResumeQueueUrl, type HandlerConfig } from './shared/config.ts';
import { summarizeError, toLambdaError, type ErrorSummary } from './shared/errors.ts';
import { logCache } from './shared/logs.ts';
import { lambdaHandler, MetricUnit, observability } from './shared/observability.ts';
import { SqsResumeSink, sqsClient, type ResumeInstruction, type ResumeSink } from './shared/resume-sink.ts';
import {
  isEventBridgeEvent,
  isSqsEvent,
  isSweepRequest,
  parseInput,
  parseJson,
  ResumeDirectSchema,
  ResumeMessageSchema,
  ResumeSweepDetailSchema,
  ResumeSweepSchema,
  SqsRecordSchema,
} from './shared/schemas.ts';
import { beforeDeadline, deadlineOf, leaseTtlFor, mapLimit, untilDeadline, withinDeadline } from './shared/time.ts';

const obs = observability('resume');
const { logger, metrics } = obs;

/** Items folded at once per experiment. */
export const FOLD_CONCURRENCY = 8;

export interface ItemRef {
  pipeline: string;
  experiment: string;
  itemId: string;
}

export interface ResumeResult {
  sent: ResumeInstruction[];
  terminal: Array<ItemRef & { status: ItemStatus }>;
  missing: ItemRef[];
  failed: Array<Partial<ItemRef> & { messageId?: string; error: ErrorSummary }>;
}

/** What a sweep looked at. */
export interface SweepSummary {
  pipeline: string;
  experiment: string;
  stalledForMs: number;
  /** Items listed (every status), of them terminal, and stalled (idle for more than `stalledForMs`). */
  items: number;
  terminal: number;
  stalled: number;
  /** Stalled items that got an event between the sweep and their fold: not sent. */
  moved: number;
  /** False when the invocation's deadline (or `limit`) stopped it before the end of the listing. */
  complete: boolean;
}

export type ResumeResponse = ResumeResult & Partial<SQSBatchResponse> & { sweep?: SweepSummary };

export interface ResumeDeps {
  /** Where instructions go; default: SQS at DGCL_RESUME_QUEUE_URL. */
  sink?: (config: HandlerConfig) => ResumeSink;
}

function defaultSink(config: HandlerConfig): ResumeSink {
  return new SqsResumeSink({ client: sqsClient(config.env), queueUrl: requireResumeQueueUrl(config) });
}

/** The handler with its sink injected (tests, dry runs); `handler` is the SQS one. */
export function createResumeHandler(deps: ResumeDeps = {}) {
  const makeSink = deps.sink ?? defaultSink;
  return lambdaHandler(
    obs,
    async (event: unknown, context: Context): Promise<ResumeResponse> => {
      const config = readConfig();
      const sink = makeSink(config); // checks DGCL_RESUME_QUEUE_URL before any read
      if (isSqsEvent(event)) {
        const { requests, invalid } = parseSqs(event.Records);
        const run = await resumeItems(requests, context, config, sink);
        const result: ResumeResult = { ...run.result, failed: [...invalid.map((f) => ({ messageId: f.messageId, error: f.error })), ...run.result.failed] };
        const failedIds = new Set([...invalid.map((f) => f.messageId), ...run.failedMessageIds]);
        report(result);
        return { ...result, batchItemFailures: [...failedIds].map((itemIdentifier) => ({ itemIdentifier })) };
      }
      const bridged = isEventBridgeEvent(event);
      if (isSweepRequest(bridged ? event.detail : event)) {
        const request = bridged ? parseInput(ResumeSweepDetailSchema, event.detail, 'event.detail') : parseInput(ResumeSweepSchema, event);
        const run = await sweep(request, context, config, sink);
        report(run.result);
        reportSweep(run.result.sweep);
        if (run.errors.length > 0) throw aggregate(run.result, run.errors);
        return run.result;
      }
      const request = bridged ? toRequest(parseInput(ResumeMessageSchema, event.detail, 'event.detail')) : parseInput(ResumeDirectSchema, event);
      const run = await resumeItems([request], context, config, sink);
      report(run.result);
      if (run.errors.length > 0) throw aggregate(run.result, run.errors);
      return run.result;
    },
    { metrics: true },
  );
}

export const handler = createResumeHandler();

// ------------------------------------------------------------------------------ input

interface Request {
  pipeline: string;
  experiment: string;
  itemIds: string[];
  messageId?: string;
}

function toRequest(m: { pipeline: string; experiment: string; itemId?: string | undefined; itemIds?: string[] | undefined }): Request {
  return { pipeline: m.pipeline, experiment: m.experiment, itemIds: m.itemIds ?? [m.itemId!] };
}

function parseSqs(raw: unknown[]): { requests: Request[]; invalid: Array<{ messageId: string; error: ErrorSummary }> } {
  const requests: Request[] = [];
  const invalid: Array<{ messageId: string; error: ErrorSummary }> = [];
  raw.forEach((r, i) => {
    const messageId = (r as { messageId?: unknown } | null)?.messageId;
    // Without a messageId a record cannot be reported alone: the event itself is malformed.
    if (typeof messageId !== 'string' || messageId === '') {
      throw new InvalidInputError('must be a non-empty string (the SQS message id)', { field: `Records[${i}].messageId` });
    }
    try {
      const record = parseInput(SqsRecordSchema, r, `Records[${i}]`);
      const m = parseInput(ResumeMessageSchema, parseJson(record.body, `Records[${i}].body`), `Records[${i}].body`);
      requests.push({ ...toRequest(m), messageId });
    } catch (e) {
      invalid.push({ messageId, error: summarizeError(e) });
    }
  });
  return { requests, invalid };
}

// ------------------------------------------------------------------------------ work

interface Run {
  result: ResumeResult;
  failedMessageIds: Set<string>;
  errors: unknown[];
}

async function resumeItems(requests: Request[], context: Context, config: HandlerConfig, sink: ResumeSink): Promise<Run> {
  const deadline = deadlineOf(context);
  const result: ResumeResult = { sent: [], terminal: [], missing: [], failed: [] };
  const failedMessageIds = new Set<string>();
  const errors: unknown[] = [];

  // Items per experiment, each once, remembering which messages named it.
  const experiments = new Map<string, { pipeline: string; experiment: string; items: Map<string, string[]> }>();
  for (const r of requests) {
    const key = `${r.pipeline}/${r.experiment}`;
    let x = experiments.get(key);
    if (!x) experiments.set(key, (x = { pipeline: r.pipeline, experiment: r.experiment, items: new Map() }));
    for (const id of r.itemIds) {
      const by = x.items.get(id) ?? [];
      if (r.messageId !== undefined) by.push(r.messageId);
      x.items.set(id, by);
    }
  }
  const fail = (ref: ItemRef, e: unknown, messageIds: readonly string[]) => {
    errors.push(e);
    result.failed.push({ ...ref, error: summarizeError(e) });
    for (const m of messageIds) failedMessageIds.add(m);
  };

  const instructions: Array<{ instruction: ResumeInstruction; messageIds: string[] }> = [];
  await Promise.all(
    [...experiments.values()].map(async (x) => {
      const ids = [...x.items.keys()];
      let log;
      try {
        ({ log } = await logCache.get(config, x.pipeline, x.experiment, { leaseTtlMs: leaseTtlFor(context, config.leaseTtlMaxMs) }));
      } catch (e) {
        for (const itemId of ids) fail({ pipeline: x.pipeline, experiment: x.experiment, itemId }, e, x.items.get(itemId)!);
        return;
      }
      await mapLimit(ids, FOLD_CONCURRENCY, async (itemId) => {
        const ref = { pipeline: x.pipeline, experiment: x.experiment, itemId };
        const messageIds = x.items.get(itemId)!;
        try {
          const state = await withinDeadline(log.fold(itemId), deadline, `fold of ${itemId}`);
          const instruction = resumeInstruction(x, state);
          if (instruction === null) {
            result.terminal.push({ ...ref, status: state.status });
            return;
          }
          instructions.push({ instruction, messageIds });
        } catch (e) {
          if (e instanceof NotFoundError) result.missing.push(ref);
          else fail(ref, e, messageIds);
        }
      });
    }),
  );

  if (instructions.length > 0) {
    const byInstruction = new Map(instructions.map((i) => [i.instruction, i.messageIds]));
    let outcome;
    try {
      outcome = await withinDeadline(sink.send(instructions.map((i) => i.instruction)), deadline, `sending ${instructions.length} resume instruction(s)`);
    } catch (e) {
      const error = summarizeError(e);
      outcome = { sent: [], failed: instructions.map((i) => ({ instruction: i.instruction, error })) };
      errors.push(e);
    }
    result.sent.push(...outcome.sent);
    for (const f of outcome.failed) {
      const { pipeline, experiment, itemId } = f.instruction;
      result.failed.push({ pipeline, experiment, itemId, error: f.error });
      errors.push(errorOfSummary(f.error));
      for (const m of byInstruction.get(f.instruction) ?? []) failedMessageIds.add(m);
    }
  }
  return { result, failedMessageIds, errors };
}

/** The error a failure summary stands for (its kind kept: retry, fix the input, or a bug). */
function errorOfSummary(e: ErrorSummary): Error {
  return e.retryable ? new UnavailableError(e.message) : isInvalidSummary(e) ? new InvalidInputError(e.message) : new InternalError(e.message);
}

/**
 * A sweep of one experiment: stalled items found page by page and sent chunk by chunk
 * (lib/resume-sweep.ts) until the listing ends or the deadline comes; what was sent by then
 * stays sent, and the next sweep finds the rest again (sending twice is harmless).
 */
async function sweep(
  s: { pipeline: string; experiment: string; stalledForMs: number; limit?: number | undefined },
  context: Context,
  config: HandlerConfig,
  sink: ResumeSink,
): Promise<{ result: ResumeResult & { sweep: SweepSummary }; errors: unknown[] }> {
  const deadline = deadlineOf(context);
  const at = { pipeline: s.pipeline, experiment: s.experiment };
  const summary: SweepSummary = { ...at, stalledForMs: s.stalledForMs, items: 0, terminal: 0, stalled: 0, moved: 0, complete: false };
  const result = { sent: [], terminal: [], missing: [], failed: [], sweep: summary } as ResumeResult & { sweep: SweepSummary };
  const errors: unknown[] = [];
  // A log that cannot be opened, or does not exist, fails the invocation: there is nothing to sweep.
  const { log } = await logCache.get(config, s.pipeline, s.experiment, { leaseTtlMs: leaseTtlFor(context, config.leaseTtlMaxMs) });
  const stalled = stalledItems(log, { stalledForMs: s.stalledForMs, ...(s.limit !== undefined ? { limit: s.limit } : {}) });
  const results = sendResumes(log, stalled, sink, { ...at, concurrency: FOLD_CONCURRENCY });
  let listingEnded = false;
  try {
    while (untilDeadline(deadline) > 0) {
      const next = await beforeDeadline(results.next(), deadline);
      if (!next.done) break; // the deadline came first; that chunk goes on unreported
      if (next.value.done) {
        listingEnded = true;
        break;
      }
      const r = next.value.value;
      const ref = { ...at, itemId: r.item.itemId };
      if (r.sent) result.sent.push(r.instruction!);
      else if (r.reason === 'terminal') result.terminal.push({ ...ref, status: r.status! });
      else if (r.reason === 'missing') result.missing.push(ref);
      else if (r.reason === 'moved') summary.moved++;
      else if (r.error) {
        result.failed.push({ ...ref, error: { ...r.error } });
        errors.push(errorOfSummary(r.error));
      }
    }
  } catch (e) {
    // A page that could not be read: what was sent stays sent.
    errors.push(e);
    result.failed.push({ ...at, error: summarizeError(e) });
  } finally {
    // Stops the sweep after a chunk still being sent (if the deadline cut it): no further page is read.
    results.return(undefined).catch(() => undefined);
  }
  Object.assign(summary, { items: stalled.counts.items, terminal: stalled.counts.terminal, stalled: stalled.counts.stalled });
  summary.complete = listingEnded && (s.limit === undefined || stalled.counts.stalled < s.limit);
  return { result, errors };
}

function reportSweep(s: SweepSummary): void {
  logger.info('resume sweep done', { ...s });
  if (!s.complete) {
    metrics.addMetric('ResumeSweepIncomplete', MetricUnit.Count, 1);
    logger.warn('resume sweep stopped before the end of the listing (deadline or limit); the next sweep goes over it again', { ...s });
  }
}

function report(result: ResumeResult): void {
  metrics.addMetric('ResumeSent', MetricUnit.Count, result.sent.length);
  metrics.addMetric('ResumeTerminal', MetricUnit.Count, result.terminal.length);
  metrics.addMetric('ResumeMissing', MetricUnit.Count, result.missing.length);
  metrics.addMetric('ResumeFailed', MetricUnit.Count, result.failed.length);
  for (const f of result.failed) {
    if (isInvalidSummary(f.error)) logger.warn('resume request rejected: invalid', { ...f });
    else logger.error('resume of an item failed', { ...f });
  }
  logger.info('resume done', { sent: result.sent.length, terminal: result.terminal.length, missing: result.missing.length, failed: result.failed.length });
}

function isInvalidSummary(e: ErrorSummary): boolean {
  return (INPUT_ERROR_CODES as readonly string[]).includes(e.code);
}

/**
 * The error of a direct/EventBridge invocation with failures (the rest was sent): the first
 * permanent one as it is (its name tells the kind), else UnavailableError (a retry may help).
 */
function aggregate(result: ResumeResult, errors: unknown[]): Error {
  const permanent = errors.map(toLambdaError).find((e) => !e.retryable);
  if (permanent) return permanent;
  const what = `${result.failed.length} item(s) could not be resumed (sent ${result.sent.length}): ${result.failed
    .slice(0, 5)
    .map((f) => `${f.itemId ?? f.messageId ?? `${f.pipeline}/${f.experiment}`}: ${f.error.name}: ${f.error.message}`)
    .join('; ')}`;
  return new UnavailableError(`${what}; retrying re-sends (duplicates are harmless)`);
}
