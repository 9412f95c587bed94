/**
 * What a fork keeps of each item (docs/usage.md, "Forking a cohort"): its events before its
 * first event of the fork's step, and the lineage event that follows them. Pure: the rules and
 * the lineage event; lib/log/admin/fork-read.ts applies the cut to the rows read.
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

/** Refusal of an item that keeps no event: there is no creation to resume from. */
export function noEventBefore(itemId: string, k: StepRef): InvalidInputError {
  return new InvalidInputError(`item ${JSON.stringify(itemId)} has no event before its first event of ${describeStep(k)}: there is nothing to fork from; fork from a later step, or run the item again from the start`, {
    field: 'fromStep',
  });
}

/** What an item's lineage event takes from its kept events. */
export interface LineageSource {
  itemId: string;
  /** The seq of its last kept event. */
  lastKeptSeq: number;
  /** Of its creation event (else its first kept event). */
  rootItemId: string;
  parentItemId: string | null;
  /** Of its last kept event. */
  attempt: number;
  writerEpoch: string;
}

/** The lineage of a kept item. */
export function lineageOfCut(c: LineageSource, source: { pipeline: string; experiment: string }): ForkedFrom {
  return { pipeline: source.pipeline, experiment: source.experiment, itemId: c.itemId, lastKeptSeq: c.lastKeptSeq };
}

/**
 * The lineage event of a cut: a FIELD_SET of the lineage field at the seq after the last kept
 * event, with ids derived from the lineage and the fork's experiment (the same fork writes the
 * same event), the item's root and parent, and the last kept event's epoch (an epoch the log
 * already names, so the fork's records start above it).
 */
export function lineageRow(c: LineageSource, lineage: ForkedFrom, toExperiment: string, nowUs: number): EventRow {
  const json = lineageJson(lineage);
  const cp = checkpointId(`fork\n${toExperiment}\n${json}`);
  return {
    event_id: eventId(cp, 0),
    item_id: c.itemId,
    root_item_id: c.rootItemId,
    parent_item_id: c.parentItemId,
    item_seq: c.lastKeptSeq + 1,
    checkpoint_id: cp,
    event_type: 'FIELD_SET',
    step_name: null,
    step_index: null,
    step_instance_id: null,
    iteration: null,
    attempt: c.attempt,
    run_id: FORK_RUN_ID,
    writer_epoch: c.writerEpoch,
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
