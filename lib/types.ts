/**
 * The public shapes (camelCase JSON) and the stored row (snake_case, the seed's
 * 33 columns). Everything else in lib/ is written against these.
 */
import type { Where } from './select/where.ts';

export const EVENT_TYPES = [
  'ITEM_CREATED',
  'FIELD_SET',
  'FIELD_APPEND',
  'STEP_COMPLETED',
  'FAILED',
  'TERMINAL',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const VALUE_KINDS = ['int', 'float', 'bool', 'str', 'json', 'blob'] as const;
export type ValueKind = (typeof VALUE_KINDS)[number];

export const TERMINALS = ['completed', 'filtered'] as const;
export type TerminalKind = (typeof TERMINALS)[number];

export const ITEM_STATUSES = ['in_progress', 'failed', 'completed', 'filtered'] as const;
export type ItemStatus = (typeof ITEM_STATUSES)[number];

/** Version of the 33-column layout written to `schema_version`. */
export const SCHEMA_VERSION = 1;

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };

/**
 * One stored event: the seed's 33 columns (its table lists 33; its prose says 34), in
 * order. int64 columns that can never exceed 2^53
 * in practice (seqs, step positions, sizes, timestamps in microseconds) are JS numbers here and
 * int64 in Lance; `value_i64` is a bigint because user integers must round-trip exactly.
 */
export interface EventRow {
  event_id: string;
  item_id: string;
  root_item_id: string;
  parent_item_id: string | null;
  item_seq: number;
  checkpoint_id: string;
  event_type: EventType;
  step_name: string | null;
  step_index: number | null;
  step_instance_id: string | null;
  iteration: number | null;
  attempt: number;
  run_id: string;
  writer_epoch: string;
  field_name: string | null;
  field_type: string | null;
  codec_version: number | null;
  value_kind: ValueKind | null;
  value_i64: bigint | null;
  value_f64: number | null;
  value_bool: boolean | null;
  value_str: string | null;
  value_json: string | null;
  /** Inline bytes. Null in rows read for fold/trajectory (the column is projected out). */
  value_blob: Uint8Array | null;
  payload_size: number | null;
  payload_checksum: string | null;
  query_tags_json: string | null;
  terminal: TerminalKind | null;
  error_type: string | null;
  error_dump: string | null;
  traceback: string | null;
  /** Microseconds since the Unix epoch, UTC. */
  event_ts: number;
  schema_version: number;
}

// ---------------------------------------------------------------------------------------------
// Checkpoint batch (input).

export interface BatchStep {
  name: string;
  index?: number;
  instanceId?: string;
  iteration?: number;
}

export interface BatchFailure {
  errorType: string;
  errorDump?: string;
  traceback?: string;
}

/** The JSON a pipeline step sends. Validated by `parseBatch` (lib/batch.ts). */
export interface CheckpointBatchInput {
  itemId: string;
  runId: string;
  /** `'ifMissing'` (= `{ifMissing: true}`): create only when the item does not exist. */
  create?: { rootItemId?: string; parentItemId?: string; ifMissing?: boolean } | 'ifMissing';
  step?: BatchStep;
  attempt?: number;
  set?: Record<string, unknown>;
  append?: Record<string, unknown[]>;
  complete?: boolean;
  failed?: BatchFailure;
  terminal?: TerminalKind;
  queryTags?: Record<string, unknown>;
}

/** A decoded field value, ready to be stored. */
export type EncodedValue =
  | { kind: 'int'; i64: bigint }
  | { kind: 'float'; f64: number }
  | { kind: 'bool'; bool: boolean }
  | { kind: 'str'; str: string }
  | { kind: 'json'; json: string }
  | { kind: 'blob'; bytes: Uint8Array; size: number; checksum: string };

/** One event of a prepared batch, before the writer gives it a seq, epoch and time. */
export interface PreparedEvent {
  eventId: string;
  eventType: EventType;
  fieldName: string | null;
  value: EncodedValue | null;
  terminal: TerminalKind | null;
  failure: BatchFailure | null;
}

/** A validated batch with deterministic ids; pure data, no I/O done yet. */
export interface PreparedBatch {
  itemId: string;
  runId: string;
  checkpointId: string;
  /** Set when the batch creates the item. */
  create: { rootItemId: string; parentItemId: string | null; ifMissing: boolean } | null;
  step: { name: string; index: number | null; instanceId: string | null; iteration: number | null } | null;
  attempt: number;
  queryTagsJson: string | null;
  events: PreparedEvent[];
}

// ---------------------------------------------------------------------------------------------
// Ack.

export interface Ack {
  itemId: string;
  checkpointId: string;
  eventIds: string[];
  firstSeq: number;
  lastSeq: number;
  duplicate: boolean;
}

// ---------------------------------------------------------------------------------------------
// Fold output: the item state.

export interface BlobRef {
  $blobRef: { eventId: string; size: number; checksum: string };
}

/** A value as JSON output shows it: ints beyond ±(2^53-1) as {$int}, blobs as {$blobRef}. */
export type OutputValue = JsonValue | { $int: string } | BlobRef;

/** Where an item resumes: its completed step last in step order (lib/step-order.ts). */
export interface Cursor {
  stepName: string | null;
  stepIndex: number | null;
  stepInstanceId: string | null;
  iteration: number | null;
  attempt: number;
  checkpointId: string;
}

export interface Failure {
  stepName: string | null;
  attempt: number;
  errorType: string | null;
  errorDump: string | null;
  traceback: string | null;
  seq: number;
}

export interface Violation {
  kind: 'seq_conflict' | 'event_after_terminal' | 'event_before_create';
  seq: number;
  eventIds: string[];
  message: string;
}

/** Where a forked item came from (docs/usage.md, "Forking a cohort"). */
export interface ForkedFrom {
  pipeline: string;
  experiment: string;
  itemId: string;
  /** The item's last event the fork kept (its seq in both logs). */
  lastKeptSeq: number;
}

export interface ItemState {
  itemId: string;
  rootItemId: string | null;
  parentItemId: string | null;
  status: ItemStatus;
  fields: Record<string, OutputValue>;
  cursor: Cursor | null;
  lastSeq: number;
  attempts: number;
  failures: Failure[];
  violations: Violation[];
  /** Set on an item a fork made (lib/lineage.ts); absent otherwise. */
  forkedFrom?: ForkedFrom;
}

/** One trajectory event: only the columns that are set. */
export interface TrajectoryEvent {
  eventId: string;
  itemId: string;
  rootItemId: string;
  parentItemId?: string;
  itemSeq: number;
  checkpointId: string;
  eventType: EventType;
  stepName?: string;
  stepIndex?: number;
  stepInstanceId?: string;
  iteration?: number;
  attempt: number;
  runId: string;
  writerEpoch: string;
  fieldName?: string;
  fieldType?: string;
  codecVersion?: number;
  valueKind?: ValueKind;
  value?: OutputValue;
  queryTags?: JsonValue;
  terminal?: TerminalKind;
  errorType?: string;
  errorDump?: string;
  traceback?: string;
  /** ISO 8601 with microseconds, UTC. */
  eventTs: string;
  schemaVersion: number;
}

// ---------------------------------------------------------------------------------------------
// Partial reads (docs/api.md).

/** A value as partial reads return it: blobs of at most `inlineBytes` as their bytes. */
export type ReadValue = OutputValue | Uint8Array | ReadValue[];

export interface FieldsQuery {
  /** Fields with exactly these names. */
  names?: string[];
  /** Fields whose name starts with this (with `names`: either matches). */
  prefix?: string;
  /** Return blob values of at most this many bytes inline (default 0: all as `$blobRef`). */
  inlineBytes?: number;
}

export interface ItemFields {
  itemId: string;
  rootItemId: string | null;
  parentItemId: string | null;
  /** The selected fields that have a value, folded as `fold` would. */
  fields: Record<string, ReadValue>;
}

export interface LatestEventsQuery {
  /** How many events (the newest ones), 1-10,000. */
  limit: number;
  /** Only events of these types. */
  eventTypes?: EventType[];
  /** Only events with a smaller item_seq (paging backwards). */
  beforeSeq?: number;
  /** Return blob values of at most this many bytes inline (default 0: `$blobRef`). */
  inlineBytes?: number;
}

/** A trajectory event whose blob value may be inline. */
export type ReadEvent = Omit<TrajectoryEvent, 'value'> & { value?: ReadValue };

/** An item listing's filters and page (docs/api.md, "Listing items"). */
export interface ItemQuery {
  status?: ItemStatus;
  /** Items per page; `next` of a page is the `after` of the next one. */
  limit?: number;
  /** Only items whose id sorts after this (UTF-8 byte order). */
  after?: string;
  rootItemId?: string;
  parentItemId?: string;
  /** Only items whose query tags (every batch's `queryTags`, later ones replacing earlier) have these values. */
  tags?: Record<string, JsonValue>;
  /**
   * Only items this filter selects (docs/usage.md, "Selecting items"); with the other keys, all
   * must hold. A page then holds up to `limit` selected items. Text: `parseWhere`.
   */
  where?: Where;
}
