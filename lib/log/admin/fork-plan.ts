/**
 * What a fork keeps of each item (docs/usage.md, "Forking a cohort"): its events before its
 * first event of the fork's step, and the lineage event that follows them. Pure: rows in, rows out.
 *
 * "First event of step k" is the event with the lowest seq whose step_name (a name) or
 * step_index (an index) is k: a failed attempt of the step is such an event, so it is dropped
 * with the rest. An item that never reached step k keeps every event.
 */
import { checkpointId, eventId } from '../../ids.ts';
import { InvalidInputError } from '../../errors.ts';
import { FORK_RUN_ID, LINEAGE_FIELD, lineageJson } from '../../lineage.ts';
import { SCHEMA_VERSION, type EventRow, type ForkedFrom } from '../../types.ts';
import { valueColumns } from '../../codec.ts';

export type StepRef = string | number;

/** `fromStep` checked: a non-empty step name, or a step index (a whole number >= 0). */
export function checkStepRef(v: unknown, field = 'fromStep'): StepRef {
  if (typeof v === 'string' && v.length > 0) return v;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
  throw new InvalidInputError(`must be a step name or a step index (a whole number >= 0), got ${JSON.stringify(v)}`, { field });
}

/** A CLI's `--from-step`: digits are an index, anything else a name. */
export function parseStepRef(text: string): StepRef {
  return /^\d+$/.test(text) ? Number(text) : checkStepRef(text, 'from-step');
}

export function describeStep(k: StepRef): string {
  return typeof k === 'number' ? `step index ${k}` : `step ${JSON.stringify(k)}`;
}

function ofStep(r: EventRow, k: StepRef): boolean {
  return typeof k === 'number' ? r.step_index === k : r.step_name === k;
}

export interface ItemCut {
  itemId: string;
  /** The events kept, in seq order. */
  kept: EventRow[];
  lineage: ForkedFrom;
}

/**
 * The kept events of one item (its rows, each event once, any order) and its lineage. Refused
 * (INVALID_INPUT) when nothing comes before step k: the item would have no creation to resume from.
 */
export function cutItem(itemId: string, rows: readonly EventRow[], k: StepRef, source: { pipeline: string; experiment: string }): ItemCut {
  let cut = Infinity;
  for (const r of rows) if (r.item_seq < cut && ofStep(r, k)) cut = r.item_seq;
  const kept = rows.filter((r) => r.item_seq < cut).sort((a, b) => a.item_seq - b.item_seq || (a.event_id < b.event_id ? -1 : a.event_id > b.event_id ? 1 : 0));
  if (kept.length === 0) {
    throw new InvalidInputError(`item ${JSON.stringify(itemId)} has no event before its first event of ${describeStep(k)}: there is nothing to fork from; fork from a later step, or run the item again from the start`, {
      field: 'fromStep',
    });
  }
  const lastKeptSeq = kept[kept.length - 1]!.item_seq;
  return { itemId, kept, lineage: { pipeline: source.pipeline, experiment: source.experiment, itemId, lastKeptSeq } };
}

/**
 * The lineage event of a cut: a FIELD_SET of the lineage field at the seq after the last kept
 * event, with ids derived from the lineage and the fork's experiment (the same fork writes the
 * same event), the item's root and parent, and the last kept event's epoch (an epoch the log
 * already names, so the fork's records start above it).
 */
export function lineageRow(c: ItemCut, toExperiment: string, nowUs: number): EventRow {
  const last = c.kept[c.kept.length - 1]!;
  const created = c.kept.find((r) => r.event_type === 'ITEM_CREATED') ?? c.kept[0]!;
  const json = lineageJson(c.lineage);
  const cp = checkpointId(`fork\n${toExperiment}\n${json}`);
  return {
    event_id: eventId(cp, 0),
    item_id: c.itemId,
    root_item_id: created.root_item_id,
    parent_item_id: created.parent_item_id,
    item_seq: c.lineage.lastKeptSeq + 1,
    checkpoint_id: cp,
    event_type: 'FIELD_SET',
    step_name: null,
    step_index: null,
    step_instance_id: null,
    iteration: null,
    attempt: last.attempt,
    run_id: FORK_RUN_ID,
    writer_epoch: last.writer_epoch,
    field_name: LINEAGE_FIELD,
    ...valueColumns({ kind: 'json', json }),
    query_tags_json: null,
    terminal: null,
    error_type: null,
    error_dump: null,
    traceback: null,
    event_ts: nowUs,
    schema_version: SCHEMA_VERSION,
  };
}

/**
 * The items a fork takes: the selected ones, and with `children` every item whose root or
 * parent is one of them. `lineage`: each item's root and parent.
 */
export function withChildren(selected: readonly string[], lineage: ReadonlyMap<string, { rootItemId: string; parentItemId: string | null }>): string[] {
  const chosen = new Set(selected);
  const out = [...selected];
  for (const [id, l] of lineage) {
    if (chosen.has(id)) continue;
    if (chosen.has(l.rootItemId) || (l.parentItemId !== null && chosen.has(l.parentItemId))) out.push(id);
  }
  return out;
}
