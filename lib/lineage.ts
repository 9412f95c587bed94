/**
 * A fork's lineage as the fork's log stores it (docs/usage.md, "Forking a cohort"): one FIELD_SET
 * of the reserved field `_dgcl.forkedFrom` per forked item, right after the last event it kept,
 * holding where the item came from as JSON. A field rather than an event type of its own, so
 * that every reader folds it (older ones as a field) and no step, status or cursor moves: the
 * forked item's cursor stays the step before the fork's. Pure: no I/O.
 */
import { CorruptError } from './errors.ts';
import type { ForkedFrom } from './types.ts';

/** Field names with this prefix are the log's own; batches may not set them (lib/batch.ts). */
export const RESERVED_FIELD_PREFIX = '_dgcl.';

/** The lineage field. */
export const LINEAGE_FIELD = `${RESERVED_FIELD_PREFIX}forkedFrom`;

/** The run id of the lineage events (no pipeline run wrote them). */
export const FORK_RUN_ID = 'dgcl-fork';

/** The JSON a lineage event stores (keys in a fixed order: equal lineage, equal text). */
export function lineageJson(f: ForkedFrom): string {
  return JSON.stringify({ pipeline: f.pipeline, experiment: f.experiment, itemId: f.itemId, lastKeptSeq: f.lastKeptSeq });
}

/** The lineage a stored value holds; CorruptError naming `where` when it is not one. */
export function parseLineage(value: unknown, where: string): ForkedFrom {
  const v = value as Partial<Record<keyof ForkedFrom, unknown>> | null;
  if (
    v === null ||
    typeof v !== 'object' ||
    Array.isArray(v) ||
    typeof v.pipeline !== 'string' ||
    typeof v.experiment !== 'string' ||
    typeof v.itemId !== 'string' ||
    typeof v.lastKeptSeq !== 'number' ||
    !Number.isSafeInteger(v.lastKeptSeq)
  ) {
    throw new CorruptError(`${where}: field ${LINEAGE_FIELD} is not a fork's lineage ({pipeline, experiment, itemId, lastKeptSeq}): ${JSON.stringify(value)}`);
  }
  return { pipeline: v.pipeline, experiment: v.experiment, itemId: v.itemId, lastKeptSeq: v.lastKeptSeq };
}

export function sameLineage(a: ForkedFrom, b: ForkedFrom): boolean {
  return lineageJson(a) === lineageJson(b);
}
