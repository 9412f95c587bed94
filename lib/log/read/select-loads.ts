/**
 * What a filter (lib/select/) needs beyond an item's summary, read for a set of items: the
 * query tags it names (merged in seq order, as `items({tags})` merges them) and the fields it
 * names (folded by fold's own code, lib/fold.ts). One streaming read each; Lance gets the field
 * names or tag keys, and the item ids while they fit one `IN (...)`. Only those rows are read:
 * the tag column of rows that mention a named key, the value columns of the named fields.
 */
import type * as arrow from 'apache-arrow';
import { foldItem } from '../../fold.ts';
import { rowsFromArrow } from '../../schema.ts';
import { tagsOfRows } from '../../select/subject.ts';
import type { EventRow, JsonValue, OutputValue } from '../../types.ts';
import { Int64Column, Utf8Column } from '../columns.ts';
import { sqlIn, sqlString } from '../tables.ts';
import type { EventVisitor, ScanOptions } from './stream.ts';

export interface LoadSource {
  scanEvents<T>(o: ScanOptions, make: () => EventVisitor<T>): Promise<T>;
}

/** Most ids put in one `IN (...)` filter; beyond it every item's rows are read and the ids matched here. */
export const MAX_IN = 1000;

/** The columns fold needs to fold fields: no failure texts, tags or blob bytes. */
const FIELD_COLUMNS = [
  'event_id',
  'item_id',
  'item_seq',
  'event_type',
  'writer_epoch',
  'attempt',
  'field_name',
  'field_type',
  'codec_version',
  'value_kind',
  'value_i64',
  'value_f64',
  'value_bool',
  'value_str',
  'value_json',
  'payload_size',
  'payload_checksum',
] as const;

/** `s` as a LIKE pattern matching itself (escape character `\`). */
function likeLiteral(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** Rows whose canonical query tags JSON mentions one of `keys` (a superset of those holding them). */
export function tagMentionFilter(keys: Iterable<string>): string {
  const mention = [...keys].map((k) => `query_tags_json LIKE ${sqlString(`%${likeLiteral(JSON.stringify(k))}:%`)} ESCAPE '\\'`);
  return `query_tags_json IS NOT NULL AND (${mention.join(' OR ')})`;
}

function idFilter(ids: readonly string[]): string | null {
  return ids.length <= MAX_IN ? sqlIn('item_id', ids) : null;
}

/** Feeds the rows of items in `ids` (and only those) to `take`, one run of an item's rows at a time. */
abstract class ItemsVisitor<T> implements EventVisitor<T> {
  private readonly ids: ReadonlySet<string>;
  constructor(ids: readonly string[]) {
    this.ids = new Set(ids);
  }
  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    const items = new Utf8Column(b, 'item_id');
    let wanted = false;
    let seen = -1;
    for (let r = 0; r < b.numRows; r++) {
      if (!keep(r)) continue;
      // Rows of one item come in runs: look the id up once per run.
      if (seen < 0 || !items.same(r, seen)) wanted = this.ids.has(items.get(r)!);
      seen = r;
      if (wanted) this.take(b, r);
    }
  }
  protected abstract take(b: arrow.RecordBatch, r: number): void;
  abstract done(): T;
}

type TagRow = Pick<EventRow, 'item_id' | 'item_seq' | 'query_tags_json'>;

class TagRowsVisitor extends ItemsVisitor<Map<string, TagRow[]>> {
  private readonly rows = new Map<string, TagRow[]>();
  protected take(b: arrow.RecordBatch, r: number): void {
    const row: TagRow = { item_id: new Utf8Column(b, 'item_id').get(r)!, item_seq: new Int64Column(b, 'item_seq').get(r)!, query_tags_json: new Utf8Column(b, 'query_tags_json').get(r) };
    let list = this.rows.get(row.item_id);
    if (!list) this.rows.set(row.item_id, (list = []));
    list.push(row);
  }
  done(): Map<string, TagRow[]> {
    return this.rows;
  }
}

/** The tags `names` of each item of `ids` that has one of them (items without any: absent). */
export async function loadTags(src: LoadSource, ids: readonly string[], names: readonly string[]): Promise<Map<string, Record<string, JsonValue>>> {
  const filter = [idFilter(ids), tagMentionFilter(names)].filter((x) => x !== null).join(' AND ');
  const rows = await src.scanEvents({ columns: ['item_id', 'item_seq', 'query_tags_json'], filter }, () => new TagRowsVisitor(ids));
  const out = new Map<string, Record<string, JsonValue>>();
  for (const [id, list] of rows) out.set(id, tagsOfRows(list, names));
  return out;
}

class FieldRowsVisitor extends ItemsVisitor<Map<string, EventRow[]>> {
  private readonly rows = new Map<string, EventRow[]>();
  private batchRows: { b: arrow.RecordBatch; rows: EventRow[] } | null = null;
  protected take(b: arrow.RecordBatch, r: number): void {
    // Decoded once per batch that has a wanted row; `b` is not kept past this batch.
    if (this.batchRows?.b !== b) {
      const table = { numRows: b.numRows, getChild: (name: string) => b.getChild(name) } as unknown as arrow.Table;
      this.batchRows = { b, rows: rowsFromArrow(table) };
    }
    const row = this.batchRows.rows[r]!;
    let list = this.rows.get(row.item_id);
    if (!list) this.rows.set(row.item_id, (list = []));
    list.push(row);
  }
  override batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    super.batch(b, keep);
    this.batchRows = null;
  }
  done(): Map<string, EventRow[]> {
    return this.rows;
  }
}

/** The fields `names` of each item of `ids` that has one of them, as fold shows them (items without any: absent). */
export async function loadFields(src: LoadSource, ids: readonly string[], names: readonly string[]): Promise<Map<string, Record<string, OutputValue>>> {
  const filter = [idFilter(ids), `event_type IN ('FIELD_SET', 'FIELD_APPEND')`, sqlIn('field_name', names)].filter((x) => x !== null).join(' AND ');
  const rows = await src.scanEvents({ columns: FIELD_COLUMNS, filter }, () => new FieldRowsVisitor(ids));
  const out = new Map<string, Record<string, OutputValue>>();
  // Only field events: the fold's fields are right, its status and violations are not looked at.
  for (const [id, list] of rows) out.set(id, foldItem(id, list).fields);
  return out;
}
