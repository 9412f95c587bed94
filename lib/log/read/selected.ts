/**
 * Applying a filter (lib/select/) to listing aggregates (lib/log/read/summary.ts): each item is
 * decided from its aggregate when the filter allows it (status, step, attempts, error type,
 * lineage, id), and the items left undecided get the tags and fields the filter names loaded
 * (lib/log/read/select-loads.ts), in chunks of ids in item order, so a page of a listing reads
 * the values of about as many items as it needs. `items`, `failures`, the report and the export
 * share it.
 */
import type { FailureSummary } from '../../api.ts';
import { checkWhere } from '../../select/check.ts';
import { decide, matches } from '../../select/evaluate.ts';
import { needsOf, type Subject } from '../../select/subject.ts';
import type { Where } from '../../select/where.ts';
import { Utf8Column } from '../columns.ts';
import { loadFields, loadTags, type LoadSource } from './select-loads.ts';
import type { EventVisitor } from './stream.ts';
import { cursorOf, failureOf, lineageOf, statusOf, type ItemAggregate } from './summary.ts';

/** A filter's view of an item's aggregate (no tags or fields: a comparison of one is undecided). */
export function subjectOf(a: ItemAggregate): Subject {
  const { rootItemId, parentItemId } = lineageOf(a);
  return {
    itemId: a.itemId,
    status: statusOf(a),
    step: cursorOf(a)?.stepName ?? null,
    attempts: a.attempts,
    errorType: a.failure?.errorType ?? null,
    rootItemId,
    parentItemId,
  };
}

/** Items whose values a page loads first; each later chunk is twice as large. */
const FIRST_CHUNK = 256;

export interface Selection {
  /** The selected aggregates, in the order given; at most `limit`. */
  selected: ItemAggregate[];
  /** Whether another selected item follows the last one (only looked for with a limit). */
  more: boolean;
}

/**
 * The aggregates of `aggs` (in item order) that `where` selects: all of them, or with `limit` the
 * first `limit` and whether one more follows. Tags and fields are loaded only for items their
 * aggregate leaves undecided: every such item at once without a limit, else chunks of them.
 */
export async function selectAggregates(src: LoadSource, aggs: readonly ItemAggregate[], where: Where, limit?: number): Promise<Selection> {
  const needs = needsOf(where);
  const want = limit === undefined ? Infinity : limit + 1;
  const out: ItemAggregate[] = [];
  let chunk = limit === undefined ? aggs.length : Math.max(FIRST_CHUNK, want);
  for (let i = 0; i < aggs.length && out.length < want; i += chunk, chunk *= 2) {
    const part = aggs.slice(i, i + chunk);
    const subjects = part.map(subjectOf);
    const decided = subjects.map((s) => decide(where, s));
    const open = subjects.filter((_, k) => decided[k] === undefined);
    if (open.length > 0) {
      const ids = open.map((s) => s.itemId);
      const [tags, fields] = await Promise.all([
        needs.tags.length > 0 ? loadTags(src, ids, needs.tags) : null,
        needs.fields.length > 0 ? loadFields(src, ids, needs.fields) : null,
      ]);
      for (const s of open) {
        if (tags) s.tags = tags.get(s.itemId) ?? {};
        if (fields) s.fields = fields.get(s.itemId) ?? {};
      }
      for (let k = 0; k < subjects.length; k++) if (decided[k] === undefined) decided[k] = matches(where, subjects[k]!);
    }
    for (let k = 0; k < part.length && out.length < want; k++) if (decided[k]) out.push(part[k]!);
  }
  return limit !== undefined && out.length > limit ? { selected: out.slice(0, limit), more: true } : { selected: out, more: false };
}

export interface SelectSource extends LoadSource {
  /** Every item's aggregate (through the projection when one describes the base). */
  aggregates(filter: string | null): Promise<ItemAggregate[]>;
}

/** Every item `where` selects (validated here: INVALID_INPUT before any read), in item order. */
export async function selectedAggregates(src: SelectSource, where: unknown, field = 'where'): Promise<ItemAggregate[]> {
  const w = checkWhere(where, field);
  return (await selectAggregates(src, await src.aggregates(null), w)).selected;
}

/** `failures({where})`: the failed items `where` selects, each with its last failure. */
export async function selectedFailures(src: SelectSource, where: unknown): Promise<FailureSummary[]> {
  const w = checkWhere(where, 'where');
  const failed = (await src.aggregates(null)).filter((a) => failureOf(a) !== null);
  return (await selectAggregates(src, failed, w)).selected.map((a) => failureOf(a)!);
}

/** `inner` fed only the rows of the items in `ids` (a pass restricted to selected items). */
export function onlyItems<T>(ids: ReadonlySet<string>, inner: EventVisitor<T>): EventVisitor<T> {
  return {
    batch(b, keep) {
      const col = new Utf8Column(b, 'item_id');
      let seen = -1;
      let wanted = false;
      inner.batch(b, (r) => {
        if (!keep(r)) return false;
        // Rows of one item come in runs: look the id up once per run.
        if (seen < 0 || !col.same(r, seen)) wanted = ids.has(col.get(r)!);
        seen = r;
        return wanted;
      });
    },
    done: () => inner.done(),
  };
}
