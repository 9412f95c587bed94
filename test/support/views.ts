/**
 * The checker's part for reads that answer a view of an item's state rather than its events: a
 * listing line (`items()`), selected fields (`fields`), a failure (`failures()`), an export row.
 * Such an answer is right only if it is the view of the item's fold at some seq L that ends a
 * whole batch, with every batch acked before the read began at or below L: so the checker folds
 * the acked batches itself (lib/fold.ts, on rows made as the writer makes them) at each candidate
 * L and looks for the ones whose view equals the answer.
 *  I2: no candidate matches (the answer mixes batches, or shows part of one);
 *  I1: only candidates below an ack that returned before the read began match;
 *  I3: a later read matches only candidates below every one an earlier read matched.
 * An item is checked in a read only while everything that could be in it is known: no append of
 * it that failed or had not returned by the read's end (its batch may have landed at seqs the
 * checker does not know), and no delete of it overlapping the read.
 */
import { toRows } from '../../lib/batch.ts';
import { foldItem } from '../../lib/fold.ts';
import type { Ack, EventRow, ItemState, PreparedBatch } from '../../lib/types.ts';

export type ViewKind = 'summary' | 'fields' | 'failure' | 'export';

export interface ViewObservation {
  kind: ViewKind;
  /** What the read answered, as `viewOf` projects a state (fields: only those asked for). */
  value: unknown;
  /** For `fields`: the names asked for. */
  names?: readonly string[];
}

/** The view of `state` a read of `kind` answers. */
export function viewOf(kind: ViewKind, state: ItemState, names?: readonly string[]): unknown {
  switch (kind) {
    case 'summary':
      return { status: state.status, cursor: state.cursor, lastSeq: state.lastSeq };
    case 'fields':
      return Object.fromEntries(Object.entries(state.fields).filter(([k]) => names === undefined || names.includes(k)).sort(([a], [b]) => (a < b ? -1 : 1)));
    case 'failure': {
      const f = state.failures.at(-1);
      return state.status === 'failed' && f ? { status: state.status, ...f } : null;
    }
    case 'export':
      return { status: state.status, attempts: state.attempts, fields: Object.fromEntries(Object.entries(state.fields).sort(([a], [b]) => (a < b ? -1 : 1))) };
  }
}

export interface ViewRead {
  id: number;
  itemId: string;
  start: number;
  end: number;
  view: ViewObservation;
  describe: string;
}

export interface ViewAppend {
  start: number;
  end: number | null;
  itemIds: readonly string[];
  acks: readonly Ack[] | null;
  failed: boolean;
}

export interface ViewDelete {
  itemId: string;
  start: number;
  end: number | null;
  throughSeq: number | null;
}

type Report = (invariant: 'I1' | 'I2' | 'I3', message: string) => void;

/**
 * Check every view observation. `batchOf(checkpointId)` is the prepared batch the history
 * registered (under each incarnation's ids).
 */
export function checkViews(reads: readonly ViewRead[], appends: readonly ViewAppend[], deletes: readonly ViewDelete[], batchOf: (checkpointId: string) => PreparedBatch | undefined, report: Report): void {
  /** By read id and item: a listing's answer holds many items. */
  const matches = new Map<string, { base: number; set: number[] }>();
  const keyOf = (r: ViewRead) => `${r.id}/${r.itemId}`;
  const stateCache = new Map<string, ItemState | null>();
  for (const r of reads) {
    if (deletes.some((d) => d.itemId === r.itemId && d.start < r.end && (d.end === null || d.end > r.start))) continue;
    // Anything of the item that may be in storage at seqs the checker does not know: skip.
    if (appends.some((a) => a.itemIds.includes(r.itemId) && a.start < r.end && (a.failed || a.end === null || a.end > r.end))) continue;
    const base = Math.max(0, ...deletes.filter((d) => d.itemId === r.itemId && d.end !== null && d.end < r.start && d.throughSeq !== null).map((d) => d.throughSeq!));
    // The item's events by seq above the base, from every ack (duplicates name the first copy's seqs).
    const bySeq = new Map<number, { cp: string; i: number }>();
    let bound = 0;
    const ends: number[] = [];
    for (const a of appends) {
      for (const ack of a.acks ?? []) {
        if (ack.itemId !== r.itemId || ack.firstSeq <= base) continue;
        ack.eventIds.forEach((_, i) => bySeq.set(ack.firstSeq + i, { cp: ack.checkpointId, i }));
        ends.push(ack.lastSeq);
        if (a.end !== null && a.end < r.start) bound = Math.max(bound, ack.lastSeq);
      }
    }
    const candidates = [...new Set(ends)].sort((x, y) => x - y).filter((L) => {
      for (let s = base + 1; s <= L; s++) if (!bySeq.has(s)) return false;
      return true;
    });
    if (candidates.length === 0) continue;
    const want = canonical(r.view.value);
    // No state at all (an item's events a mutant left unfoldable) matches no view.
    const set = candidates.filter((L) => {
      const st = stateAt(r.itemId, base, L, bySeq, batchOf, stateCache);
      return st !== null && canonical(viewOf(r.view.kind, st, r.view.names)) === want;
    });
    if (set.length === 0) {
      report('I2', `I2 item ${JSON.stringify(r.itemId)}: ${r.describe} answers ${want.slice(0, 200)}, the ${r.view.kind} of no whole-batch state of it (seqs ${base + 1}..${candidates.at(-1)})`);
      continue;
    }
    if (Math.max(...set) < bound) report('I1', `I1 item ${JSON.stringify(r.itemId)}: ${r.describe} answers its ${r.view.kind} as of seq ${Math.max(...set)}, below seq ${bound} acked before the read began`);
    matches.set(keyOf(r), { base, set });
  }
  // I3 between reads of one incarnation: a later read must match a state at or above the lowest an earlier one matched.
  const byItem = new Map<string, ViewRead[]>();
  for (const r of reads) if (matches.has(keyOf(r))) byItem.set(r.itemId, [...(byItem.get(r.itemId) ?? []), r]);
  for (const list of byItem.values()) {
    for (const r1 of list) {
      const m1 = matches.get(keyOf(r1))!;
      for (const r2 of list) {
        const m2 = matches.get(keyOf(r2))!;
        if (r2.start <= r1.end || m2.base !== m1.base) continue;
        if (Math.max(...m2.set) < Math.min(...m1.set)) {
          report('I3', `I3 item ${JSON.stringify(r1.itemId)}: ${r1.describe} answers its ${r1.view.kind} as of seq ${Math.min(...m1.set)} or later, later ${r2.describe} as of seq ${Math.max(...m2.set)}`);
        }
      }
    }
  }
}

/** The fold of the item's events base+1..L (rows made as the writer makes them). */
function stateAt(
  itemId: string,
  base: number,
  L: number,
  bySeq: ReadonlyMap<number, { cp: string; i: number }>,
  batchOf: (checkpointId: string) => PreparedBatch | undefined,
  cache: Map<string, ItemState | null>,
): ItemState | null {
  const key = `${itemId}@${base}..${L}`;
  if (cache.has(key)) return cache.get(key)!;
  const rows: EventRow[] = [];
  const done = new Set<string>();
  for (let s = base + 1; s <= L; s++) {
    const { cp, i } = bySeq.get(s)!;
    if (done.has(cp)) continue;
    done.add(cp);
    const b = batchOf(cp);
    if (!b) return null;
    rows.push(...toRows(b, { firstSeq: s - i, writerEpoch: 's00-e000001', eventTsUs: 0, rootItemId: itemId, parentItemId: null }));
  }
  const state = rows.length > 0 ? foldItem(itemId, rows) : null;
  cache.set(key, state);
  return state;
}

/** JSON with every object's keys sorted (answers and projections build their objects in different orders). */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x));
}
