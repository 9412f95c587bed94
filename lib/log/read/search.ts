/**
 * `search` (docs/api.md, "Search"): the events whose text holds every word of a query (the rules:
 * lib/text-match.ts), over the whole history, in one consistent read (LogReader.read).
 *
 *  - The unmerged tail (the listing's visible shard generations) is scanned with the text rules.
 *  - The base is asked through its full-text indexes (lib/log/text-index.ts), one per column.
 *    LanceDB adds to an index query a flat search of the base rows the index does not cover yet
 *    (merged since the last maintenance), so the index answers for the whole base. An index only
 *    proposes candidates: each is checked with the same rules (a JSON key or number holding the
 *    word is no match). A column without a usable index, or a query word too long for the index,
 *    is scanned instead.
 *  - An event has one copy per read, the lowest seq's, as stream.ts picks it; deleted items'
 *    events are hidden by the tombstones, as every read hides them (lib/log/deleted.ts).
 */
import type * as arrow from 'apache-arrow';
import type { SearchHit, SearchOptions } from '../../api.ts';
import { isWellFormed } from '../../codec.ts';
import { InvalidInputError } from '../../errors.ts';
import { jsonStrings, matchWords, queryWords, snippet } from '../../text-match.ts';
import { EVENT_TYPES, type EventType } from '../../types.ts';
import { Int64Column, Utf8Column } from '../columns.ts';
import { deletedThrough } from '../deleted.ts';
import { sqlIn, type LanceTables, type Table } from '../tables.ts';
import { indexable, isTextIndexOf, TEXT_COLUMNS, textQuery, type TextColumn } from '../text-index.ts';
import type { LogReader, ShardListing } from './reader.ts';
import { releaseBatch } from './release.ts';
import { pinnedBase, stream } from './stream.ts';
import { compareUtf8 } from './summary.ts';
import { readOrder } from './visibility.ts';

export interface SearchContext {
  reader: LogReader;
  tables: LanceTables;
}

export const DEFAULT_SEARCH_LIMIT = 100;
export const MAX_SEARCH_LIMIT = 10_000;

const VALUE_EVENTS: readonly EventType[] = ['FIELD_SET', 'FIELD_APPEND'];
const ERROR_EVENTS: readonly EventType[] = ['FAILED'];
const COLUMNS_OF: Record<TextColumn, readonly EventType[]> = { value_str: VALUE_EVENTS, value_json: VALUE_EVENTS, error_dump: ERROR_EVENTS, traceback: ERROR_EVENTS };
const ROW_COLUMNS = ['event_id', 'item_id', 'item_seq', 'event_type', 'field_name', 'error_type'];
/** Candidates a first index query asks for, at least (a query asks again for more while the checks drop some). */
const MIN_ASK = 256;
/** Ids per base lookup of tail events (as stream.ts). */
const LOOKUP_CHUNK = 1000;

/** A search's checked parameters. */
interface Search {
  words: string[];
  limit: number;
  columns: TextColumn[];
  /** The Lance filter of the event types and fields asked for (null: none). */
  where: string | null;
}

export function checkSearch(text: unknown, o: SearchOptions = {}): Search {
  const words = queryWords(text);
  const limit = o.limit ?? DEFAULT_SEARCH_LIMIT;
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1 || limit > MAX_SEARCH_LIMIT) {
    throw new InvalidInputError(`must be an integer from 1 to ${MAX_SEARCH_LIMIT}, got ${JSON.stringify(limit)}`, { field: 'limit' });
  }
  const where: string[] = [];
  let types: readonly EventType[] = EVENT_TYPES;
  if (o.eventTypes !== undefined) {
    if (!Array.isArray(o.eventTypes) || o.eventTypes.length === 0 || o.eventTypes.some((t) => !(EVENT_TYPES as readonly unknown[]).includes(t))) {
      throw new InvalidInputError(`must be a non-empty array of ${EVENT_TYPES.join(', ')}`, { field: 'eventTypes' });
    }
    types = o.eventTypes;
    where.push(sqlIn('event_type', o.eventTypes));
  }
  if (o.fields !== undefined) {
    if (!Array.isArray(o.fields) || o.fields.length === 0 || o.fields.some((f) => typeof f !== 'string' || f === '')) {
      throw new InvalidInputError('must be a non-empty array of field names', { field: 'fields' });
    }
    // Lance gets a lone surrogate as U+FFFD, a shard's rows are compared as they are: no stored
    // field name holds one (lib/batch.ts), so it is refused rather than read two ways.
    const bad = o.fields.find((f) => !isWellFormed(f));
    if (bad !== undefined) throw new InvalidInputError(`must be valid Unicode (it has a lone UTF-16 surrogate): ${JSON.stringify(bad)}`, { field: 'fields' });
    types = types.filter((t) => VALUE_EVENTS.includes(t));
    where.push(sqlIn('field_name', o.fields));
  }
  const columns = TEXT_COLUMNS.filter((c) => COLUMNS_OF[c].some((t) => types.includes(t)));
  if (columns.length === 0) {
    // Silence would read as "no match": say that nothing asked for can hold text.
    throw new InvalidInputError(
      `no event asked for holds text: values are in ${VALUE_EVENTS.join(' and ')} events, errors in FAILED events (which have no field)`,
      { field: o.fields !== undefined ? 'fields' : 'eventTypes' },
    );
  }
  return { words, limit, columns, where: where.length > 0 ? where.map((w) => `(${w})`).join(' AND ') : null };
}

/** The matches found so far, at most `limit`, one per event. */
class Hits {
  readonly byEvent = new Map<string, SearchHit>();
  constructor(readonly limit: number) {}
  get full(): boolean {
    return this.byEvent.size >= this.limit;
  }
}

/** The rows of a batch as the search reads them. */
class RowReader {
  readonly eventId: Utf8Column;
  readonly itemId: Utf8Column;
  readonly seq: Int64Column;
  readonly eventType: Utf8Column;
  readonly field: Utf8Column;
  readonly errorType: Utf8Column;
  readonly text: Map<TextColumn, Utf8Column>;
  constructor(b: arrow.RecordBatch, columns: readonly TextColumn[]) {
    this.eventId = new Utf8Column(b, 'event_id');
    this.itemId = new Utf8Column(b, 'item_id');
    this.seq = new Int64Column(b, 'item_seq');
    this.eventType = new Utf8Column(b, 'event_type');
    this.field = new Utf8Column(b, 'field_name');
    this.errorType = new Utf8Column(b, 'error_type');
    this.text = new Map(columns.map((c) => [c, new Utf8Column(b, c)]));
  }

  /** Row r as a hit when one of `columns` matches (the first that does), else null. */
  hit(r: number, columns: readonly TextColumn[], words: readonly string[]): SearchHit | null {
    for (const c of columns) {
      const text = this.text.get(c)!.get(r);
      const s = text === null ? null : matchText(c, text, words);
      if (s !== null) {
        return { itemId: this.itemId.get(r)!, seq: this.seq.get(r)!, eventType: this.eventType.get(r)! as EventType, field: this.field.get(r), errorType: this.errorType.get(r), snippet: s };
      }
    }
    return null;
  }
}

/** The snippet of the match of `words` in a text of `column`, or null. JSON: its string values only. */
function matchText(column: TextColumn, text: string, words: readonly string[]): string | null {
  for (const s of column === 'value_json' ? jsonStrings(text) : [text]) {
    const m = matchWords(s, words);
    if (m) return snippet(s, m);
  }
  return null;
}

/** The text filter of a scan: one of `columns` is set, and the events and fields asked for. */
function scanWhere(s: Search, columns: readonly TextColumn[]): string {
  const set = `(${columns.map((c) => `${c} IS NOT NULL`).join(' OR ')})`;
  return s.where ? `${s.where} AND ${set}` : set;
}

export async function searchLog(ctx: SearchContext, text: unknown, options?: SearchOptions): Promise<SearchHit[]> {
  const s = checkSearch(text, options);
  return ctx.reader.read(async (listing) => {
    const hits = new Hits(s.limit);
    const base = await pinnedBase(ctx.tables, listing);
    // Events the tail holds: the base's copies of them are not searched again.
    const inTail = await searchTail(ctx, listing, base, s, hits);
    if (base && !hits.full) await searchBase(base, listing, s, hits, inTail);
    return [...hits.byEvent.values()].sort((a, b) => compareUtf8(a.itemId, b.itemId) || a.seq - b.seq);
  });
}

/**
 * The unmerged generations, scanned: every matching event, at its lowest seq among its copies
 * (the base's included), unless a tombstone hides it. Returns the ids of every tail event that
 * matched (hidden or not), whose base copies the base search skips.
 */
async function searchTail(ctx: SearchContext, listing: ShardListing, base: Table | null, s: Search, hits: Hits): Promise<Set<string>> {
  const columns = [...ROW_COLUMNS, ...s.columns];
  // Scanned newest first per epoch (readOrder), taken in the listing's order (which hits a limit keeps).
  const byGen = new Map<string, Map<string, SearchHit>>();
  for (const v of readOrder(listing.visible)) {
    const met = new Map<string, SearchHit>();
    byGen.set(v.name, met);
    for await (const b of stream(await ctx.reader.shardTable(v), scanWhere(s, s.columns), columns)) {
      const rows = new RowReader(b, s.columns);
      for (let r = 0; r < b.numRows; r++) {
        const id = rows.eventId.get(r)!;
        const known = met.get(id);
        if (known) {
          known.seq = Math.min(known.seq, rows.seq.get(r)!);
          continue;
        }
        const h = rows.hit(r, s.columns, s.words);
        if (h) met.set(id, h);
      }
      releaseBatch(b);
    }
  }
  const found = new Map<string, SearchHit>();
  for (const v of listing.visible) {
    for (const [id, h] of byGen.get(v.name)!) {
      const known = found.get(id);
      if (known) known.seq = Math.min(known.seq, h.seq);
      else found.set(id, h);
    }
  }
  if (base && found.size > 0) {
    const ids = [...found.keys()];
    for (let i = 0; i < ids.length; i += LOOKUP_CHUNK) {
      const t = await base.query().where(sqlIn('event_id', ids.slice(i, i + LOOKUP_CHUNK))).select(['event_id', 'item_seq']).toArrow();
      for (const b of t.batches) {
        const bid = new Utf8Column(b, 'event_id');
        const bseq = new Int64Column(b, 'item_seq');
        for (let r = 0; r < b.numRows; r++) {
          const h = found.get(bid.get(r)!)!;
          h.seq = Math.min(h.seq, bseq.get(r)!);
        }
      }
    }
  }
  for (const [id, h] of found) {
    if (hits.full) break;
    if (h.seq > deletedThrough(listing.tombstones, h.itemId)) hits.byEvent.set(id, h);
  }
  return new Set(found.keys());
}

/** The base: each column through its full-text index, or scanned when it has none usable. */
async function searchBase(base: Table, listing: ShardListing, s: Search, hits: Hits, inTail: ReadonlySet<string>): Promise<void> {
  const indexes = await base.listIndices();
  const scanned: TextColumn[] = [];
  for (const c of s.columns) {
    const words = s.words.filter((w) => indexable(c, w));
    if (words.length === 0 || !indexes.some((ix) => isTextIndexOf(c, ix))) scanned.push(c);
    else await throughIndex(base, listing, s, c, words, hits, inTail);
    if (hits.full) return;
  }
  if (scanned.length > 0) await scanBase(base, listing, s, scanned, hits, inTail);
}

/**
 * Candidates of `column` from its index, best first, checked one by one; while the checks drop
 * some and more candidates exist, asked again for four times as many.
 */
async function throughIndex(base: Table, listing: ShardListing, s: Search, column: TextColumn, words: string[], hits: Hits, inTail: ReadonlySet<string>): Promise<void> {
  const checked = new Set<string>();
  // `_score` selected: LanceDB warns on stderr of a full-text query without it.
  const columns = [...ROW_COLUMNS, column, '_score'];
  for (let ask = Math.max(MIN_ASK, 2 * (hits.limit - hits.byEvent.size)); ; ask *= 4) {
    let q = base.query().fullTextSearch(textQuery(column, words), { columns: column }).select(columns).limit(ask);
    if (s.where) q = q.where(s.where);
    const t = await q.toArrow();
    for (const b of t.batches) {
      const rows = new RowReader(b, [column]);
      for (let r = 0; r < b.numRows && !hits.full; r++) {
        const id = rows.eventId.get(r)!;
        if (checked.has(id)) continue;
        checked.add(id);
        consider(rows, r, id, [column], s, listing, hits, inTail);
      }
    }
    if (hits.full || t.numRows < ask) return;
  }
}

async function scanBase(base: Table, listing: ShardListing, s: Search, columns: TextColumn[], hits: Hits, inTail: ReadonlySet<string>): Promise<void> {
  for await (const b of stream(base, scanWhere(s, columns), [...ROW_COLUMNS, ...columns])) {
    const rows = new RowReader(b, columns);
    for (let r = 0; r < b.numRows && !hits.full; r++) consider(rows, r, rows.eventId.get(r)!, columns, s, listing, hits, inTail);
    releaseBatch(b);
    if (hits.full) return;
  }
}

/** A base row: a hit unless its event was met already (in the tail, or another column), is deleted, or does not match. */
function consider(rows: RowReader, r: number, id: string, columns: readonly TextColumn[], s: Search, listing: ShardListing, hits: Hits, inTail: ReadonlySet<string>): void {
  if (inTail.has(id) || hits.byEvent.has(id)) return;
  if (rows.seq.get(r)! <= deletedThrough(listing.tombstones, rows.itemId.get(r)!)) return;
  const h = rows.hit(r, columns, s.words);
  if (h) hits.byEvent.set(id, h);
}
