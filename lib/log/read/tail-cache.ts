/**
 * Unmerged shard generations read whole (the tail of an unfiltered scan: listings, reports), kept
 * per generation and learned incrementally, so a process listing a live log again reads only the
 * rows committed since. Reading a generation costs per fragment and column (one fragment per
 * commit): with many live writers that read was many times the listing's own work
 * (docs/design/performance.md, "The unmerged tail of a listing").
 *
 * Sound for the reason the shard item index is (lib/log/read/shard-index.ts): a generation is only
 * appended to while visible, so offset k is the same row at every version with more than k rows;
 * a read at a version with C rows uses the first C learned rows. Entries of generations no
 * longer visible, or whose read was unsettled, are dropped by the reader.
 *
 * The batches are shared by every read of the process: they are never released (the stream
 * releases only batches it read itself) and must not be changed.
 */
import type * as arrow from 'apache-arrow';
import { UnavailableError } from '../../errors.ts';
import { projection, type Table } from '../tables.ts';

/** Offsets per take (bounds one request's size). */
const TAKE_CHUNK = 65_536;

interface Entry {
  /** The columns learned (a read asking for others starts the entry over). */
  columns: string;
  /** Rows learned: offsets [0, rows), in `batches` in order. */
  rows: number;
  batches: arrow.RecordBatch[];
  /** The learning in progress (one at a time per generation). */
  learning: Promise<void>;
}

export class TailCache {
  private readonly entries = new Map<string, Entry>();

  /**
   * Every row of generation `name` (opened as `table` at the version the read uses), with
   * `columns`, and how many (the count the read saw). With `keep` false (one-off passes: exports,
   * reports) nothing is kept or reused.
   */
  async rows(table: Table, name: string, columns: readonly string[], keep = true): Promise<{ batches: arrow.RecordBatch[]; count: number }> {
    // The row count of the version this read sees; a handle at the latest version may move on
    // before the take, which only adds rows above `count`.
    const count = await table.countRows();
    const key = [...columns].sort().join(',');
    let entry = keep ? this.entries.get(name) : undefined;
    if (!entry || entry.columns !== key) {
      entry = { columns: key, rows: 0, batches: [], learning: Promise.resolve() };
      if (keep) this.entries.set(name, entry);
    }
    if (entry.rows < count) await this.learn(entry, table, name, columns, count);
    return { batches: prefixOf(entry.batches, count), count };
  }

  forget(name: string): void {
    this.entries.delete(name);
  }

  clear(): void {
    this.entries.clear();
  }

  /** Keep only the generations in `names` (the visible ones of a listing). */
  retain(names: ReadonlySet<string>): void {
    for (const name of this.entries.keys()) if (!names.has(name)) this.entries.delete(name);
  }

  private learn(entry: Entry, table: Table, name: string, columns: readonly string[], count: number): Promise<void> {
    const next = entry.learning.then(async () => {
      while (entry.rows < count) {
        const from = entry.rows;
        const to = Math.min(count, from + TAKE_CHUNK);
        const got = await table.takeOffsets(Array.from({ length: to - from }, (_, i) => from + i)).select(projection(columns)).toArrow();
        // Lance returns fewer rows, without an error, past the end: the generation is being deleted.
        if (got.numRows !== to - from) throw new UnavailableError(`shard generation ${name} returned ${got.numRows} rows for ${to - from} offsets`);
        entry.batches.push(...got.batches);
        entry.rows = to;
      }
    });
    // A failed learning leaves the entry at what it had learned; the next read tries again.
    entry.learning = next.catch(() => undefined);
    return next;
  }
}

/** The batches holding rows [0, count) (the last one sliced). */
function prefixOf(batches: readonly arrow.RecordBatch[], count: number): arrow.RecordBatch[] {
  const out: arrow.RecordBatch[] = [];
  let rows = 0;
  for (const b of batches) {
    if (rows >= count) break;
    out.push(rows + b.numRows <= count ? b : b.slice(0, count - rows));
    rows += b.numRows;
  }
  return out;
}
