/**
 * What a filter is evaluated against: one folded item's attributes (a listing's summary has
 * them all), plus the tags and fields the filter names, loaded only when it names some. And
 * what a filter needs loaded (`needsOf`).
 */
import { CorruptError } from '../errors.ts';
import type { EventRow, ItemState, ItemStatus, JsonValue, OutputValue } from '../types.ts';
import type { Where } from './where.ts';

export interface Subject {
  itemId: string;
  status: ItemStatus;
  /** The cursor's step name (the last completed step, lib/step-order.ts); null without one. */
  step: string | null;
  /** The largest attempt of any event. */
  attempts: number;
  /** The error type of the item's latest FAILED event, whatever its status now; null without one. */
  errorType: string | null;
  rootItemId: string | null;
  parentItemId: string | null;
  /**
   * The item's merged query tags (at least those the filter names); absent: not loaded, and a
   * comparison of a tag is undecided (lib/select/evaluate.ts).
   */
  tags?: Readonly<Record<string, JsonValue>>;
  /** The item's fields as fold shows them (at least those the filter names); absent: not loaded. */
  fields?: Readonly<Record<string, OutputValue>>;
}

/** The tags and fields a filter names: what must be loaded beyond an item's summary. */
export interface Needs {
  tags: string[];
  fields: string[];
}

export function needsOf(w: Where): Needs {
  const tags = new Set<string>();
  const fields = new Set<string>();
  const walk = (x: Where): void => {
    if ('cmp' in x) {
      const left = x.cmp.left;
      if (left.startsWith('tag.')) tags.add(left.slice(4));
      else if (left.startsWith('field.')) fields.add(left.slice(6));
    } else if ('not' in x) walk(x.not);
    else for (const p of 'and' in x ? x.and : x.or) walk(p);
  };
  walk(w);
  return { tags: [...tags], fields: [...fields] };
}

/** The subject of a folded item (lib/fold.ts): `state.fields` holds the fields it was folded with. */
export function subjectOfState(state: ItemState, tags?: Readonly<Record<string, JsonValue>>): Subject {
  const s: Subject = {
    itemId: state.itemId,
    status: state.status,
    step: state.cursor?.stepName ?? null,
    attempts: state.attempts,
    // fold lists failures in log order: the last is the latest.
    errorType: state.failures.at(-1)?.errorType ?? null,
    rootItemId: state.rootItemId,
    parentItemId: state.parentItemId,
    fields: state.fields,
  };
  if (tags !== undefined) s.tags = tags;
  return s;
}

/**
 * The tags `names` of one item's rows: every batch's query tags merged in seq order (a later
 * batch's value of a key replaces an earlier one), as `items({tags})` merges them.
 */
export function tagsOfRows(rows: readonly Pick<EventRow, 'item_id' | 'item_seq' | 'query_tags_json'>[], names: readonly string[]): Record<string, JsonValue> {
  const best = new Map<string, { seq: number; value: JsonValue }>();
  for (const r of rows) {
    if (r.query_tags_json == null) continue;
    let tags: Record<string, JsonValue>;
    try {
      tags = JSON.parse(r.query_tags_json) as Record<string, JsonValue>;
    } catch (e) {
      throw new CorruptError(`query_tags_json of item ${JSON.stringify(r.item_id)} at seq ${r.item_seq} is not valid JSON`, { cause: e });
    }
    if (typeof tags !== 'object' || tags === null || Array.isArray(tags)) {
      throw new CorruptError(`query_tags_json of item ${JSON.stringify(r.item_id)} at seq ${r.item_seq} is not a JSON object`);
    }
    for (const k of names) {
      if (!Object.hasOwn(tags, k)) continue;
      const cur = best.get(k);
      if (!cur || r.item_seq > cur.seq) best.set(k, { seq: r.item_seq, value: tags[k]! });
    }
  }
  return Object.fromEntries([...best].map(([k, v]) => [k, v.value]));
}
