/**
 * Item listings filtered by lineage and query tags, paged (docs/api.md, "Listing items"). Built
 * on the streaming summary (lib/log/read/summary.ts): filters on `root_item_id`, `parent_item_id`
 * and the page cursor go down to Lance; tags are matched from the rows that carry tags only;
 * without a status filter the page's item ids are chosen first from the `item_id` column alone,
 * and only those items are aggregated (the range up to the page's last id goes down to Lance).
 * A filter (`where`, lib/select/) is decided from each item's aggregate where it can be, and
 * from the tags and fields it names, loaded for the items still undecided
 * (lib/log/read/selected.ts).
 */
import type * as arrow from 'apache-arrow';
import type { ItemPage } from '../../api.ts';
import { canonicalJson, isPlainObject } from '../../codec.ts';
import { CorruptError, InvalidInputError } from '../../errors.ts';
import { checkWhere } from '../../select/check.ts';
import { decide } from '../../select/evaluate.ts';
import { needsOf } from '../../select/subject.ts';
import type { Where } from '../../select/where.ts';
import type { ItemQuery, JsonValue } from '../../types.ts';
import { ITEM_STATUSES } from '../../types.ts';
import { Int64Column, Utf8Column } from '../columns.ts';
import { MAX_IN, tagMentionFilter } from './select-loads.ts';
import { selectAggregates, subjectOf } from './selected.ts';
import type { EventVisitor, ScanOptions } from './stream.ts';
import { compareUtf8, statusOf, summaryOf, type ItemAggregate } from './summary.ts';
import { sqlIn, sqlString } from '../tables.ts';

export interface ListingSource {
  aggregates(filter: string | null): Promise<ItemAggregate[]>;
  /**
   * The page `q` asks for (cursor, status, limit; no lineage or tags) through the maintained
   * projection, or null when none describes the base.
   */
  projectedPage(q: ItemQuery): Promise<ItemPage | null>;
  /** Every item's aggregate through the maintained projection (in item order), or null when none describes the base. */
  projected(): Promise<ItemAggregate[] | null>;
  scanEvents<T>(o: ScanOptions, make: () => EventVisitor<T>): Promise<T>;
}

function checkQuery(q: ItemQuery): { tags: Map<string, string>; where: Where | null } {
  if (q.status !== undefined && !ITEM_STATUSES.includes(q.status)) {
    throw new InvalidInputError(`status must be one of ${ITEM_STATUSES.join(', ')}, got ${JSON.stringify(q.status)}`, { field: 'status' });
  }
  if (q.limit !== undefined && (!Number.isSafeInteger(q.limit) || q.limit < 1)) {
    throw new InvalidInputError(`limit must be a positive integer, got ${JSON.stringify(q.limit)}`, { field: 'limit' });
  }
  for (const k of ['after', 'rootItemId', 'parentItemId'] as const) {
    const v = q[k];
    if (v !== undefined && (typeof v !== 'string' || v === '')) throw new InvalidInputError(`${k} must be a non-empty string`, { field: k });
  }
  const tags = new Map<string, string>();
  if (q.tags !== undefined) {
    if (!isPlainObject(q.tags) || Object.keys(q.tags).length === 0) {
      throw new InvalidInputError('tags must be a non-empty object of tag name -> JSON value', { field: 'tags' });
    }
    for (const [k, v] of Object.entries(q.tags)) tags.set(k, canonicalJson(v, `tags.${k}`));
  }
  return { tags, where: q.where === undefined ? null : checkWhere(q.where, 'where') };
}

export async function listItems(src: ListingSource, q: ItemQuery = {}): Promise<ItemPage> {
  const { tags, where: selector } = checkQuery(q);
  const lineage: string[] = [];
  if (q.rootItemId !== undefined) lineage.push(`root_item_id = ${sqlString(q.rootItemId)}`);
  if (q.parentItemId !== undefined) lineage.push(`parent_item_id = ${sqlString(q.parentItemId)}`);
  const parts = q.after !== undefined ? [`item_id > ${sqlString(q.after)}`, ...lineage] : lineage;
  const where = parts.length > 0 ? parts.join(' AND ') : null;
  if (selector !== null) return listSelected(src, q, selector, tags, lineage.length > 0, where);
  // Without lineage or tags, every item's aggregate through the projection is cheaper than
  // choosing a page's ids from the log (lib/log/projection/projection.ts); the page is cut from it here.
  if (lineage.length === 0 && tags.size === 0) {
    const page = await src.projectedPage(q);
    if (page) return page;
  }

  // Candidate ids, sorted like Lance compares them (UTF-8 bytes): null = every item matching `where`.
  let candidates: string[] | null = null;
  /** The page's last item id: the aggregate pass reads only up to it (`item_id <= upTo`). */
  let upTo: string | null = null;
  /**
   * Where the next page starts, set when the page was cut from the ids: it covered every id up
   * to `upTo`, even if items of it were deleted after the ids were chosen (an emptied page
   * still says where to go on, or paging would stop).
   */
  let next: string | undefined;
  if (tags.size > 0) {
    candidates = await taggedItems(src, where, tags);
    if (q.after !== undefined) candidates = candidates.filter((id) => compareUtf8(id, q.after!) > 0);
    // Without a status filter the page is known from the ids.
    if (q.status === undefined && q.limit !== undefined && candidates.length > q.limit) {
      candidates = candidates.slice(0, q.limit);
      next = candidates.at(-1);
    }
    if (candidates.length === 0) return { items: [] };
    upTo = candidates.at(-1)!;
  } else if (q.status === undefined && q.limit !== undefined) {
    // A page without a status filter: its items are the first `limit` ids after the cursor,
    // found from the item_id column alone (holding at most twice a page of ids); then only
    // they are aggregated. So a page costs memory for one page, not for the rest of the log.
    // The cursor is applied here, not pushed down: Lance answers `item_id > after` from the
    // item_id index, and on an early page that range is most of the log, whose index pages and
    // row ids it then holds, more than twice the memory of reading the column whole, which
    // takes no longer (docs/design/performance.md, "Memory of whole-log reads").
    const lineageFilter = lineage.length > 0 ? lineage.join(' AND ') : null;
    const first = await src.scanEvents({ columns: ['item_id'], filter: lineageFilter }, () => new FirstIdsVisitor(q.limit! + 1, q.after ?? null));
    if (first.length === 0) return { items: [] };
    if (first.length > q.limit) next = upTo = first[q.limit - 1]!;
  }
  const inFilter = candidates !== null && candidates.length <= MAX_IN ? sqlIn('item_id', candidates) : null;
  const filter = [where, upTo !== null ? `item_id <= ${sqlString(upTo)}` : null, inFilter].filter((x): x is string => x !== null).join(' AND ') || null;
  let aggs = await src.aggregates(filter);
  if (candidates !== null && inFilter === null) {
    const wanted = new Set(candidates);
    aggs = aggs.filter((a) => wanted.has(a.itemId));
  }
  let list = aggs.map(summaryOf);
  if (q.after !== undefined) list = list.filter((s) => compareUtf8(s.itemId, q.after!) > 0);
  if (upTo !== null) list = list.filter((s) => compareUtf8(s.itemId, upTo) <= 0);
  if (q.status !== undefined) list = list.filter((s) => s.status === q.status);
  if (q.limit !== undefined && list.length > q.limit) {
    list = list.slice(0, q.limit);
    next = list.at(-1)!.itemId;
  }
  return next !== undefined ? { items: list, next } : { items: list };
}

/**
 * Builds the page `q` asks for (status, limit, and a `where` decided by aggregates alone) from
 * aggregates handed over in item order after the cursor: stops at the first item past a full
 * page (so `next` is only set when there is more).
 */
export function pageVisitor(q: ItemQuery): { visit(a: ItemAggregate): boolean; wanted(): number; done(): ItemPage } {
  const items: ItemPage['items'] = [];
  let next: string | undefined;
  const filtered = q.status !== undefined || q.where !== undefined;
  return {
    // With a filter any number may be needed; without, the page and one more (is there a next?).
    wanted: () => (q.limit === undefined || filtered ? Infinity : q.limit + 1 - items.length),
    visit(a) {
      const s = summaryOf(a);
      if (q.status !== undefined && s.status !== q.status) return true;
      if (q.where !== undefined && decide(q.where, subjectOf(a)) !== true) return true;
      if (q.limit !== undefined && items.length === q.limit) {
        next = items.at(-1)!.itemId;
        return false;
      }
      items.push(s);
      return true;
    },
    done: () => (next !== undefined ? { items, next } : { items }),
  };
}

/**
 * A listing with `where`: the items after the cursor that pass status, lineage and tags, then
 * those the filter selects, up to `limit` (lib/log/read/selected.ts). When the filter names no
 * tag or field (it is decided by aggregates), a plain listing walks the projection from its
 * cursor and stops once the page is full, like a status filter.
 */
async function listSelected(src: ListingSource, q: ItemQuery, w: Where, tags: Map<string, string>, lineage: boolean, sql: string | null): Promise<ItemPage> {
  const needs = needsOf(w);
  const bySummary = needs.tags.length === 0 && needs.fields.length === 0;
  let aggs: ItemAggregate[];
  if (!lineage && tags.size === 0) {
    if (bySummary) {
      const page = await src.projectedPage(q);
      if (page) return page;
    }
    // No projection (or values to load): every item's aggregate, the cursor applied below.
    aggs = (bySummary ? null : await src.projected()) ?? (await src.aggregates(sql));
  } else {
    const candidates = tags.size > 0 ? await taggedItems(src, sql, tags) : null;
    if (candidates?.length === 0) return { items: [] };
    const inFilter = candidates !== null && candidates.length <= MAX_IN ? sqlIn('item_id', candidates) : null;
    aggs = await src.aggregates([sql, inFilter].filter((x): x is string => x !== null).join(' AND ') || null);
    if (candidates !== null && inFilter === null) {
      const wanted = new Set(candidates);
      aggs = aggs.filter((a) => wanted.has(a.itemId));
    }
  }
  aggs = aggs.filter((a) => (q.after === undefined || compareUtf8(a.itemId, q.after) > 0) && (q.status === undefined || statusOf(a) === q.status));
  const { selected, more } = await selectAggregates(src, aggs, w, q.limit);
  const items = selected.map(summaryOf);
  return more ? { items, next: items.at(-1)!.itemId } : { items };
}

/**
 * Items whose query tags match: an item's tags are every batch's `queryTags` merged in seq order
 * (a later batch's value of a key replaces an earlier one). Reads only rows whose tags mention
 * one of the keys (a LIKE on the canonical JSON), and only the tag column of those.
 */
async function taggedItems(src: ListingSource, where: string | null, tags: Map<string, string>): Promise<string[]> {
  const filter = [where, tagMentionFilter(tags.keys())].filter((x): x is string => x !== null).join(' AND ');
  const latest = await src.scanEvents({ columns: ['item_id', 'item_seq', 'query_tags_json'], filter }, () => new TagVisitor(tags));
  const out: string[] = [];
  for (const [itemId, byKey] of latest) if ([...tags].every(([k, v]) => byKey.get(k)?.value === v)) out.push(itemId);
  return out.sort(compareUtf8);
}

/**
 * The first `n` distinct item ids after `after` (null: from the start) in UTF-8 byte order.
 * Holds at most 2n ids: when full it keeps the n smallest and from then on skips every id above
 * the largest of them.
 */
class FirstIdsVisitor implements EventVisitor<string[]> {
  private ids = new Set<string>();
  /** Ids above it cannot be among the first n (null until the first prune). */
  private bound: string | null = null;
  constructor(
    private readonly n: number,
    private readonly after: string | null,
  ) {}
  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    const col = new Utf8Column(b, 'item_id');
    let seen = -1; // rows of one item come in runs: look at an id once per run
    for (let r = 0; r < b.numRows; r++) {
      if (!keep(r) || (seen >= 0 && col.same(r, seen))) continue;
      seen = r;
      const id = col.get(r);
      if (id === null || (this.after !== null && compareUtf8(id, this.after) <= 0)) continue;
      if (this.bound !== null && compareUtf8(id, this.bound) > 0) continue;
      this.ids.add(id);
      if (this.ids.size >= 2 * this.n) this.prune();
    }
  }
  private prune(): void {
    const first = [...this.ids].sort(compareUtf8).slice(0, this.n);
    this.ids = new Set(first);
    this.bound = first.at(-1) ?? null;
  }
  done(): string[] {
    return [...this.ids].sort(compareUtf8).slice(0, this.n);
  }
}

/** Per item and tag key: the canonical value of the key in the tags of the latest event mentioning it. */
class TagVisitor implements EventVisitor<Map<string, Map<string, { seq: number; value: string }>>> {
  private readonly items = new Map<string, Map<string, { seq: number; value: string }>>();
  constructor(private readonly keys: Map<string, string>) {}
  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    const ids = new Utf8Column(b, 'item_id');
    const seqs = new Int64Column(b, 'item_seq');
    const json = new Utf8Column(b, 'query_tags_json');
    for (let r = 0; r < b.numRows; r++) {
      if (!keep(r)) continue;
      const itemId = ids.get(r)!;
      const seq = seqs.get(r)!;
      let parsed: Record<string, JsonValue>;
      try {
        parsed = JSON.parse(json.get(r)!) as Record<string, JsonValue>;
      } catch (e) {
        throw new CorruptError(`query_tags_json of item ${JSON.stringify(itemId)} at seq ${seq} is not valid JSON`, { cause: e });
      }
      let byKey = this.items.get(itemId);
      if (!byKey) this.items.set(itemId, (byKey = new Map()));
      for (const k of this.keys.keys()) {
        if (!Object.hasOwn(parsed, k)) continue;
        const cur = byKey.get(k);
        if (!cur || seq > cur.seq) byKey.set(k, { seq, value: canonicalJson(parsed[k], 'queryTags') });
      }
    }
  }
  done(): Map<string, Map<string, { seq: number; value: string }>> {
    return this.items;
  }
}
