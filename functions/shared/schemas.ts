/**
 * Event shapes (zod), and their parsing into InvalidInputError naming the offending field.
 *
 * Direct invocations are strict (an unknown key is a typo: rejected, naming it). Messages that
 * arrive through SQS or EventBridge are lenient about extra keys (other systems put envelopes
 * and tracing fields there) but strict about the keys they must have.
 *
 * AWS shapes follow the Lambda developer guide: an SQS event is `{Records: [{messageId,
 * receiptHandle, body, attributes, messageAttributes, md5OfBody, eventSource: "aws:sqs",
 * eventSourceARN, awsRegion}]}`; an EventBridge event is `{version, id, "detail-type", source,
 * account, time, region, resources, detail}`.
 */
import { z } from 'zod';
import { MAX_ID_LENGTH } from '../../lib/batch.ts';
import { InvalidInputError } from '../../lib/errors.ts';
import { validateName, type NameKind } from '../../lib/names.ts';
import { ITEM_STATUSES } from '../../lib/types.ts';

/** Most item ids one invocation folds (a direct resume call or one trigger message). */
export const MAX_ITEM_IDS = 1000;

const name = (kind: NameKind) =>
  z.unknown().transform((v, ctx) => {
    try {
      return validateName(kind, v);
    } catch (e) {
      ctx.addIssue({ code: 'custom', message: e instanceof Error ? e.message.replace(/^\w+: /, '') : String(e) });
      return z.NEVER;
    }
  });

export const PipelineName = name('pipeline');
export const ExperimentName = name('experiment');

export const ItemId = z
  .string({ error: (iss) => (iss.input === undefined ? 'is required (a non-empty string)' : 'must be a non-empty string') })
  .min(1, { error: 'must not be empty' })
  .max(MAX_ID_LENGTH, { error: `must be at most ${MAX_ID_LENGTH} characters` });

// ------------------------------------------------------------------------------------ AWS shapes

export const SqsRecordSchema = z.looseObject({
  messageId: z.string().min(1),
  body: z.string(),
  eventSource: z.literal('aws:sqs'),
  attributes: z.looseObject({ MessageGroupId: z.string().optional() }).optional(),
});
export type SqsRecordIn = z.infer<typeof SqsRecordSchema>;

export const SqsEventSchema = z.looseObject({ Records: z.array(SqsRecordSchema).min(1) });

/** An SQS event as Lambda's event source mapping delivers it. */
export function isSqsEvent(event: unknown): event is { Records: unknown[] } {
  const records = (event as { Records?: unknown } | null)?.Records;
  return Array.isArray(records) && records.length > 0 && (records[0] as { eventSource?: unknown } | null)?.eventSource === 'aws:sqs';
}

export const EventBridgeEventSchema = z.looseObject({
  'detail-type': z.string(),
  source: z.string(),
  detail: z.unknown(),
});

export function isEventBridgeEvent(event: unknown): event is { 'detail-type': string; source: string; detail: unknown } {
  const e = event as Record<string, unknown> | null;
  return typeof e === 'object' && e !== null && typeof e['detail-type'] === 'string' && typeof e.source === 'string' && 'detail' in e;
}

// ------------------------------------------------------------------------------------ our shapes

export const AppendDirectSchema = z.strictObject({
  pipeline: PipelineName,
  experiment: ExperimentName,
  // Each batch is validated by the log (lib/batch.ts), which names `batches[i].field`.
  batches: z.array(z.unknown(), { error: 'must be an array of checkpoint batches' }),
});

/** An SQS record body of the append queue: one checkpoint batch plus where it goes. */
export const AppendMessageSchema = z.looseObject({ pipeline: PipelineName, experiment: ExperimentName });

const Status = z.enum(ITEM_STATUSES, { error: `must be one of ${ITEM_STATUSES.join(', ')}` });

export const FoldItemSchema = z.strictObject({
  pipeline: PipelineName,
  experiment: ExperimentName,
  itemId: ItemId,
  trajectory: z.boolean().optional(),
});

export const FoldPageSchema = z.strictObject({
  pipeline: PipelineName,
  experiment: ExperimentName,
  status: Status.optional(),
  limit: z.number().int().min(1).max(10_000).optional(),
  after: z.string().optional(),
});

export const ResumeDirectSchema = z.strictObject({
  pipeline: PipelineName,
  experiment: ExperimentName,
  itemIds: z.array(ItemId).min(1).max(MAX_ITEM_IDS),
});

/** One resume trigger (an SQS body or an EventBridge `detail`): `itemId`, or `itemIds`. */
export const ResumeMessageSchema = z
  .looseObject({
    pipeline: PipelineName,
    experiment: ExperimentName,
    itemId: ItemId.optional(),
    itemIds: z.array(ItemId).min(1).max(MAX_ITEM_IDS).optional(),
  })
  .refine((m) => (m.itemId === undefined) !== (m.itemIds === undefined), {
    error: 'give exactly one of itemId or itemIds',
    path: ['itemId'],
  });

const StalledForMs = z
  .number({ error: 'must be a positive integer (milliseconds)' })
  .int({ error: 'must be a positive integer (milliseconds)' })
  .min(1, { error: 'must be a positive integer (milliseconds)' })
  .max(Number.MAX_SAFE_INTEGER, { error: 'must be a safe integer (milliseconds)' });
const SweepLimit = z.number({ error: 'must be a positive integer' }).int({ error: 'must be a positive integer' }).min(1, { error: 'must be a positive integer' }).optional();

/**
 * A resume sweep of one experiment (direct, or an EventBridge `detail`: what the schedule
 * sends): every non-terminal item whose last event is more than `stalledForMs` old.
 */
export const ResumeSweepSchema = z.strictObject({ pipeline: PipelineName, experiment: ExperimentName, stalledForMs: StalledForMs, limit: SweepLimit });

export const ResumeSweepDetailSchema = z
  .looseObject({ pipeline: PipelineName, experiment: ExperimentName, stalledForMs: StalledForMs, limit: SweepLimit })
  .refine((m) => !('itemId' in m) && !('itemIds' in m), { error: 'a sweep (stalledForMs) names no items: give stalledForMs or itemId/itemIds, not both', path: ['stalledForMs'] });

/** Whether a direct event or an EventBridge `detail` asks for a sweep (it has `stalledForMs`). */
export function isSweepRequest(v: unknown): boolean {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && 'stalledForMs' in v;
}

export const MaintenanceSchema = z
  .strictObject({ pipeline: PipelineName.optional(), experiment: ExperimentName.optional() })
  .refine((m) => m.experiment === undefined || m.pipeline !== undefined, {
    error: 'experiment needs pipeline',
    path: ['experiment'],
  });

// ------------------------------------------------------------------------------------ parsing

/** Parses `value`; the first issue becomes an InvalidInputError whose field is its path. */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown, path = 'event'): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issues = r.error.issues;
  const first = issues.find((i) => i.code === 'unrecognized_keys') ?? issues[0];
  if (!first) throw new InvalidInputError('invalid input', { field: path });
  let field = path;
  for (const p of first.path) field += typeof p === 'number' ? `[${p}]` : `.${String(p)}`;
  let message = first.message;
  if (first.code === 'unrecognized_keys') {
    const keys = (first as { keys?: string[] }).keys ?? [];
    message = `unknown key${keys.length === 1 ? '' : 's'} ${keys.map((k) => JSON.stringify(k)).join(', ')}`;
  }
  throw new InvalidInputError(message, { field });
}

/** JSON.parse with an InvalidInputError naming `field`. */
export function parseJson(text: string, field: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new InvalidInputError(`is not valid JSON (${e instanceof Error ? e.message : String(e)})`, { field, cause: e });
  }
}
