/**
 * `exportItems(log)`: the final state of each item (or each finished one) as a dataset, one row
 * per item: id, root/parent ids, status, attempts and the chosen fields, as JSON Lines or Parquet.
 *
 * Bounded memory (the log may hold millions of events): a first pass over four light columns
 * counts the events, samples their item ids and learns each field's value kinds; the log is then
 * read in item-id ranges of about `chunkEvents` events each (one consistent streaming read per
 * range, rows of other fields filtered out by Lance), every item of a range folded with fold's
 * own semantics (lib/fold.ts) and written out before the next range is read. An item's events
 * all fall in one range, so each item is folded from all of them. `where` (lib/select/) is
 * judged on each folded item, after `status`: the fields it names are read with the exported
 * ones, and the query tags too when it names a tag. With `snapshot`, every read is of the state
 * that snapshot holds (lib/log/snapshot/view.ts), the same passes over it.
 */
import type * as arrow from 'apache-arrow';
import { InvalidInputError } from '../errors.ts';
import { foldItem } from '../fold.ts';
import type { CheckpointLog } from '../api.ts';
import { readsOf } from '../log/reads.ts';
import type { EventSource } from '../log/read/source.ts';
import type { EventVisitor } from '../log/read/stream.ts';
import { sqlIn, sqlString } from '../log/tables.ts';
import { LIGHT_COLUMNS, rowsFromArrow } from '../schema.ts';
import { checkSnapshotName } from '../log/snapshot/record.ts';
import { checkWhere } from '../select/check.ts';
import { matches } from '../select/evaluate.ts';
import { needsOf, subjectOfState, tagsOfRows } from '../select/subject.ts';
import type { Where } from '../select/where.ts';
import type { Env } from '../storage/location.ts';
import type { BlobRef, EventRow, OutputValue } from '../types.ts';
import { fieldColumns, type FieldColumn } from './columns.ts';
import { EXPORT_FORMATS, EXPORT_STATUSES, type ExportFormat, type ExportStatus } from './formats.ts';
import { formatTarget, openBlobFolder, parseTarget, writeTarget, type BlobFolder } from './output.ts';
import { PLAN_COLUMNS, PlanVisitor, byteCompare, cutPoints } from './plan.ts';
import { JsonlSink, ParquetSink, type ExportRow, type Sink } from './sinks.ts';

export { EXPORT_FORMATS, EXPORT_STATUSES, type ExportFormat, type ExportStatus } from './formats.ts';

export interface ExportOptions {
  /** A local path or `s3://bucket/key`. */
  out: string;
  /** Default: from `out`'s extension (`.parquet`), else jsonl. */
  format?: ExportFormat;
  /** Which items: completed (default), filtered, or any (every item, whatever its status). */
  status?: ExportStatus;
  /** Of those, only the items this filter selects (docs/usage.md, "Selecting items"). Text: `parseWhere`. */
  where?: Where;
  /** Field names to export (default: every field the log holds, by name). */
  fields?: readonly string[];
  /**
   * Write blob fields as files into this folder (local or s3:// prefix); rows then hold their
   * paths, relative to the output file's folder (absolute when one is local and the other on S3,
   * or they are in different buckets).
   */
  blobs?: string;
  /**
   * Export the state snapshot `snapshot` holds (`log.snapshot(name)`, docs/usage.md "Snapshots")
   * instead of the log's current one: byte for byte the export taken when it was made.
   */
  snapshot?: string;
  /** Events per item-id range read at once (default 50,000): the memory knob. */
  chunkEvents?: number;
  env?: Env;
}

export interface ExportResult {
  out: string;
  format: ExportFormat;
  rows: number;
  columns: string[];
  blobFiles: number;
  /** Item-id ranges read (one streaming read each). */
  ranges: number;
}

export const DEFAULT_CHUNK_EVENTS = 50_000;

/** The columns fold needs, without the long failure texts (an export does not carry them). */
const FOLD_COLUMNS = LIGHT_COLUMNS.filter((c) => c !== 'traceback' && c !== 'error_dump' && c !== 'query_tags_json');

function check(o: ExportOptions): { format: ExportFormat; status: ExportStatus; fields: string[] | null; chunk: number; where: Where | null } {
  if (!o || typeof o !== 'object') throw new InvalidInputError('export options are required', { field: 'options' });
  const format = o.format ?? (typeof o.out === 'string' && /\.parquet$/i.test(o.out) ? 'parquet' : 'jsonl');
  if (!EXPORT_FORMATS.includes(format)) throw new InvalidInputError(`must be one of ${EXPORT_FORMATS.join(', ')}, got ${JSON.stringify(format)}`, { field: 'format' });
  const status = o.status ?? 'completed';
  if (!EXPORT_STATUSES.includes(status)) throw new InvalidInputError(`must be one of ${EXPORT_STATUSES.join(', ')}, got ${JSON.stringify(status)}`, { field: 'status' });
  let fields: string[] | null = null;
  if (o.fields !== undefined) {
    if (!Array.isArray(o.fields) || o.fields.length === 0) throw new InvalidInputError('must be a non-empty list of field names', { field: 'fields' });
    for (const f of o.fields) if (typeof f !== 'string' || f === '') throw new InvalidInputError(`field names must be non-empty strings, got ${JSON.stringify(f)}`, { field: 'fields' });
    const dup = o.fields.find((f, i) => o.fields!.indexOf(f) !== i);
    if (dup !== undefined) throw new InvalidInputError(`field ${JSON.stringify(dup)} is named twice`, { field: 'fields' });
    fields = [...o.fields];
  }
  const chunk = o.chunkEvents ?? DEFAULT_CHUNK_EVENTS;
  if (!Number.isSafeInteger(chunk) || chunk < 1) throw new InvalidInputError(`must be a positive integer, got ${JSON.stringify(o.chunkEvents)}`, { field: 'chunkEvents' });
  const where = o.where === undefined ? null : checkWhere(o.where, 'where');
  if (o.snapshot !== undefined) checkSnapshotName(o.snapshot, 'snapshot');
  return { format, status, fields, chunk, where };
}

/** Rows of one item-id range, grouped by item, duplicate copies dropped. */
class RangeVisitor implements EventVisitor<Map<string, EventRow[]>> {
  private readonly byItem = new Map<string, EventRow[]>();

  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    // rowsFromArrow reads only numRows and getChild; LanceDB's batches may come from another
    // copy of apache-arrow, so they are not wrapped in a Table of ours.
    const rows = rowsFromArrow({ numRows: b.numRows, getChild: (name: string) => b.getChild(name) } as unknown as arrow.Table);
    for (let r = 0; r < rows.length; r++) {
      if (!keep(r)) continue;
      const row = rows[r]!;
      let list = this.byItem.get(row.item_id);
      if (!list) this.byItem.set(row.item_id, (list = []));
      list.push(row);
    }
  }

  done(): Map<string, EventRow[]> {
    return this.byItem;
  }
}

function rangeFilter(lo: string | null, hi: string | null): string | null {
  const parts: string[] = [];
  if (lo !== null) parts.push(`item_id >= ${sqlString(lo)}`);
  if (hi !== null) parts.push(`item_id < ${sqlString(hi)}`);
  return parts.length ? parts.join(' AND ') : null;
}

function blobRefOf(v: OutputValue | undefined): BlobRef['$blobRef'] | null {
  if (v && typeof v === 'object' && !Array.isArray(v) && '$blobRef' in v) return (v as BlobRef).$blobRef;
  return null;
}

/** A file name part that is safe on every file system and S3, and tells items apart. */
function safePart(s: string): string {
  return encodeURIComponent(s).replace(/\*/g, '%2A').replace(/^\.\.?$/, (m) => m.replace(/\./g, '%2E'));
}

export async function exportItems(log: CheckpointLog, o: ExportOptions): Promise<ExportResult> {
  const reads = readsOf(log);
  const { format, status, fields: chosen, chunk, where } = check(o);
  const needs = where ? needsOf(where) : { tags: [], fields: [] };
  const env = o.env ?? process.env;
  // Every argument is checked before the first read or write.
  const target = parseTarget(o.out, 'out');
  const blobFolder: BlobFolder | null = o.blobs !== undefined ? openBlobFolder(o.blobs, env, target) : null;
  try {
    const src: EventSource = o.snapshot === undefined ? reads : await reads.openSnapshot(o.snapshot);
    const scan = src.scanEvents.bind(src);
    const plan = await scan({ columns: PLAN_COLUMNS }, () => new PlanVisitor());
    const names = chosen ?? [...plan.fields.keys()].sort(byteCompare);
    const cols: FieldColumn[] = fieldColumns(names, plan.fields, blobFolder !== null);
    const cuts = cutPoints(plan.sample, Math.ceil(plan.events / chunk));
    // The filter's fields are read too (not exported unless chosen).
    const read = chosen ? [...new Set([...chosen, ...needs.fields])] : null;
    const fieldFilter = read ? `(field_name IS NULL OR ${sqlIn('field_name', read)})` : null;
    const columns = needs.tags.length > 0 ? [...FOLD_COLUMNS, 'query_tags_json' as const] : FOLD_COLUMNS;
    let rows = 0;
    let blobFiles = 0;
    await writeTarget(target, env, async (file) => {
      const sink: Sink = format === 'parquet' ? new ParquetSink(file, cols) : new JsonlSink(file, cols);
      try {
        for (let i = 0; i <= cuts.length; i++) {
          const range = rangeFilter(i === 0 ? null : cuts[i - 1]!, i === cuts.length ? null : cuts[i]!);
          const filter = [range, fieldFilter].filter((x) => x !== null).join(' AND ') || null;
          const byItem = await scan({ columns, filter }, () => new RangeVisitor());
          const ids = [...byItem.keys()].sort(byteCompare);
          for (const id of ids) {
            const itemRows = byItem.get(id)!;
            const state = foldItem(id, itemRows);
            byItem.delete(id);
            if (status !== 'any' && state.status !== status) continue;
            if (where && !matches(where, subjectOfState(state, needs.tags.length > 0 ? tagsOfRows(itemRows, needs.tags) : undefined))) continue;
            const values: ExportRow['fields'] = {};
            for (const c of cols) {
              let v: OutputValue | undefined = Object.hasOwn(state.fields, c.name) ? state.fields[c.name] : undefined;
              const ref = c.blob ? blobRefOf(v) : null;
              if (ref && blobFolder) {
                const rel = `${safePart(id)}/${safePart(c.name)}`;
                await blobFolder.put(rel, await src.loadBlob(ref.eventId));
                blobFiles++;
                v = blobFolder.ref(rel);
              }
              values[c.name] = v;
            }
            await sink.write({ itemId: id, rootItemId: state.rootItemId, parentItemId: state.parentItemId, status: state.status, attempts: state.attempts, fields: values });
            rows++;
          }
        }
      } finally {
        await sink.close();
      }
    });
    return { out: formatTarget(target), format, rows, columns: ['item_id', 'root_item_id', 'parent_item_id', 'status', 'attempts', ...cols.map((c) => c.name)], blobFiles, ranges: cuts.length + 1 };
  } finally {
    blobFolder?.close();
  }
}
