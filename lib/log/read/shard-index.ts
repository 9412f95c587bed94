/**
 * Which rows of each unmerged shard generation hold which item, so that a point read takes those
 * rows instead of scanning the generation. A generation has no index, and a filtered scan visits
 * every fragment (one per commit, each at a cost), so with many live writers a fold spent most of
 * its time scanning shards that do not even hold its item (docs/design/performance.md, "Unmerged
 * shards").
 *
 * Why offsets stay true: a generation is only ever appended to (by its one writer); nothing
 * deletes, updates or compacts its rows (merges copy them out, then the whole dataset is retired).
 * So the row at offset k is the same row at every version that has more than k rows: what was
 * learned of the first N rows holds for every later version, and a read at a version with C rows
 * uses the offsets below C. Only the rows added since the last read are fetched (their item_id
 * column alone, by offset). Entries of generations that are no longer visible are dropped, so a
 * name that came back (it cannot, names are never reused, but a dropped entry only costs a
 * rebuild) would be learned from scratch.
 */
import type * as arrow from 'apache-arrow';
import { CorruptError, UnavailableError } from '../../errors.ts';
import { rowsFromArrow } from '../../schema.ts';
import type { EventRow } from '../../types.ts';
import { Utf8Column } from '../columns.ts';
import { projection, type Table } from '../tables.ts';

/** Offsets per take of item ids while learning a generation (bounds one request's size). */
const LEARN_CHUNK = 65_536;

interface Entry {
  /** Rows learned: offsets [0, rows). */
  rows: number;
  /** item_id -> runs of its offsets, as [start, end) pairs in ascending order. */
  runs: Map<string, number[]>;
  /** The learning in progress (one at a time per generation). */
  learning: Promise<void>;
}

export class ShardItemIndex {
  private readonly entries = new Map<string, Entry>();

  /**
   * The rows of `items` in generation `name` (opened as `table`, at the version the read uses),
   * with `columns`; [] without a query when the generation holds none of them.
   */
  async rowsOf(table: Table, name: string, items: readonly string[], columns: readonly string[]): Promise<EventRow[]> {
    // The row count of the version this read sees; a handle at the latest version may move on
    // before the take, which only adds rows above `count`.
    const taken = await this.take(table, name, new Set(items), columns, await table.countRows());
    return taken ? rowsFromArrow(taken) : [];
  }

  /**
   * The rows of `items` at offsets below `count` in generation `name` (opened as `table`, holding
   * at least `count` rows), with `columns`, as Arrow batches (none without a take when it holds
   * none of them).
   */
  async batchesOf(table: Table, name: string, items: ReadonlySet<string>, columns: readonly string[], count: number): Promise<arrow.RecordBatch[]> {
    return (await this.take(table, name, items, columns, count))?.batches ?? [];
  }

  /** Whether item `id` has a row below offset `count` in generation `name` (opened as `table`, holding at least `count` rows). */
  async holds(table: Table, name: string, id: string, count: number): Promise<boolean> {
    const runs = (await this.learned(table, name, count)).runs.get(id);
    return runs !== undefined && runs.length > 0 && runs[0]! < count;
  }

  /**
   * The items with a row at an offset in [from, to) of generation `name` (opened as `table`,
   * holding at least `to` rows).
   */
  async itemsIn(table: Table, name: string, from: number, to: number): Promise<Set<string>> {
    const entry = await this.learned(table, name, to);
    const out = new Set<string>();
    for (const [id, runs] of entry.runs) {
      for (let i = 0; i < runs.length; i += 2) {
        if (runs[i]! < to && runs[i + 1]! > from) {
          out.add(id);
          break;
        }
      }
    }
    return out;
  }

  /** Forget a generation (its handles were dropped, or it is no longer visible). */
  forget(name: string): void {
    this.entries.delete(name);
  }

  /** Keep only the generations in `names` (the visible ones of a listing). */
  retain(names: ReadonlySet<string>): void {
    for (const name of this.entries.keys()) if (!names.has(name)) this.entries.delete(name);
  }

  /**
   * The rows of `items` below offset `count`, taken with `columns` in offset order; null without
   * a take when there are none.
   */
  private async take(table: Table, name: string, items: ReadonlySet<string>, columns: readonly string[], count: number): Promise<arrow.Table | null> {
    const entry = await this.learned(table, name, count);
    const offsets: number[] = [];
    for (const id of items) {
      const runs = entry.runs.get(id);
      if (!runs) continue;
      for (let i = 0; i < runs.length; i += 2) for (let o = runs[i]!; o < runs[i + 1]! && o < count; o++) offsets.push(o);
    }
    if (offsets.length === 0) return null;
    offsets.sort((a, b) => a - b);
    const taken = await table.takeOffsets(offsets).select(projection(columns)).toArrow();
    // Lance returns fewer rows, without an error, for offsets past the end: the dataset shrank
    // under the read (a retired generation deleted newest manifest first): let the read start over.
    if (taken.numRows !== offsets.length) throw new UnavailableError(`shard generation ${name} returned ${taken.numRows} rows for ${offsets.length} offsets`);
    return taken;
  }

  /** The entry of generation `name`, learned up to offset `count` at least. */
  private async learned(table: Table, name: string, count: number): Promise<Entry> {
    const entry = this.entryOf(name);
    if (entry.rows < count) await this.learn(entry, table, count);
    return entry;
  }

  private entryOf(name: string): Entry {
    let entry = this.entries.get(name);
    if (!entry) {
      entry = { rows: 0, runs: new Map(), learning: Promise.resolve() };
      this.entries.set(name, entry);
    }
    return entry;
  }

  /** Learn the item ids of offsets [entry.rows, count). */
  private learn(entry: Entry, table: Table, count: number): Promise<void> {
    const next = entry.learning.then(async () => {
      while (entry.rows < count) {
        const from = entry.rows;
        const to = Math.min(count, from + LEARN_CHUNK);
        const ids = await table.takeOffsets(Array.from({ length: to - from }, (_, i) => from + i)).select(projection(['item_id'])).toArrow();
        if (ids.numRows !== to - from) throw new UnavailableError(`shard generation returned ${ids.numRows} rows for ${to - from} offsets`);
        let o = from;
        for (const batch of ids.batches) {
          const col = new Utf8Column(batch, 'item_id');
          for (let i = 0; i < batch.numRows; i++, o++) {
            const id = col.get(i);
            if (id === null) throw new CorruptError(`shard generation row ${o} has no item_id`);
            let runs = entry.runs.get(id);
            if (!runs) entry.runs.set(id, (runs = []));
            if (runs.length > 0 && runs[runs.length - 1] === o) runs[runs.length - 1] = o + 1;
            else runs.push(o, o + 1);
          }
        }
        entry.rows = to;
      }
    });
    // A failed learning leaves the entry at what it had learned; the next read tries again.
    entry.learning = next.catch(() => undefined);
    return next;
  }
}
