/**
 * `append` handler (docs/design/handlers.md):
 *  - direct invocation `{pipeline, experiment, batches: [...]}` -> `{acks: [...]}`; invalid input
 *    fails with InvalidInputError (naming `batches[i].field`) and writes nothing;
 *  - SQS event: each record body is one batch plus `pipeline` and `experiment` ->
 *    `{batchItemFailures: [{itemIdentifier: messageId}]}` naming only the records that failed
 *    (invalid, or not durable).
 *
 * SQS records are validated one by one (an invalid record fails alone), grouped per experiment,
 * and appended concurrently, one `append` call per record, so the records of a batch share the
 * log's group commits while each keeps its own ack or error. Records of one FIFO message group
 * (the stack's append queue: MessageGroupId = root item id; without one, of one item) go in
 * rounds, in delivery order: the group's next record is appended only after the previous one was
 * acknowledged or found invalid; after any other failure the group's later records are failed
 * without being tried (SQS FIFO semantics: a group's redelivery must start at its first failed
 * record), so a redelivery can never put the group's batches out of order.
 *
 * The container keeps its log per experiment (functions/shared/logs.ts), hence its shard slot.
 */
import type { Context, SQSBatchResponse } from 'aws-lambda';
import type { CheckpointLog } from '../lib/api.ts';
import { parseBatch } from '../lib/batch.ts';
import { systemClock } from '../lib/clock.ts';
import { FencedError, InternalError, InvalidInputError, UnavailableError } from '../lib/errors.ts';
import type { Ack } from '../lib/types.ts';
import { readConfig, type HandlerConfig } from './shared/config.ts';
import { isInvalid, summarizeError, type ErrorSummary } from './shared/errors.ts';
import { logCache, type CachedLog } from './shared/logs.ts';
import { RECORD_FAILURES_METRIC } from './shared/metric-names.ts';
import { lambdaHandler, MetricUnit, observability } from './shared/observability.ts';
import { AppendDirectSchema, AppendMessageSchema, isSqsEvent, parseInput, parseJson, SqsRecordSchema } from './shared/schemas.ts';
import { beforeDeadline, deadlineOf, leaseTtlFor, untilDeadline, withinDeadline } from './shared/time.ts';

const obs = observability('append');
const { logger, metrics } = obs;

/** A merge of the own shard started by the handler is never begun with less time left. */
export const MERGE_BUDGET_MS = 10_000;

export interface AppendResult {
  acks: Ack[];
}

export const handler = lambdaHandler(
  obs,
  async (event: unknown, context: Context): Promise<AppendResult | SQSBatchResponse> => {
    const config = readConfig(process.env, { leases: true });
    if (isSqsEvent(event)) return appendSqs(event.Records, context, config);
    return appendDirect(event, context, config);
  },
  { metrics: true },
);

// ------------------------------------------------------------------------------ direct invocation

async function appendDirect(event: unknown, context: Context, config: HandlerConfig): Promise<AppendResult> {
  const input = parseInput(AppendDirectSchema, event);
  if (input.batches.length === 0) return { acks: [] };
  const deadline = deadlineOf(context);
  const entry = await openFor(config, context, input.pipeline, input.experiment);
  try {
    const acks = await withinDeadline(appendWithRetry(entry.log, input.batches), deadline, `appending ${input.batches.length} batch(es)`);
    const fresh = countAcks(entry, acks);
    logger.info('appended', { pipeline: input.pipeline, experiment: input.experiment, batches: acks.length, fresh, duplicates: acks.length - fresh });
    await maybeMerge(entry, config, deadline);
    return { acks };
  } finally {
    // Also when the append failed: a commit that landed may have started a merge.
    await settleMerges(entry, deadline);
  }
}

// ------------------------------------------------------------------------------ SQS event

export interface Rec {
  index: number;
  messageId: string;
  pipeline: string;
  experiment: string;
  itemId: string;
  /** `attributes.MessageGroupId` (FIFO queues only). */
  groupId: string | undefined;
  batch: Record<string, unknown>;
}

/**
 * What must stay in delivery order: the FIFO message group; on a standard queue (no group, no
 * order promised) at least the item's own records.
 */
export function orderKey(rec: { itemId: string; groupId: string | undefined }): string {
  return rec.groupId !== undefined ? `group:${rec.groupId}` : `item:${rec.itemId}`;
}

/** The records of one experiment as queues in delivery order, one queue per orderKey. */
export function orderQueues<R extends { itemId: string; groupId: string | undefined }>(recs: readonly R[]): R[][] {
  const byKey = new Map<string, R[]>();
  for (const r of recs) {
    const key = orderKey(r);
    let q = byKey.get(key);
    if (!q) byKey.set(key, (q = []));
    q.push(r);
  }
  return [...byKey.values()];
}

/**
 * Fails the rest of a queue untried after its record failed (not for invalid input: such a
 * record is never appended, so the order around it does not matter, and failing the rest with it
 * would send them all to the DLQ alongside it).
 */
export function failRest(queue: Rec[], error: ErrorSummary, outcomes: Outcome[]): void {
  for (const later of queue.splice(0)) {
    const what = later.groupId !== undefined ? `message group ${JSON.stringify(later.groupId)}` : `item ${JSON.stringify(later.itemId)}`;
    outcomes[later.index] = { kind: 'failed', error: { ...error, message: `not tried: an earlier record of ${what} in this batch failed (${error.message})` } };
  }
}

export type Outcome =
  | { kind: 'ok'; ack: Ack }
  | { kind: 'invalid'; error: ErrorSummary }
  | { kind: 'failed'; error: ErrorSummary };

async function appendSqs(raw: unknown[], context: Context, config: HandlerConfig): Promise<SQSBatchResponse> {
  const deadline = deadlineOf(context);
  const outcomes: Outcome[] = new Array(raw.length);
  const messageIds = raw.map((r, i) => {
    const id = (r as { messageId?: unknown } | null)?.messageId;
    // Without a messageId a record cannot be reported alone: the event itself is malformed.
    if (typeof id !== 'string' || id === '') throw new InvalidInputError('must be a non-empty string (the SQS message id)', { field: `Records[${i}].messageId` });
    return id;
  });

  // 1. Validate each record on its own (pure, no I/O).
  const groups = new Map<string, Rec[]>();
  raw.forEach((r, index) => {
    try {
      const rec = parseRecord(r, index, messageIds[index]!);
      const key = `${rec.pipeline}/${rec.experiment}`;
      let list = groups.get(key);
      if (!list) groups.set(key, (list = []));
      list.push(rec);
    } catch (e) {
      outcomes[index] = { kind: isInvalid(e) ? 'invalid' : 'failed', error: summarizeError(e) };
    }
  });

  // 2. Append per experiment, concurrently.
  const entries: CachedLog[] = [];
  try {
    await Promise.all(
      [...groups.values()].map(async (recs) => {
        let entry: CachedLog;
        try {
          entry = await openFor(config, context, recs[0]!.pipeline, recs[0]!.experiment);
        } catch (e) {
          const error = summarizeError(e);
          for (const r of recs) outcomes[r.index] = { kind: isInvalid(e) ? 'invalid' : 'failed', error };
          return;
        }
        entries.push(entry);
        await appendRounds(entry, recs, outcomes, deadline);
      }),
    );

    // 3. Report.
    const failures: SQSBatchResponse['batchItemFailures'] = [];
    let fresh = 0;
    let duplicates = 0;
    let invalid = 0;
    const unaccounted: Outcome = { kind: 'failed', error: summarizeError(new InternalError('the record got no outcome (a bug); failed so it is redelivered')) };
    messageIds.forEach((_, i) => {
      const o = outcomes[i] ?? unaccounted;
      if (o.kind === 'ok') {
        if (o.ack.duplicate) duplicates++;
        else fresh++;
        return;
      }
      if (o.kind === 'invalid') invalid++;
      failures.push({ itemIdentifier: messageIds[i]! });
      const details = { messageId: messageIds[i], error: o.error };
      if (o.kind === 'invalid') logger.warn('record rejected: invalid', details);
      else logger.error('record failed: not durable, will be redelivered', details);
    });
    metrics.addMetric('Acks', MetricUnit.Count, fresh);
    metrics.addMetric('Duplicates', MetricUnit.Count, duplicates);
    // The stack alarms on this one (record failures reach the DLQ alarm only after every redelivery).
    metrics.addMetric(RECORD_FAILURES_METRIC, MetricUnit.Count, failures.length);
    metrics.addMetric('InvalidRecords', MetricUnit.Count, invalid);
    logger.info('appended SQS records', { records: raw.length, experiments: groups.size, fresh, duplicates, failed: failures.length, invalid });

    for (const entry of entries) await maybeMerge(entry, config, deadline);
    return { batchItemFailures: failures };
  } finally {
    // Also when something failed: a commit that landed may have started a merge.
    for (const entry of entries) await settleMerges(entry, deadline);
  }
}

export function parseRecord(raw: unknown, index: number, messageId: string): Rec {
  const at = `Records[${index}]`;
  const record = parseInput(SqsRecordSchema, raw, at);
  const groupId = record.attributes?.MessageGroupId;
  const body = parseJson(record.body, `${at}.body`);
  const { pipeline, experiment } = parseInput(AppendMessageSchema, body, `${at}.body`);
  const batch = { ...(body as Record<string, unknown>) };
  delete batch.pipeline;
  delete batch.experiment;
  const prepared = parseBatch(batch, `${at}.body`);
  return { index, messageId, pipeline, experiment, itemId: prepared.itemId, groupId, batch };
}

/**
 * One round = the next record of every message group (orderQueues) of the experiment, appended
 * concurrently (they share group commits). A group whose record failed for any reason but invalid
 * input stops there: its later records are failed untried, so they come back after it.
 */
async function appendRounds(entry: CachedLog, recs: Rec[], outcomes: Outcome[], deadline: number): Promise<void> {
  const queues = orderQueues(recs);
  const stopGroup = (q: Rec[], error: ErrorSummary) => failRest(q, error, outcomes);
  const deadlineError = summarizeError(
    new UnavailableError("the invocation's deadline came before the record was acknowledged; it may or may not be written (a redelivery is safe)"),
  );
  for (;;) {
    const round = queues.filter((q) => q.length > 0).map((q) => ({ q, rec: q.shift()! }));
    if (round.length === 0) return;
    if (untilDeadline(deadline) <= 0) {
      for (const { q, rec } of round) {
        outcomes[rec.index] = { kind: 'failed', error: deadlineError };
        stopGroup(q, deadlineError);
      }
      return;
    }
    await Promise.all(
      round.map(async ({ q, rec }) => {
        try {
          const r = await beforeDeadline(appendWithRetry(entry.log, [rec.batch]), deadline);
          if (!r.done) {
            outcomes[rec.index] = { kind: 'failed', error: deadlineError };
            stopGroup(q, deadlineError);
            return;
          }
          const ack = r.value[0]!;
          outcomes[rec.index] = { kind: 'ok', ack };
          if (!ack.duplicate) entry.appendsSinceMerge++;
        } catch (e) {
          const error = summarizeError(e);
          if (isInvalid(e)) {
            outcomes[rec.index] = { kind: 'invalid', error };
          } else {
            outcomes[rec.index] = { kind: 'failed', error };
            stopGroup(q, error);
          }
        }
      }),
    );
  }
}

// ------------------------------------------------------------------------------ shared

function openFor(config: HandlerConfig, context: Context, pipeline: string, experiment: string): Promise<CachedLog> {
  return logCache.get(config, pipeline, experiment, { leaseTtlMs: leaseTtlFor(context, config.leaseTtlMaxMs) });
}

/**
 * A FencedError means the container's slot was taken over (typically while it was frozen longer
 * than the lease): nothing was acknowledged, and the writer has dropped the slot. One retry takes
 * a new slot; the batch's deterministic ids keep it idempotent either way.
 */
async function appendWithRetry(log: CheckpointLog, batches: unknown[]): Promise<Ack[]> {
  try {
    return await log.append(batches as never);
  } catch (e) {
    if (!(e instanceof FencedError)) throw e;
    logger.warn('writer fenced: its slot was taken over; retrying once with a new slot', { error: summarizeError(e) });
    return log.append(batches as never);
  }
}

function countAcks(entry: CachedLog, acks: readonly Ack[]): number {
  const fresh = acks.filter((a) => !a.duplicate).length;
  entry.appendsSinceMerge += fresh;
  metrics.addMetric('Acks', MetricUnit.Count, fresh);
  metrics.addMetric('Duplicates', MetricUnit.Count, acks.length - fresh);
  return fresh;
}

/**
 * Wait (within the deadline) for the merge the log started in the background, if one runs: the
 * container is frozen once the handler returns, and a merge frozen between its epoch check and
 * its base commit, thawed after a takeover and a purge, can put a deleted item's rows back
 * (docs/design/deletion.md, "Stalled mergers"). The acks are durable already; this only delays
 * the answer, by the rest of a merge.
 */
async function settleMerges(entry: CachedLog, deadline: number): Promise<void> {
  const r = await beforeDeadline(entry.log.idle(), deadline);
  if (!r.done) logger.warn('a background merge is still running at the deadline; the container may freeze it', { pipeline: entry.pipeline, experiment: entry.experiment });
}

/**
 * Merge policy of a warm container, beside the log's own merge every N commits: merge the own
 * shard when its oldest unmerged append is about DGCL_MERGE_EVERY_MS old (default 5 min), and
 * only with MERGE_BUDGET_MS of the invocation left. Never under time pressure: an unmerged shard
 * is durable and readable (reads union the shards), and once the container is gone its lease
 * lapses and the maintainer merges it. A failed merge is logged, not raised: the appends
 * of this invocation are already acknowledged.
 */
async function maybeMerge(entry: CachedLog, config: HandlerConfig, deadline: number): Promise<void> {
  if (entry.appendsSinceMerge === 0) return;
  const now = systemClock.nowMs();
  if (now - entry.lastMergeAtMs < config.mergeEveryMs) return;
  if (untilDeadline(deadline) < MERGE_BUDGET_MS) {
    logger.debug('merge due but too little time left; next invocation or the maintainer merges', { experiment: entry.experiment });
    return;
  }
  try {
    const r = await beforeDeadline(entry.log.mergeOwnShard(), deadline);
    if (!r.done) return;
    entry.lastMergeAtMs = now;
    entry.appendsSinceMerge = 0;
    metrics.addMetric('MergedRows', MetricUnit.Count, r.value.mergedRows);
    logger.info('merged own shard', { pipeline: entry.pipeline, experiment: entry.experiment, ...r.value });
  } catch (e) {
    logger.warn('merging the own shard failed; it stays readable and the maintainer will merge it', { error: summarizeError(e) });
  }
}
