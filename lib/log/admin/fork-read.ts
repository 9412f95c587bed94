/**
 * What a fork reads of its source and keeps (lib/log/admin/fork.ts): every event of the forked
 * items, each once, and of those the events before each item's first event of the fork's step
 * (lib/log/admin/fork-plan.ts says which), in seq order, as Arrow record batches copied out of
 * the batches read (lib/log/gather.ts): no row becomes an object, and the fork writes the kept
 * rows from these batches.
 *
 * While reading, a batch's rows at or after the lowest seq of step k met so far are not copied
 * (most of what a fork drops); the cut is made again on what was copied once every batch is read,
 * as an item's first event of step k may come in a later batch.
 */
import type * as arrow from 'apache-arrow';
import { CorruptError, NotFoundError } from '../../errors.ts';
import { rowsFromArrow, rowsToArrow } from '../../schema.ts';
import { Int32Column, Int64Column, Utf8Column } from '../columns.ts';
import { conforms, gatherEvents } from '../gather.ts';
import type { EventVisitor } from '../read/stream.ts';
import { noEventBefore, type LineageSource, type StepRef } from './fork-plan.ts';

/** The rows copied while reading, before the final cut. */
export interface ForkRead {
  chunks: arrow.RecordBatch[];
  /** Per chunk, per row: the row's item (its position in the fork's item list) and seq. */
  items: Int32Array[];
  seqs: Float64Array[];
  /** Per item: its lowest seq of step k (Infinity: none). */
  cut: Float64Array;
  /** Per item: 1 when any of its events was read. */
  met: Uint8Array;
}

/** The visitor of a scan of every column (COLUMN_NAMES) that reads the events of `ids`. */
export function forkReader(ids: readonly string[], k: StepRef): EventVisitor<ForkRead> {
  const positions = new Map<string, number>();
  ids.forEach((id, i) => positions.set(id, i));
  const out: ForkRead = { chunks: [], items: [], seqs: [], cut: new Float64Array(ids.length).fill(Infinity), met: new Uint8Array(ids.length) };
  const stepBytes = typeof k === 'string' ? Buffer.from(k, 'utf8') : new Uint8Array(0);
  return {
    batch(b, keep) {
      const item = new Utf8Column(b, 'item_id');
      const seq = new Int64Column(b, 'item_seq');
      const index = typeof k === 'number' ? new Int64Column(b, 'step_index') : null;
      const name = typeof k === 'string' ? new Utf8Column(b, 'step_name') : null;
      // Each kept row's item position; -1: not read (a duplicate copy, or another item's).
      const pos = new Int32Array(b.numRows).fill(-1);
      let last = -1;
      for (let r = 0; r < b.numRows; r++) {
        if (!keep(r)) continue;
        // Runs of one item's events are decoded once.
        let p: number;
        if (last >= 0 && item.same(r, last)) p = pos[last]!;
        else {
          const id = item.get(r);
          if (id === null) throw new CorruptError(`column item_id is null in a stored event (row ${r} of a batch read)`);
          p = positions.get(id) ?? -1;
        }
        last = r;
        pos[r] = p;
        if (p < 0) continue;
        out.met[p] = 1;
        if (!(index ? index.get(r) === k : name!.is(r, stepBytes))) continue;
        const s = seq.get(r);
        if (s !== null && s < out.cut[p]!) out.cut[p] = s;
      }
      const only: number[] = [];
      for (let r = 0; r < b.numRows; r++) {
        const p = pos[r]!;
        if (p < 0) continue;
        const s = seq.get(r);
        // A null seq is copied: the copy refuses it (CORRUPT), as reading it into a row does.
        if (s === null || s < out.cut[p]!) only.push(r);
      }
      if (only.length === 0) return;
      const items = new Int32Array(only.length);
      const seqs = new Float64Array(only.length);
      only.forEach((r, i) => {
        items[i] = pos[r]!;
        seqs[i] = seq.get(r) ?? NaN;
      });
      out.chunks.push(copyRows(b, only));
      out.items.push(items);
      out.seqs.push(seqs);
    },
    done: () => out,
  };
}

/** Rows `only` (ascending) of `b` in a batch of their own: its buffers copied, or (another layout) its rows converted. */
function copyRows(b: arrow.RecordBatch, only: readonly number[]): arrow.RecordBatch {
  if (conforms(b)) return gatherEvents([b], new Int32Array(only.length), only, only.length);
  const rows = rowsFromArrow({ numRows: b.numRows, getChild: (name: string) => b.getChild(name) } as never, only);
  return rowsToArrow(rows).batches[0]!;
}

/** The kept events of every forked item, in the items' order and each item's seq order. */
export interface ForkCuts {
  chunks: arrow.RecordBatch[];
  /** Item i's kept events are refs start[i] .. start[i + 1] - 1: row `row[j]` of chunk `chunk[j]`. */
  start: Int32Array;
  chunk: Int32Array;
  row: Int32Array;
  /** Per ref: its seq. */
  seq: Float64Array;
}

/**
 * The final cut of what was read. NOT_FOUND for an item none of whose events was read (deleted
 * meanwhile); INVALID_INPUT for one that keeps nothing: the first such item in the list says why.
 */
export function cutItems(read: ForkRead, ids: readonly string[], k: StepRef, uri: string): ForkCuts {
  const n = ids.length;
  const count = new Int32Array(n);
  read.chunks.forEach((_, c) => {
    const items = read.items[c]!;
    const seqs = read.seqs[c]!;
    for (let r = 0; r < items.length; r++) if (!(seqs[r]! >= read.cut[items[r]!]!)) count[items[r]!]!++;
  });
  for (let i = 0; i < n; i++) {
    if (read.met[i] === 0) throw new NotFoundError(`item ${JSON.stringify(ids[i])} of ${uri} was deleted while the fork read it: fork again`);
    if (count[i] === 0) throw noEventBefore(ids[i]!, k);
  }
  const start = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) start[i + 1] = start[i]! + count[i]!;
  const total = start[n]!;
  const cuts: ForkCuts = { chunks: read.chunks, start, chunk: new Int32Array(total), row: new Int32Array(total), seq: new Float64Array(total) };
  const next = start.slice(0, n);
  read.chunks.forEach((_, c) => {
    const items = read.items[c]!;
    const seqs = read.seqs[c]!;
    for (let r = 0; r < items.length; r++) {
      const p = items[r]!;
      if (seqs[r]! >= read.cut[p]!) continue;
      const j = next[p]!++;
      cuts.chunk[j] = c;
      cuts.row[j] = r;
      cuts.seq[j] = seqs[r]!;
    }
  });
  for (let i = 0; i < n; i++) sortItem(cuts, start[i]!, start[i + 1]!);
  return cuts;
}

/** One item's refs in seq order (then event id), as read unless out of order (events of several batches). */
function sortItem(c: ForkCuts, from: number, to: number): void {
  let sorted = true;
  for (let j = from + 1; j < to && sorted; j++) sorted = c.seq[j - 1]! < c.seq[j]!;
  if (sorted) return;
  const ids = new Map<number, Utf8Column>();
  const eventId = (j: number) => {
    let col = ids.get(c.chunk[j]!);
    if (!col) ids.set(c.chunk[j]!, (col = new Utf8Column(c.chunks[c.chunk[j]!]!, 'event_id')));
    return col.get(c.row[j]!)!;
  };
  const refs = Array.from({ length: to - from }, (_, i) => ({ chunk: c.chunk[from + i]!, row: c.row[from + i]!, seq: c.seq[from + i]!, id: eventId(from + i) }));
  refs.sort((a, b) => a.seq - b.seq || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  refs.forEach((r, i) => {
    c.chunk[from + i] = r.chunk;
    c.row[from + i] = r.row;
    c.seq[from + i] = r.seq;
  });
}

/** What item i's lineage event takes from its kept events (lib/log/admin/fork-plan.ts `lineageRow`). */
export function lineageSource(c: ForkCuts, i: number, itemId: string, cols: ChunkColumns): LineageSource {
  const from = c.start[i]!;
  const last = c.start[i + 1]! - 1;
  let created = from;
  for (let j = from; j <= last; j++) {
    if (cols.of(c.chunk[j]!).eventType.is(c.row[j]!, CREATED)) {
      created = j;
      break;
    }
  }
  const at = (j: number) => cols.of(c.chunk[j]!);
  return {
    itemId,
    lastKeptSeq: c.seq[last]!,
    rootItemId: at(created).root.get(c.row[created]!)!,
    parentItemId: at(created).parent.get(c.row[created]!),
    attempt: at(last).attempt.get(c.row[last]!)!,
    writerEpoch: at(last).epoch.get(c.row[last]!)!,
  };
}

const CREATED = Buffer.from('ITEM_CREATED', 'utf8');

/** The columns of each chunk that lineage events and the fork's records read, made once per chunk. */
export class ChunkColumns {
  private readonly made = new Map<number, ReturnType<typeof columnsOf>>();
  constructor(private readonly chunks: readonly arrow.RecordBatch[]) {}
  of(c: number): ReturnType<typeof columnsOf> {
    let cols = this.made.get(c);
    if (!cols) this.made.set(c, (cols = columnsOf(this.chunks[c]!)));
    return cols;
  }
}

function columnsOf(b: arrow.RecordBatch) {
  const offsets = (name: string) => (b.getChild(name)!.data[0]!.valueOffsets as Int32Array | undefined) ?? new Int32Array(b.numRows + 1);
  return {
    eventType: new Utf8Column(b, 'event_type'),
    root: new Utf8Column(b, 'root_item_id'),
    parent: new Utf8Column(b, 'parent_item_id'),
    attempt: new Int32Column(b, 'attempt'),
    epoch: new Utf8Column(b, 'writer_epoch'),
    /** Value bytes per row (a commit's size is reckoned from them). */
    blob: offsets('value_blob'),
    json: offsets('value_json'),
    str: offsets('value_str'),
  };
}
