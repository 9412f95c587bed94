/**
 * Checkpoint batch validation and preparation. Pure: input
 * JSON -> PreparedBatch (validated, values encoded, deterministic ids) -> EventRow[] once the
 * writer knows the seq, epoch and time.
 *
 * Decisions beyond the batch's shape (for callers: docs/contract.md, "Checkpoint batch"):
 *  - Optional members given as `null` are treated as absent (Python clients send None).
 *  - Unknown keys are rejected at every level (top, create, step, failed), naming the key.
 *  - Ids (itemId, runId, rootItemId, parentItemId, step.name, step.instanceId, errorType):
 *    1-512 characters, no control characters. Field names: 1-256, no control characters.
 *    All strings must be well-formed Unicode (no lone surrogates).
 *  - `failed` wins over `complete`: a failed step never gets STEP_COMPLETED, even with an
 *    explicit `complete: true` (clients that always serialize the default keep working).
 *  - `failed` and `terminal` do not need `step` (item-level failure / filtering).
 *  - The same field may appear in both `set` and `append`: the set comes first, then the appends.
 *  - `queryTags` may be any JSON object; an empty object is stored as "{}".
 *  - `create: "ifMissing"` (or `create: {ifMissing: true, ...}`): the ITEM_CREATED event is
 *    written only when the item does not exist (or was deleted); otherwise it is left out and the
 *    rest of the batch applies to the existing item (its root/parent stay as created). The
 *    checkpoint id covers `ifMissing`, so it differs from the same batch with a plain `create`.
 *  - The checkpoint id covers everything that shapes the events (see `checkpointContent`), but
 *    not the seq, writer epoch or time, so a retry through any writer gets the same ids.
 */
import { z } from 'zod';
import { canonicalJson, encodeValue, hasControlChars, isPlainObject, isWellFormed, joinPath, valueColumns } from './codec.ts';
import { InternalError, InvalidInputError } from './errors.ts';
import { checkpointId, eventId } from './ids.ts';
import { RESERVED_FIELD_PREFIX } from './lineage.ts';
import {
  SCHEMA_VERSION,
  TERMINALS,
  type BatchFailure,
  type EncodedValue,
  type EventRow,
  type EventType,
  type PreparedBatch,
  type PreparedEvent,
  type TerminalKind,
} from './types.ts';

export const MAX_ID_LENGTH = 512;
export const MAX_FIELD_NAME_LENGTH = 256;
const INT32_MAX = 2 ** 31 - 1;

const BATCH_KEYS = ['itemId', 'runId', 'create', 'step', 'attempt', 'set', 'append', 'complete', 'failed', 'terminal', 'queryTags'] as const;
const CREATE_KEYS = ['rootItemId', 'parentItemId', 'ifMissing'] as const;
const STEP_KEYS = ['name', 'index', 'instanceId', 'iteration'] as const;
const FAILED_KEYS = ['errorType', 'errorDump', 'traceback'] as const;

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return v.length > 40 ? `a string of ${v.length} characters` : `string ${JSON.stringify(v)}`;
  if (typeof v === 'number') return `${v}`;
  if (typeof v === 'object') return 'an object';
  return `a ${typeof v}`;
}

/** Message for a wrong type; `iss.input` is the offending value (undefined when missing). */
const typeError = (expected: string) => (iss: { input?: unknown }) =>
  iss.input === undefined ? `is required (${expected})` : `must be ${expected}, got ${describe(iss.input)}`;

/** A required or optional identifier-like string: 1..max chars, no control chars, valid Unicode. */
function idString(max = MAX_ID_LENGTH) {
  return z
    .string({ error: typeError('a non-empty string') })
    .min(1, { error: 'must not be empty' })
    .max(max, { error: `must be at most ${max} characters` })
    .refine((s) => !hasControlChars(s), { error: 'must not contain control characters' })
    .refine(isWellFormed, { error: 'must be valid Unicode (lone surrogate)' });
}

function textString() {
  return z.string({ error: typeError('a string') }).refine(isWellFormed, { error: 'must be valid Unicode (lone surrogate)' });
}

const nonNegInt = () =>
  z
    .number({ error: typeError('a non-negative integer') })
    .int({ error: (iss) => `must be a non-negative integer, got ${describe(iss.input)}` })
    .min(0, { error: (iss) => `must be a non-negative integer, got ${describe(iss.input)}` });

const plainObject = (what: string) =>
  z.custom<Record<string, unknown>>(isPlainObject, { error: (iss) => `must be ${what}, got ${describe(iss.input)}` });

const CreateObjectSchema = z.strictObject(
  { rootItemId: idString().nullish(), parentItemId: idString().nullish(), ifMissing: z.boolean({ error: typeError('a boolean') }).nullish() },
  { error: typeError('an object {rootItemId?, parentItemId?, ifMissing?} or "ifMissing"') },
);

// `create: "ifMissing"` is `create: {ifMissing: true}`; any other string is an error.
const CreateSchema = z.preprocess((v) => (v === 'ifMissing' ? { ifMissing: true } : v), CreateObjectSchema);

const StepSchema = z.strictObject(
  { name: idString(), index: nonNegInt().nullish(), instanceId: idString().nullish(), iteration: nonNegInt().nullish() },
  { error: typeError('an object {name, index?, instanceId?, iteration?}') },
);

const FailedSchema = z.strictObject(
  { errorType: idString(), errorDump: textString().nullish(), traceback: textString().nullish() },
  { error: typeError('an object {errorType, errorDump?, traceback?}') },
);

const BatchSchema = z.strictObject(
  {
    itemId: idString(),
    runId: idString(),
    create: CreateSchema.nullish(),
    step: StepSchema.nullish(),
    attempt: z
      .number({ error: typeError('a positive integer') })
      .int({ error: (iss) => `must be a positive 32-bit integer, got ${describe(iss.input)}` })
      .min(1, { error: (iss) => `must be a positive 32-bit integer, got ${describe(iss.input)}` })
      .max(INT32_MAX, { error: (iss) => `must be a positive 32-bit integer, got ${describe(iss.input)}` })
      .nullish(),
    set: plainObject('an object of field name -> value').nullish(),
    append: plainObject('an object of field name -> non-empty array of values').nullish(),
    complete: z.boolean({ error: typeError('a boolean') }).nullish(),
    failed: FailedSchema.nullish(),
    terminal: z.enum(TERMINALS, { error: (iss) => `must be "completed" or "filtered", got ${describe(iss.input)}` }).nullish(),
    queryTags: plainObject('a JSON object').nullish(),
  },
  { error: typeError('a checkpoint batch object {itemId, runId, ...}') },
);

type Issue = z.core.$ZodIssue;

function pathOf(base: string, path: readonly PropertyKey[]): string {
  let p = base;
  for (const k of path) p = joinPath(p, typeof k === 'number' ? k : String(k));
  return p;
}

function allowedKeys(path: readonly PropertyKey[]): readonly string[] {
  switch (path[0]) {
    case undefined:
      return BATCH_KEYS;
    case 'create':
      return CREATE_KEYS;
    case 'step':
      return STEP_KEYS;
    case 'failed':
      return FAILED_KEYS;
    default:
      return [];
  }
}

function issueToError(issue: Issue, base: string, count: number): InvalidInputError {
  const more = count > 1 ? ` (and ${count - 1} more problem${count > 2 ? 's' : ''})` : '';
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? '?';
    const allowed = allowedKeys(issue.path);
    return new InvalidInputError(`unknown key ${JSON.stringify(key)}${allowed.length ? `; allowed keys: ${allowed.join(', ')}` : ''}${more}`, {
      field: pathOf(base, [...issue.path, key]),
    });
  }
  return new InvalidInputError(`${issue.message}${more}`, { field: pathOf(base, issue.path) });
}

function checkFieldName(name: string, field: string): void {
  if (name.length < 1 || name.length > MAX_FIELD_NAME_LENGTH || hasControlChars(name) || !isWellFormed(name)) {
    throw new InvalidInputError(
      `invalid field name ${JSON.stringify(name.length > 60 ? `${name.slice(0, 60)}...` : name)}: must be 1-${MAX_FIELD_NAME_LENGTH} characters, valid Unicode, without control characters`,
      { field },
    );
  }
  if (name.startsWith(RESERVED_FIELD_PREFIX)) {
    throw new InvalidInputError(`field name ${JSON.stringify(name)} starts with ${JSON.stringify(RESERVED_FIELD_PREFIX)}, which the log keeps for its own fields (a fork's lineage): rename the field`, { field });
  }
}

/** How a value enters the checkpoint id: blobs by size and checksum, never their bytes. */
function valueDigest(v: EncodedValue): unknown {
  switch (v.kind) {
    case 'int':
      return ['int', v.i64.toString()];
    case 'float':
      return ['float', v.f64];
    case 'bool':
      return ['bool', v.bool];
    case 'str':
      return ['str', v.str];
    case 'json':
      return ['json', v.json];
    case 'blob':
      return ['blob', v.size, v.checksum];
  }
}

/**
 * The canonical content a checkpoint id hashes: the normalized batch (item, run, create, step,
 * attempt, queryTags) and its event list (type, field, value digest, failure, terminal), which
 * also captures `complete`. Exported for tests and diagnostics.
 */
export function checkpointContent(b: Omit<PreparedBatch, 'checkpointId' | 'events'>, events: readonly Omit<PreparedEvent, 'eventId'>[]): string {
  return canonicalJson(
    {
      v: 1,
      itemId: b.itemId,
      runId: b.runId,
      // Without ifMissing exactly the v1 shape, so existing checkpoint ids do not change.
      create: b.create === null ? null : b.create.ifMissing ? b.create : { rootItemId: b.create.rootItemId, parentItemId: b.create.parentItemId },
      step: b.step,
      attempt: b.attempt,
      queryTags: b.queryTagsJson,
      events: events.map((e) => [
        e.eventType,
        e.fieldName,
        e.value === null ? null : valueDigest(e.value),
        e.failure === null ? null : [e.failure.errorType, e.failure.errorDump ?? null, e.failure.traceback ?? null],
        e.terminal,
      ]),
    },
    'checkpoint',
  );
}

/**
 * Validates one batch and prepares its events with deterministic ids. Throws InvalidInputError
 * whose `field` names the offending path, e.g. `batch.set.image` or `batches[2].step.index`.
 */
export function parseBatch(input: unknown, path = 'batch'): PreparedBatch {
  const r = BatchSchema.safeParse(input);
  if (!r.success) {
    // A misspelt key is usually the root cause of a "missing" one: report unknown keys first.
    const issues = r.error.issues;
    const first = issues.find((i) => i.code === 'unrecognized_keys') ?? issues[0];
    if (!first) throw new InvalidInputError('invalid batch', { field: path });
    throw issueToError(first, path, issues.length);
  }
  const d = r.data;
  // zod rebuilds records without a "__proto__" key; read field maps from the raw input instead.
  const raw = input as Record<string, unknown>;

  if (d.complete != null && d.step == null) {
    throw new InvalidInputError('"complete" needs a "step" (it says whether that step completed); add step or drop complete', {
      field: `${path}.complete`,
    });
  }

  const c = d.create;
  const create = c != null ? { rootItemId: c.rootItemId ?? d.itemId, parentItemId: c.parentItemId ?? null, ifMissing: c.ifMissing === true } : null;
  const step =
    d.step != null
      ? { name: d.step.name, index: d.step.index ?? null, instanceId: d.step.instanceId ?? null, iteration: d.step.iteration ?? null }
      : null;
  const attempt = d.attempt ?? 1;

  const drafts: Omit<PreparedEvent, 'eventId'>[] = [];
  const push = (eventType: EventType, fieldName: string | null, value: EncodedValue | null, terminal: TerminalKind | null, failure: BatchFailure | null) =>
    drafts.push({ eventType, fieldName, value, terminal, failure });

  if (create) push('ITEM_CREATED', null, null, null, null);

  if (d.set != null) {
    const set = raw.set as Record<string, unknown>;
    const base = `${path}.set`;
    for (const name of Object.keys(set).sort()) {
      const field = joinPath(base, name);
      checkFieldName(name, field);
      push('FIELD_SET', name, encodeValue(set[name], field), null, null);
    }
  }

  if (d.append != null) {
    const append = raw.append as Record<string, unknown>;
    const base = `${path}.append`;
    for (const name of Object.keys(append).sort()) {
      const field = joinPath(base, name);
      checkFieldName(name, field);
      const list = append[name];
      if (!Array.isArray(list) || list.length === 0) {
        throw new InvalidInputError(
          Array.isArray(list) ? 'must be a non-empty array of values to append' : `must be an array of values to append, got ${describe(list)}`,
          { field },
        );
      }
      for (let i = 0; i < list.length; i++) push('FIELD_APPEND', name, encodeValue(list[i], joinPath(field, i)), null, null);
    }
  }

  if (step && d.failed == null && d.complete !== false) push('STEP_COMPLETED', null, null, null, null);

  if (d.failed != null) {
    const failure: BatchFailure = { errorType: d.failed.errorType };
    if (d.failed.errorDump != null) failure.errorDump = d.failed.errorDump;
    if (d.failed.traceback != null) failure.traceback = d.failed.traceback;
    push('FAILED', null, null, null, failure);
  }

  if (d.terminal != null) push('TERMINAL', null, null, d.terminal, null);

  if (drafts.length === 0) {
    throw new InvalidInputError(
      'the batch emits no events; give at least one of create, set, append, step (without complete: false), failed or terminal',
      { field: path },
    );
  }

  const queryTagsJson = d.queryTags != null ? canonicalJson(raw.queryTags, `${path}.queryTags`) : null;
  const header = { itemId: d.itemId, runId: d.runId, create, step, attempt, queryTagsJson };
  const cp = checkpointId(checkpointContent(header, drafts));
  return { ...header, checkpointId: cp, events: drafts.map((e, i) => ({ eventId: eventId(cp, i), ...e })) };
}

/** Validates many batches (all or nothing); errors name `batches[i]....`. */
export function parseBatches(inputs: unknown): PreparedBatch[] {
  if (!Array.isArray(inputs)) throw new InvalidInputError(`must be an array of checkpoint batches, got ${describe(inputs)}`, { field: 'batches' });
  return inputs.map((b, i) => parseBatch(b, `batches[${i}]`));
}

export interface RowOptions {
  /** item_seq of the first event; the rest follow consecutively. */
  firstSeq: number;
  writerEpoch: string;
  /** event_ts of every event, microseconds since the Unix epoch. */
  eventTsUs: number;
  /**
   * The item's root/parent from its creation. Required for batches that do not create the item;
   * ignored when the batch has `create` (the batch's own values are used).
   */
  rootItemId?: string;
  parentItemId?: string | null;
}

/** The stored rows of a prepared batch: seqs firstSeq, firstSeq+1, ... in event order. */
export function toRows(b: PreparedBatch, o: RowOptions): EventRow[] {
  if (!Number.isSafeInteger(o.firstSeq) || o.firstSeq < 0) throw new InternalError(`toRows: bad firstSeq ${o.firstSeq}`);
  const rootItemId = b.create ? b.create.rootItemId : o.rootItemId;
  const parentItemId = b.create ? b.create.parentItemId : (o.parentItemId ?? null);
  if (rootItemId === undefined) throw new InternalError(`toRows: item ${b.itemId} is not created by this batch and no rootItemId was given`);
  return b.events.map((e, i): EventRow => {
    const v = e.value ? valueColumns(e.value) : null;
    return {
      event_id: e.eventId,
      item_id: b.itemId,
      root_item_id: rootItemId,
      parent_item_id: parentItemId,
      item_seq: o.firstSeq + i,
      checkpoint_id: b.checkpointId,
      event_type: e.eventType,
      step_name: b.step?.name ?? null,
      step_index: b.step?.index ?? null,
      step_instance_id: b.step?.instanceId ?? null,
      iteration: b.step?.iteration ?? null,
      attempt: b.attempt,
      run_id: b.runId,
      writer_epoch: o.writerEpoch,
      field_name: e.fieldName,
      field_type: v?.field_type ?? null,
      codec_version: v?.codec_version ?? null,
      value_kind: v?.value_kind ?? null,
      value_i64: v?.value_i64 ?? null,
      value_f64: v?.value_f64 ?? null,
      value_bool: v?.value_bool ?? null,
      value_str: v?.value_str ?? null,
      value_json: v?.value_json ?? null,
      value_blob: v?.value_blob ?? null,
      payload_size: v?.payload_size ?? null,
      payload_checksum: v?.payload_checksum ?? null,
      query_tags_json: b.queryTagsJson,
      terminal: e.terminal,
      error_type: e.failure?.errorType ?? null,
      error_dump: e.failure?.errorDump ?? null,
      traceback: e.failure?.traceback ?? null,
      event_ts: o.eventTsUs,
      schema_version: SCHEMA_VERSION,
    };
  });
}
