/**
 * Folding an item's events into its state (seed "Write and recovery invariants":
 * item state and trajectory events). Pure: rows in, state out; value_blob is never read.
 *
 * Semantics:
 *  - Rows may be duplicated (LSM read path, retries) and unordered: `dedupe` keeps one copy per
 *    event_id and orders by (item_seq, event_id).
 *  - Every event is applied in that order, including events that violate an invariant; the
 *    violations are reported next to the state, never silently dropped.
 *  - ITEM_CREATED sets rootItemId/parentItemId (the first one wins). Without any ITEM_CREATED the
 *    root/parent columns of the first event are shown.
 *  - FIELD_SET replaces the field's value. FIELD_APPEND appends one element: to a field whose
 *    current value is a list (from earlier appends, or a json array that was set) it is pushed at
 *    the end; to a missing field it starts a one-element list; to a field whose current value is
 *    not a list it starts a list holding the previous value first, then the new element.
 *  - cursor = the STEP_COMPLETED last in step order, then the latest (lib/step-order.ts), so a
 *    step batch that arrives late (a retry, a redelivery) never moves it back. attempts = the largest attempt of any event.
 *  - status: the kind of the last TERMINAL if any (completed/filtered); else `failed` when the
 *    last step event (STEP_COMPLETED or FAILED) in the log is a FAILED; else `in_progress`.
 *  - failures: every FAILED, in order.
 *  - violations, one per finding, in seq order:
 *      seq_conflict          two or more different event_ids at one item_seq (all ids named);
 *      event_before_create   an event before the item's ITEM_CREATED, or any event of an item
 *                            without ITEM_CREATED (ids: the event, then the ITEM_CREATED if any);
 *      event_after_terminal  any event after a TERMINAL (ids: the event, then that TERMINAL).
 */
import { decodeValue } from './codec.ts';
import { CorruptError, NotFoundError } from './errors.ts';
import { LINEAGE_FIELD, parseLineage } from './lineage.ts';
import type { ItemSummary } from './api.ts';
import { StepChooser } from './step-order.ts';
import type { Cursor, EventRow, Failure, ForkedFrom, ItemState, ItemStatus, JsonValue, OutputValue, TerminalKind, TrajectoryEvent, Violation } from './types.ts';

/** (item_seq, event_id, writer_epoch): the first of equal (seq, id) copies has the smallest epoch. */
function compareRows(a: EventRow, b: EventRow): number {
  if (a.item_seq !== b.item_seq) return a.item_seq - b.item_seq;
  if (a.event_id !== b.event_id) return a.event_id < b.event_id ? -1 : 1;
  return a.writer_epoch < b.writer_epoch ? -1 : a.writer_epoch > b.writer_epoch ? 1 : 0;
}

function isSorted(rows: readonly EventRow[]): boolean {
  for (let i = 1; i < rows.length; i++) if (compareRows(rows[i - 1]!, rows[i]!) > 0) return false;
  return true;
}

/**
 * Rows in (item_seq, event_id, writer_epoch) order. Linear for the usual inputs: already ordered
 * (a scan ordered by item_seq), or seqs dense enough for a counting sort; otherwise a comparison
 * sort.
 */
function sortRows(rows: readonly EventRow[]): readonly EventRow[] {
  const n = rows.length;
  if (isSorted(rows)) return rows;
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < n; i++) {
    const q = rows[i]!.item_seq;
    if (!Number.isSafeInteger(q)) return rows.slice().sort(compareRows);
    if (q < min) min = q;
    if (q > max) max = q;
  }
  const range = max - min + 1;
  if (range > 4 * n + 1024) return rows.slice().sort(compareRows);
  const starts = new Uint32Array(range + 1);
  for (let i = 0; i < n; i++) starts[rows[i]!.item_seq - min + 1]!++;
  for (let k = 1; k <= range; k++) starts[k]! += starts[k - 1]!;
  const next = starts.slice(0, range);
  const out = new Array<EventRow>(n);
  for (let i = 0; i < n; i++) {
    const r = rows[i]!;
    out[next[r.item_seq - min]!++] = r;
  }
  // Several rows at one seq (duplicates or conflicts): order them by (event_id, writer_epoch).
  for (let k = 0; k < range; k++) {
    const a = starts[k]!;
    const b = starts[k + 1]!;
    if (b - a > 1) {
      const part = out.slice(a, b).sort(compareRows);
      for (let j = 0; j < part.length; j++) out[a + j] = part[j]!;
    }
  }
  return out;
}

/**
 * Whether two rows may share an event_id (rows already free of adjacent same-seq copies). A
 * linear-probing table of two 32-bit string hashes answers without building a set of a million
 * strings; a match of both hashes (a real duplicate, or a 2^-64 accident) sends the caller to the
 * exact check.
 */
function mayHaveDuplicateIds(rows: readonly EventRow[]): boolean {
  const n = rows.length;
  if (n < 2) return false;
  let size = 1024;
  while (size < 2 * n) size *= 2;
  const mask = size - 1;
  const used = new Uint8Array(size);
  const h1s = new Int32Array(size);
  const h2s = new Int32Array(size);
  for (let i = 0; i < n; i++) {
    const id = rows[i]!.event_id;
    let h1 = 0x811c9dc5 | 0;
    let h2 = 0x1b873593 | 0;
    for (let j = 0; j < id.length; j++) {
      const c = id.charCodeAt(j);
      h1 = Math.imul(h1 ^ c, 0x01000193);
      h2 = Math.imul(h2 ^ c, 0x5bd1e995);
      h2 ^= h2 >>> 15;
    }
    h1 ^= h1 >>> 16;
    h1 = Math.imul(h1, 0x85ebca6b);
    h1 ^= h1 >>> 13;
    let slot = h1 & mask;
    for (;;) {
      if (used[slot] === 0) {
        used[slot] = 1;
        h1s[slot] = h1;
        h2s[slot] = h2;
        break;
      }
      if (h1s[slot] === h1 && h2s[slot] === h2) return true;
      slot = (slot + 1) & mask;
    }
  }
  return false;
}

/**
 * One copy per event_id (the copy with the smallest item_seq, ties broken by the smallest
 * writer_epoch string), ordered by (item_seq, event_id). Does not modify its input.
 *
 * After sorting by (item_seq, event_id, writer_epoch) the first copy of an id met is the one to
 * keep. Copies at the same seq (the common case: base table and an unmerged shard) are adjacent;
 * copies at different seqs are found by a set of ids, only built when a cheap pre-check says
 * there may be one.
 */
export function dedupe(rows: readonly EventRow[]): EventRow[] {
  const sorted = sortRows(rows);
  const out: EventRow[] = [];
  let prev: EventRow | undefined;
  for (let i = 0; i < sorted.length; i++) {
    const r = sorted[i]!;
    if (prev !== undefined && prev.item_seq === r.item_seq && prev.event_id === r.event_id) continue;
    out.push(r);
    prev = r;
  }
  if (!mayHaveDuplicateIds(out)) return out;
  const seen = new Set<string>();
  return out.filter((r) => {
    const size = seen.size;
    seen.add(r.event_id);
    return seen.size !== size;
  });
}

function where(r: EventRow): string {
  return `event ${r.event_id} (item ${JSON.stringify(r.item_id)}, seq ${r.item_seq})`;
}

export interface FoldOptions {
  /**
   * false: leave `fields` empty and do not decode values, for listings that read rows without
   * the value columns (SUMMARY_COLUMNS). Status, cursor, failures and violations are unchanged.
   */
  fields?: boolean;
}

/**
 * The state of `itemId` from its (possibly duplicated, unordered) rows. Rows of other items are
 * ignored. Throws NotFoundError when there is none, CorruptError when a row cannot be decoded.
 */
export function foldItem(itemId: string, rows: readonly EventRow[], options: FoldOptions = {}): ItemState {
  const withFields = options.fields !== false;
  let mine: readonly EventRow[] = rows;
  for (const r of rows) {
    if (r.item_id !== itemId) {
      mine = rows.filter((x) => x.item_id === itemId);
      break;
    }
  }
  if (mine.length === 0) throw new NotFoundError(`item ${JSON.stringify(itemId)} not found`);
  const events = dedupe(mine);

  const first = events[0]!;
  let created: EventRow | null = null;
  for (const e of events) {
    if (e.event_type === 'ITEM_CREATED') {
      created = e;
      break;
    }
  }

  const fields = new Map<string, OutputValue>();
  const failures: Failure[] = [];
  const violations: Violation[] = [];
  const cursors = new StepChooser<{ iteration: number | null; index: number | null; cursor: Cursor }>();
  let terminalKind: TerminalKind | null = null;
  let terminalEvent: EventRow | null = null;
  let lastStepWasFailure = false;
  let attempts = 0;
  let seenCreate = false;
  let forkedFrom: ForkedFrom | null = null;

  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    const seq = e.item_seq;

    // Two different events at one seq: report the whole group once, at its first member.
    if (i === 0 || events[i - 1]!.item_seq !== seq) {
      let j = i + 1;
      while (j < events.length && events[j]!.item_seq === seq) j++;
      if (j - i > 1) {
        const ids = events.slice(i, j).map((x) => x.event_id);
        violations.push({
          kind: 'seq_conflict',
          seq,
          eventIds: ids,
          message: `writer-fencing violation: ${ids.length} different events at item_seq ${seq} (${ids.join(', ')})`,
        });
      }
    }

    // A fork's lineage follows what the fork kept, a terminal event included (lib/lineage.ts).
    const lineage = e.event_type === 'FIELD_SET' && e.field_name === LINEAGE_FIELD;
    if (terminalEvent !== null && !lineage) {
      violations.push({
        kind: 'event_after_terminal',
        seq,
        eventIds: [e.event_id, terminalEvent.event_id],
        message: `${e.event_type} ${e.event_id} at seq ${seq} follows TERMINAL ${terminalEvent.event_id} at seq ${terminalEvent.item_seq}`,
      });
    }

    if (!seenCreate) {
      if (e === created) {
        seenCreate = true;
      } else {
        violations.push({
          kind: 'event_before_create',
          seq,
          eventIds: created ? [e.event_id, created.event_id] : [e.event_id],
          message: created
            ? `${e.event_type} ${e.event_id} at seq ${seq} precedes ITEM_CREATED ${created.event_id} at seq ${created.item_seq}`
            : `${e.event_type} ${e.event_id} at seq ${seq}: the item has no ITEM_CREATED event`,
        });
      }
    }

    if (e.attempt > attempts) attempts = e.attempt;

    switch (e.event_type) {
      case 'ITEM_CREATED':
        break;
      case 'FIELD_SET':
        if (lineage) {
          // Rows read without value columns (listings) leave it out, as they leave out fields.
          if (withFields || e.value_json != null) forkedFrom = parseLineage(decodeValue(e), where(e));
        } else if (withFields) fields.set(fieldNameOf(e), decodeValue(e));
        break;
      case 'FIELD_APPEND': {
        if (!withFields) break;
        const name = fieldNameOf(e);
        const v = decodeValue(e);
        const cur = fields.get(name);
        // Every stored value is freshly decoded, so extending an array in place is safe.
        if (Array.isArray(cur)) cur.push(v as JsonValue);
        else fields.set(name, cur === undefined ? [v as JsonValue] : [cur as JsonValue, v as JsonValue]);
        break;
      }
      case 'STEP_COMPLETED':
        // Events come in log order: of equal rank, the later one wins.
        cursors.offer({
          iteration: e.iteration,
          index: e.step_index,
          cursor: {
            stepName: e.step_name,
            stepIndex: e.step_index,
            stepInstanceId: e.step_instance_id,
            iteration: e.iteration,
            attempt: e.attempt,
            checkpointId: e.checkpoint_id,
          },
        });
        lastStepWasFailure = false;
        break;
      case 'FAILED':
        failures.push({
          stepName: e.step_name,
          attempt: e.attempt,
          errorType: e.error_type,
          errorDump: e.error_dump,
          traceback: e.traceback,
          seq,
        });
        lastStepWasFailure = true;
        break;
      case 'TERMINAL':
        if (e.terminal !== 'completed' && e.terminal !== 'filtered') {
          throw new CorruptError(`${where(e)}: TERMINAL with terminal ${JSON.stringify(e.terminal)}`);
        }
        terminalKind = e.terminal;
        terminalEvent ??= e;
        break;
      default:
        throw new CorruptError(`${where(e)}: unknown event_type ${JSON.stringify(e.event_type)} (schema_version ${e.schema_version}); upgrade dgcl`);
    }
  }

  const status: ItemStatus = terminalKind ?? (lastStepWasFailure ? 'failed' : 'in_progress');
  const origin = created ?? first;
  return {
    itemId,
    rootItemId: origin.root_item_id,
    parentItemId: origin.parent_item_id,
    status,
    // fromEntries defines own properties, so a field called "__proto__" stays a field.
    fields: Object.fromEntries(fields) as Record<string, OutputValue>,
    cursor: cursors.chosen?.cursor ?? null,
    lastSeq: events[events.length - 1]!.item_seq,
    attempts,
    failures,
    violations,
    ...(forkedFrom ? { forkedFrom } : {}),
  };
}

function fieldNameOf(e: EventRow): string {
  if (e.field_name === null || e.field_name === undefined) throw new CorruptError(`${where(e)}: ${e.event_type} without field_name`);
  return e.field_name;
}

let lastTsUs = NaN;
let lastTsText = '';

/** `YYYY-MM-DDTHH:MM:SS.ffffffZ` from microseconds since the Unix epoch. */
export function formatEventTs(us: number): string {
  // The events of one batch share their time: remember the last one formatted.
  if (us === lastTsUs) return lastTsText;
  lastTsUs = us;
  lastTsText = formatTs(us);
  return lastTsText;
}

function formatTs(us: number): string {
  const ms = Math.floor(us / 1000);
  const micros = us - ms * 1000;
  const iso = new Date(ms).toISOString(); // ...SS.mmmZ
  return `${iso.slice(0, -1)}${String(micros).padStart(3, '0')}Z`;
}

/**
 * The item's events, deduplicated, in (item_seq, event_id) order, as camelCase objects holding
 * only the columns that are set; values decoded (blobs as $blobRef), queryTags parsed.
 */
export function trajectory(rows: readonly EventRow[]): TrajectoryEvent[] {
  return dedupe(rows).map((r) => {
    // Built in the seed's column order so JSON output reads like the schema.
    const t: Record<string, unknown> = { eventId: r.event_id, itemId: r.item_id, rootItemId: r.root_item_id };
    if (r.parent_item_id != null) t.parentItemId = r.parent_item_id;
    t.itemSeq = r.item_seq;
    t.checkpointId = r.checkpoint_id;
    t.eventType = r.event_type;
    if (r.step_name != null) t.stepName = r.step_name;
    if (r.step_index != null) t.stepIndex = r.step_index;
    if (r.step_instance_id != null) t.stepInstanceId = r.step_instance_id;
    if (r.iteration != null) t.iteration = r.iteration;
    t.attempt = r.attempt;
    t.runId = r.run_id;
    t.writerEpoch = r.writer_epoch;
    if (r.field_name != null) t.fieldName = r.field_name;
    if (r.field_type != null) t.fieldType = r.field_type;
    if (r.codec_version != null) t.codecVersion = r.codec_version;
    if (r.value_kind != null) {
      t.valueKind = r.value_kind;
      t.value = decodeValue(r);
    }
    if (r.query_tags_json != null) {
      try {
        t.queryTags = JSON.parse(r.query_tags_json) as JsonValue;
      } catch (e) {
        throw new CorruptError(`${where(r)}: query_tags_json is not valid JSON`, { cause: e });
      }
    }
    if (r.terminal != null) t.terminal = r.terminal;
    if (r.error_type != null) t.errorType = r.error_type;
    if (r.error_dump != null) t.errorDump = r.error_dump;
    if (r.traceback != null) t.traceback = r.traceback;
    t.eventTs = formatEventTs(r.event_ts);
    t.schemaVersion = r.schema_version;
    return t as unknown as TrajectoryEvent;
  });
}

/** One line of `dgcl items`. */
export function summarize(state: ItemState): ItemSummary {
  return { itemId: state.itemId, status: state.status, cursor: state.cursor, lastSeq: state.lastSeq, ...(state.forkedFrom ? { forkedFrom: state.forkedFrom } : {}) };
}
