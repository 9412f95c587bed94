/**
 * The writer's memory of its confirmed commits (docs/design/invariants.md, "Acks"): the light rows
 * of its own unmerged generations, the commit being made (the landing mark), and the merge
 * copies. Owned by ShardWriter (lib/log/write/writer.ts), which fills it only with confirmed
 * commits and clears it whenever an epoch ends.
 */
import type { Table as ArrowTable } from 'apache-arrow';
import { guard } from '../../guards.ts';
import type { EventRow } from '../../types.ts';
import type { Table } from '../tables.ts';
import { mergeData } from './lance-add.ts';

/**
 * Bytes of a generation's first commits (as encoded) its merge copy keeps as rows; later commits
 * are kept as their Arrow tables. A merge encodes rows as one batch, and tables per batch (~0.2 ms
 * each for 32 columns): 64 commits of 10 rows took 3.8 ms as rows, 13.7 ms as tables, on the
 * event loop beside the acks; a 46 MB generation ~0.6 s as rows, ~0.25 s as tables.
 */
const COPY_ROWS_MAX_BYTES = 1024 * 1024;

/** An own generation's light rows by item, in commit order (OwnMemory `ownRows`). */
export type OwnGeneration = Map<string, EventRow[]>;

export class OwnMemory {
  /**
   * Light rows this writer committed to its own not-yet-merged generations (confirmed commits),
   * by generation, then item. It is their only writer, so sequencing reads them from here
   * instead of from storage (whose cost grows with every commit until the merge), and so do
   * this process's point reads (LogReader `ownItemRows`).
   */
  readonly ownRows = new Map<string, OwnGeneration>();
  /**
   * The commit being made: its generation and items, from just before its add until its rows
   * are in ownRows (or its epoch ends). Once it has landed any process's storage read shows it,
   * so this process's reads of those items in that generation go to storage too until then
   * (from memory they showed less than a read that had ended before them, I3).
   */
  landing: { gen: string; items: ReadonlySet<string> } | null = null;
  /**
   * Merge copies: what each confirmed commit to an own generation wrote (every column, blobs
   * included), by generation (null: past copyMaxBytes(), read back instead). Its only writer,
   * whose every commit either was confirmed or ended the epoch (and with it the generation's
   * merge by this writer), knows its rows: reading them back cost a file open per commit, and
   * decoding and encoding them again on the event loop (a 46 MB generation: ~2 s). The first
   * commits are kept as rows while they take at most COPY_ROWS_MAX_BYTES, the rest as the Arrow
   * tables they were encoded from (columnar: the retained heap is about what they wrote); the
   * merge hands them to Lance encoded once (lib/log/write/lance-add.ts `mergeData`). Kept and dropped
   * with ownRows.
   */
  readonly mergeCopies = new Map<string, { rows: EventRow[]; tables: ArrowTable[]; count: number; bytes: number } | null>();
  /** Bytes of all merge copies together: at most copyMaxBytes() (failing merges queue generations). */
  private copyBytes = 0;

  constructor(private readonly opts: { mergeEveryBytes: number }) {}

  /**
   * The light rows of `items` in own generation `gen` from the commits confirmed so far (shared:
   * never change them), or null when `gen` is not an own unmerged generation with a confirmed
   * commit. Every ack of a batch written to `gen` comes after its rows are here.
   */
  itemRows(gen: string, items: readonly string[]): EventRow[] | null {
    const mine = this.ownRows.get(gen);
    if (!mine) return null;
    const landing = this.landing;
    if (landing?.gen === gen && items.some((id) => landing.items.has(id))) return null;
    const out: EventRow[] = [];
    for (const id of new Set(items)) for (const r of mine.get(id) ?? []) out.push(r);
    return out;
  }

  /** Keep a confirmed commit's light rows, and its merge copy (`copy`: the table it was encoded from). */
  keep(gen: string, rows: EventRow[], copy: ArrowTable | null, bytes: number): void {
    const mine = this.ownRows.get(gen) ?? new Map<string, EventRow[]>();
    for (const r of rows) {
      const l = mine.get(r.item_id);
      if (l) l.push({ ...r, value_blob: null });
      else mine.set(r.item_id, [{ ...r, value_blob: null }]);
    }
    this.ownRows.set(gen, mine);
    if (copy) this.keepCopy(gen, rows, copy, bytes);
  }

  /** Forget everything (the epoch ended: a takeover decides what of the generations is visible). */
  clear(): void {
    this.ownRows.clear();
    this.landing = null;
    this.mergeCopies.clear();
    this.copyBytes = 0;
  }

  /** The generation is merged into the base: its rows and copy are no longer needed. */
  merged(gen: string): void {
    this.ownRows.delete(gen);
    this.dropCopy(gen);
  }

  /** Add a confirmed commit's rows to its generation's merge copy (null: none kept for it). */
  private keepCopy(gen: string, rows: EventRow[], table: ArrowTable, bytes: number): void {
    const copy = this.mergeCopies.has(gen) ? this.mergeCopies.get(gen)! : { rows: [], tables: [], count: 0, bytes: 0 };
    if (copy === null || this.copyBytes + bytes > this.copyMaxBytes()) {
      this.dropCopy(gen);
      this.mergeCopies.set(gen, null);
      return;
    }
    // The first commits' rows while they are small (one batch at the merge), then the tables.
    if (copy.tables.length === 0 && copy.bytes + bytes <= COPY_ROWS_MAX_BYTES) copy.rows.push(...rows);
    else copy.tables.push(table);
    copy.count += rows.length;
    copy.bytes += bytes;
    this.copyBytes += bytes;
    this.mergeCopies.set(gen, copy);
  }

  /** Bytes all merge copies together may hold: two generations' worth (one merging, one filling). */
  private copyMaxBytes(): number {
    return 2 * this.opts.mergeEveryBytes;
  }

  private dropCopy(gen: string): void {
    this.copyBytes -= this.mergeCopies.get(gen)?.bytes ?? 0;
    this.mergeCopies.delete(gen);
  }

  /**
   * The frozen generation's rows from its merge copy, when the copy holds as many rows as the
   * generation has at the version merged (the handle's own count: no read); else undefined and
   * the merge reads them. A mismatch cannot happen while every commit is confirmed or ends the
   * epoch; the count is a cheap check of that.
   */
  async copyOf(name: string, table: Table): Promise<{ data: unknown; rows: number } | undefined> {
    const copy = this.mergeCopies.get(name);
    if (!copy || copy.count !== (await table.countRows())) return undefined;
    return { data: mergeData(copy.rows, copy.tables), rows: copy.count };
  }
}

/**
 * The own rows of generations the read's listing still shows. A generation missing from it is
 * retired (its merge finished before the listing): its rows are in the base, read after the
 * listing, under the same listing's tombstones; the in-memory copy (dropped only when the merge
 * call returns) could outlive a purge of what it holds.
 */
export function ownVisible(own: ReadonlyArray<[string, OwnGeneration]>, visible: ReadonlySet<string>): Array<[string, OwnGeneration]> {
  return own.filter(([name]) => visible.has(name) || !guard('own-rows-listed-only'));
}
