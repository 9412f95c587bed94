/**
 * Light trajectories of the items the page lists (its drill-down): one scan per chunk of item ids
 * over light columns; blob fields show their size, never their bytes, and no value column is read.
 */
import type * as arrow from 'apache-arrow';
import { Int32Column, Int64Column, Utf8Column } from '../log/columns.ts';
import type { EventVisitor, ScanOptions } from '../log/read/stream.ts';
import { sqlIn } from '../log/tables.ts';
import { describeThreadField } from '../langgraph/view.ts';
import type { TrajectoryRow } from './model.ts';

export const TRAJECTORY_COLUMNS = [
  'event_id',
  'item_id',
  'item_seq',
  'event_type',
  'step_name',
  'step_index',
  'iteration',
  'attempt',
  'field_name',
  'value_kind',
  'payload_size',
  'terminal',
  'error_type',
  'event_ts',
  'writer_epoch',
] as const;

/** Item ids per scan: keeps the SQL filter short and the rows held at once few. */
const CHUNK = 1000;

type Scan = <T>(o: ScanOptions, make: () => EventVisitor<T>) => Promise<T>;

class TrajectoryVisitor implements EventVisitor<Map<string, (TrajectoryRow & { id: string })[]>> {
  private readonly out = new Map<string, (TrajectoryRow & { id: string })[]>();

  constructor(private readonly threads: ReadonlySet<string>) {}

  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    const c = {
      item: new Utf8Column(b, 'item_id'),
      id: new Utf8Column(b, 'event_id'),
      seq: new Int64Column(b, 'item_seq'),
      type: new Utf8Column(b, 'event_type'),
      step: new Utf8Column(b, 'step_name'),
      stepIndex: new Int64Column(b, 'step_index'),
      iteration: new Int64Column(b, 'iteration'),
      attempt: new Int32Column(b, 'attempt'),
      field: new Utf8Column(b, 'field_name'),
      kind: new Utf8Column(b, 'value_kind'),
      size: new Int64Column(b, 'payload_size'),
      terminal: new Utf8Column(b, 'terminal'),
      error: new Utf8Column(b, 'error_type'),
      ts: new Int64Column(b, 'event_ts'),
      epoch: new Utf8Column(b, 'writer_epoch'),
    };
    for (let r = 0; r < b.numRows; r++) {
      if (!keep(r)) continue;
      const item = c.item.get(r)!;
      let list = this.out.get(item);
      if (!list) this.out.set(item, (list = []));
      const kind = c.kind.get(r);
      const field = c.field.get(r);
      list.push({
        id: c.id.get(r)!,
        seq: c.seq.get(r)!,
        type: c.type.get(r)!,
        step: c.step.get(r),
        stepIndex: c.stepIndex.get(r),
        iteration: c.iteration.get(r),
        attempt: c.attempt.get(r) ?? 0,
        field,
        valueKind: kind,
        // Only blobs carry a size worth showing (their bytes are never read here).
        size: kind === 'blob' ? c.size.get(r) : null,
        terminal: c.terminal.get(r),
        errorType: c.error.get(r),
        atMs: (c.ts.get(r) ?? 0) / 1000,
        writerEpoch: c.epoch.get(r)!,
        label: field !== null && this.threads.has(item) ? describeThreadField(field) : null,
      });
    }
  }

  done() {
    return this.out;
  }
}

/** The trajectories of `itemIds`, each in (item_seq, event_id) order; the fields of `threads` (LangGraph) labelled. */
export async function lightTrajectories(scan: Scan, itemIds: readonly string[], threads: ReadonlySet<string> = new Set()): Promise<Record<string, TrajectoryRow[]>> {
  const out: Record<string, TrajectoryRow[]> = Object.create(null) as Record<string, TrajectoryRow[]>;
  for (let i = 0; i < itemIds.length; i += CHUNK) {
    const part = itemIds.slice(i, i + CHUNK);
    const found = await scan({ columns: TRAJECTORY_COLUMNS, filter: sqlIn('item_id', part) }, () => new TrajectoryVisitor(threads));
    for (const id of part) {
      const rows = found.get(id) ?? [];
      rows.sort((a, b) => a.seq - b.seq || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      out[id] = rows.map(({ id: _id, ...rest }) => rest);
    }
  }
  return out;
}
