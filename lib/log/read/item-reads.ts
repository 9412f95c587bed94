/**
 * Reads of part of an item that do not fold the whole item (docs/api.md): selected fields (by
 * name or prefix) and the latest events. Each is one consistent read (LogReader.read) whose
 * Lance filters name the item and the fields or seqs wanted, so the value columns of other
 * fields and older events are never read. Blob values up to a size the caller names come back
 * inline (the bytes, checksum verified), larger ones as `$blobRef` like fold.
 */
import { isWellFormed, verifyBlob } from '../../codec.ts';
import { InvalidInputError, NotFoundError, UnavailableError } from '../../errors.ts';
import { dedupe, foldItem, trajectory } from '../../fold.ts';
import { LIGHT_COLUMNS } from '../../schema.ts';
import type { BlobRef, EventRow, ItemFields, LatestEventsQuery, FieldsQuery, ReadEvent, ReadValue } from '../../types.ts';
import { EVENT_TYPES } from '../../types.ts';
import type { LogReader, ShardListing } from './reader.ts';
import { sqlIn, sqlString } from '../tables.ts';

/** Largest `inlineBytes` a read accepts: inline values are for small state, blobs stay refs. */
export const MAX_INLINE_BYTES = 4 * 1024 * 1024;
/** Most events one `latestEvents` call returns. */
export const MAX_LATEST_EVENTS = 10_000;

export interface ItemReadContext {
  reader: LogReader;
}

/** An item id a read may name: non-empty and well-formed (see checkWellFormed). */
export function checkItemId(itemId: unknown): string {
  if (typeof itemId !== 'string' || itemId === '') throw new InvalidInputError('itemId must be a non-empty string', { field: 'itemId' });
  checkWellFormed(itemId, 'itemId');
  return itemId;
}

/**
 * A string that goes into a Lance filter and is also compared in JS (ItemFilter.test) must be
 * well-formed: Lance gets a lone surrogate as U+FFFD, so `names: ['\uD800']` would select the
 * field named '\uFFFD' in the base but nothing in a shard, and `prefix: '\uD83D'` the fields
 * starting with '\uFFFD' in the base but those starting with an emoji in a shard. No stored id or
 * field name holds one (lib/batch.ts), so nothing readable is lost.
 */
function checkWellFormed(s: string, field: string): void {
  if (!isWellFormed(s)) throw new InvalidInputError(`${field} must be valid Unicode (it has a lone UTF-16 surrogate): ${JSON.stringify(s)}`, { field });
}

function checkInline(n: unknown): number {
  if (n === undefined) return 0;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0 || n > MAX_INLINE_BYTES) {
    throw new InvalidInputError(`inlineBytes must be an integer from 0 to ${MAX_INLINE_BYTES}, got ${JSON.stringify(n)}`, { field: 'inlineBytes' });
  }
  return n;
}

function fieldFilter(q: FieldsQuery): string | null {
  const parts: string[] = [];
  if (q.names !== undefined) {
    if (!Array.isArray(q.names) || q.names.some((n) => typeof n !== 'string' || n === '')) {
      throw new InvalidInputError('names must be an array of non-empty strings', { field: 'names' });
    }
    for (const n of q.names) checkWellFormed(n, 'names');
    if (q.names.length > 0) parts.push(sqlIn('field_name', q.names));
  }
  if (q.prefix !== undefined) {
    if (typeof q.prefix !== 'string' || q.prefix === '') throw new InvalidInputError('prefix must be a non-empty string', { field: 'prefix' });
    checkWellFormed(q.prefix, 'prefix');
    parts.push(`starts_with(field_name, ${sqlString(q.prefix)})`);
  }
  if (q.names !== undefined && q.names.length === 0 && q.prefix === undefined) return 'false';
  return parts.length === 0 ? null : `(${parts.join(' OR ')})`;
}

/** The rows of one item a read wants: the Lance filter, and the same condition over rows. */
interface ItemFilter {
  sql: string;
  /** The columns `test` reads. */
  columns: readonly string[];
  test: (row: EventRow) => boolean;
}

/** One item's rows matching `f`: the base queried, its unmerged shards read by offset (ItemScope). */
function scanItem(ctx: ItemReadContext, listing: ShardListing, itemId: string, f: ItemFilter, columns: readonly string[]): Promise<EventRow[]> {
  return ctx.reader.scanListing(listing, f.sql, columns, undefined, { scope: { items: [itemId], keep: { columns: f.columns, test: f.test } } });
}

/** fieldFilter(q) over a field name: in `names`, or starting with `prefix`; neither given: all. */
function fieldTest(q: FieldsQuery): (name: string | null) => boolean {
  if (q.names === undefined && q.prefix === undefined) return () => true;
  const names = new Set(q.names ?? []);
  const prefix = q.prefix;
  return (n) => n !== null && (names.has(n) || (prefix !== undefined && n.startsWith(prefix)));
}

/**
 * The item's fields named in `q` (all fields when neither `names` nor `prefix` is given), folded
 * from their own events only. NotFoundError when the item does not exist.
 */
export async function readFields(ctx: ItemReadContext, itemId: string, q: FieldsQuery = {}): Promise<ItemFields> {
  checkItemId(itemId);
  const inline = checkInline(q.inlineBytes);
  const which = fieldFilter(q);
  const fieldEvents = `event_type IN ('FIELD_SET', 'FIELD_APPEND')${which ? ` AND ${which}` : ''}`;
  const wantField = fieldTest(q);
  // The creation comes along so that one read tells a missing item from a missing field.
  const filter: ItemFilter = {
    sql: `item_id = ${sqlString(itemId)} AND (event_type = 'ITEM_CREATED' OR (${fieldEvents}))`,
    columns: ['item_id', 'event_type', 'field_name'],
    test: (r) => r.item_id === itemId && (r.event_type === 'ITEM_CREATED' || ((r.event_type === 'FIELD_SET' || r.event_type === 'FIELD_APPEND') && wantField(r.field_name))),
  };
  return ctx.reader.read(async (listing) => {
    const rows = await scanItem(ctx, listing, itemId, filter, LIGHT_COLUMNS);
    if (!rows.some((r) => r.event_type === 'ITEM_CREATED')) throw new NotFoundError(`item ${JSON.stringify(itemId)} not found`);
    const state = foldItem(itemId, rows);
    const fields: Record<string, ReadValue> = state.fields;
    if (inline > 0) await inlineValues(ctx, listing, itemId, fields, inline);
    return { itemId, rootItemId: state.rootItemId, parentItemId: state.parentItemId, fields };
  }, undefined, 'scan', itemId);
}

/**
 * The item's latest `limit` events (of `eventTypes`, below `beforeSeq` when given), oldest
 * first. Two queries: the seqs alone (two narrow columns), then the events at or above the
 * `limit`-th newest seq. NotFoundError when the item does not exist.
 */
export async function readLatestEvents(ctx: ItemReadContext, itemId: string, q: LatestEventsQuery): Promise<ReadEvent[]> {
  checkItemId(itemId);
  const inline = checkInline(q.inlineBytes);
  if (!Number.isSafeInteger(q.limit) || q.limit < 1 || q.limit > MAX_LATEST_EVENTS) {
    throw new InvalidInputError(`limit must be an integer from 1 to ${MAX_LATEST_EVENTS}, got ${JSON.stringify(q.limit)}`, { field: 'limit' });
  }
  if (q.beforeSeq !== undefined && (!Number.isSafeInteger(q.beforeSeq) || q.beforeSeq < 1)) {
    throw new InvalidInputError(`beforeSeq must be a positive integer, got ${JSON.stringify(q.beforeSeq)}`, { field: 'beforeSeq' });
  }
  const types = q.eventTypes;
  if (types !== undefined && (!Array.isArray(types) || types.length === 0 || types.some((t) => !EVENT_TYPES.includes(t)))) {
    throw new InvalidInputError(`eventTypes must be a non-empty array of ${EVENT_TYPES.join(', ')}`, { field: 'eventTypes' });
  }
  const item = `item_id = ${sqlString(itemId)}`;
  const beforeSeq = q.beforeSeq;
  const narrow: ItemFilter = {
    sql: [item, ...(types ? [sqlIn('event_type', types)] : []), ...(beforeSeq !== undefined ? [`item_seq < ${beforeSeq}`] : [])].join(' AND '),
    columns: ['item_id', 'event_type', 'item_seq'],
    test: (r) => r.item_id === itemId && (!types || types.includes(r.event_type)) && (beforeSeq === undefined || r.item_seq < beforeSeq),
  };
  const created: ItemFilter = {
    sql: `${item} AND event_type = 'ITEM_CREATED'`,
    columns: ['item_id', 'event_type'],
    test: (r) => r.item_id === itemId && r.event_type === 'ITEM_CREATED',
  };
  return ctx.reader.read(async (listing) => {
    const seqs = await scanItem(ctx, listing, itemId, narrow, ['event_id', 'item_id', 'item_seq']);
    if (seqs.length === 0) {
      if ((await scanItem(ctx, listing, itemId, created, ['event_id', 'item_id', 'item_seq'])).length === 0) throw new NotFoundError(`item ${JSON.stringify(itemId)} not found`);
      return [];
    }
    const kept = dedupe(seqs);
    const from = kept[Math.max(0, kept.length - q.limit)]!.item_seq;
    const tail: ItemFilter = { sql: `${narrow.sql} AND item_seq >= ${from}`, columns: narrow.columns, test: (r) => narrow.test(r) && r.item_seq >= from };
    const rows = await scanItem(ctx, listing, itemId, tail, LIGHT_COLUMNS);
    const events: ReadEvent[] = trajectory(rows).slice(-q.limit);
    if (inline > 0) {
      const wanted = events.filter((e) => e.valueKind === 'blob' && blobRefOf(e.value)!.size <= inline);
      const bytes = await loadInline(ctx, listing, itemId, wanted.map((e) => e.eventId));
      for (const e of wanted) e.value = bytes.get(e.eventId)!;
    }
    return events;
  }, undefined, 'scan', itemId);
}

function blobRefOf(v: unknown): BlobRef['$blobRef'] | null {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) return null;
  const ref = (v as Partial<BlobRef>).$blobRef;
  return ref && typeof ref.eventId === 'string' ? ref : null;
}

/** Replace blob refs of at most `max` bytes (whole values, or elements of appended lists) by their bytes. */
async function inlineValues(ctx: ItemReadContext, listing: ShardListing, itemId: string, fields: Record<string, ReadValue>, max: number): Promise<void> {
  const ids: string[] = [];
  const small = (v: unknown) => {
    const ref = blobRefOf(v);
    return ref !== null && ref.size <= max ? ref.eventId : null;
  };
  for (const v of Object.values(fields)) {
    for (const x of Array.isArray(v) ? v : [v]) {
      const id = small(x);
      if (id) ids.push(id);
    }
  }
  if (ids.length === 0) return;
  const bytes = await loadInline(ctx, listing, itemId, ids);
  const swap = (x: ReadValue): ReadValue => {
    const id = small(x);
    return id ? bytes.get(id)! : x;
  };
  for (const [k, v] of Object.entries(fields)) fields[k] = Array.isArray(v) ? v.map(swap) : swap(v);
}

/** The verified bytes of the given blob events of one item: one query per table, blob column of those rows only. */
async function loadInline(ctx: ItemReadContext, listing: ShardListing, itemId: string, eventIds: readonly string[]): Promise<Map<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  if (eventIds.length === 0) return out;
  const ids = new Set(eventIds);
  const filter: ItemFilter = {
    sql: `item_id = ${sqlString(itemId)} AND ${sqlIn('event_id', [...ids])}`,
    columns: ['item_id', 'event_id'],
    test: (r) => r.item_id === itemId && ids.has(r.event_id),
  };
  const rows = await scanItem(ctx, listing, itemId, filter, ['event_id', 'item_id', 'item_seq', 'value_blob', 'payload_size', 'payload_checksum']);
  for (const r of rows) {
    if (out.has(r.event_id) || r.value_blob === null) continue;
    verifyBlob(r.value_blob, r.payload_checksum ?? '', r.payload_size, `blob of event ${r.event_id}`);
    out.set(r.event_id, r.value_blob);
  }
  // The fold just named these events: a row not found moved under the read (read() starts over).
  for (const id of eventIds) if (!out.has(id)) throw new UnavailableError(`the blob of event ${id} moved while item ${JSON.stringify(itemId)} was read`);
  return out;
}

