/**
 * The one checker of the log's promises (issue 8, I1-I5), shared by the simulation harness
 * (test/sim/) and ordinary tests. A test records into a `History` what it asked (each append:
 * its batches, the writer, when it started and ended, its acks or error) and what it saw (each
 * read: fold states and/or trajectories per item, blob loads, when it started and ended), then
 * `checkHistory` answers with one message per broken promise.
 *
 * Time is logical: every begin/end takes the next tick of the history's counter, so "a read
 * that started after the ack returned" means its begin came after that append's end. Record
 * begins and ends in the order they happen (call `end*` as soon as the promise settles).
 *
 *  I1 every acked batch is visible, whole, at its acked seqs (eventIds[i] at firstSeq+i) to
 *     every read that started after the ack returned (and to the final read);
 *  I2 no read returns part of a batch;
 *  I3 monotonic reads: an event a read returned is returned, at the same seq, by every read
 *     that started after that read ended;
 *  I4 at most one ack per checkpoint says duplicate:false; a duplicate:true ack is held to I1;
 *  I5 no seq_conflict (the caller never had two writers write different batches of one item
 *     at the same time).
 *
 * Deletions (docs/design/deletion.md): a recorded delete of item X through seq T ends I1/I3 for
 * X's events at or below T for every read that did not end before the delete began (such a read
 * may or may not see them), and adds
 *  D1 no read that started after the delete returned shows any of them (events, a fold ending
 *     at or below T, their blobs).
 * Batches of a re-created item are recognised under their incarnation's ids.
 */
import { parseBatch } from '../../lib/batch.ts';
import { incarnate } from '../../lib/log/write/sequence.ts';
import type { Ack, ItemState, PreparedBatch, TrajectoryEvent } from '../../lib/types.ts';
import { checkViews, type ViewObservation, type ViewRead } from './views.ts';

export type Invariant = 'I1' | 'I2' | 'I3' | 'I4' | 'I5' | 'D1';

/** One event as a read returned it. */
export interface SeenEvent {
  eventId: string;
  seq: number;
  checkpointId: string;
}

/** What one read said about one item. Give `absent`, or a `state` and/or `events`. */
export interface ItemObservation {
  itemId: string;
  /** The read answered "item not found". */
  absent?: boolean;
  /** A fold of the item. */
  state?: ItemState;
  /** The item's events (a trajectory). */
  events?: SeenEvent[];
  /** The item's last seq as a listing (items()) shows it. */
  listedSeq?: number;
  /** A view of its state (a listing line, fields, a failure, an export row): test/support/views.ts. */
  view?: ViewObservation;
}

export interface BlobObservation {
  eventId: string;
  /** The bytes returned, or null when the read answered NotFound. */
  bytes: Uint8Array | null;
  /** The read answered CORRUPT (the bytes did not match their checksum). */
  corrupt?: boolean;
}

export interface ReadResult {
  items?: ItemObservation[];
  blobs?: BlobObservation[];
  /** The read lists every item (allStates): an item it does not list is absent. */
  allItems?: boolean;
}

interface AppendRecord {
  id: number;
  writer: string;
  batches: PreparedBatch[];
  start: number;
  end: number | null;
  /** Clock time (ms) at start and end, if the history has a clock. */
  startMs: number | null;
  endMs: number | null;
  acks: Ack[] | null;
  error: string | null;
}

interface DeleteRecord {
  itemId: string;
  start: number;
  /** null while no attempt returned (it may still have deleted). */
  end: number | null;
  throughSeq: number | null;
  /** The seq a guarded delete was given (`throughSeq` option), if any. */
  guard: number | null;
  /** Whether the delete that returned says it deleted. */
  deleted: boolean | null;
}

interface ReadRecord {
  id: number;
  reader: string;
  what: string;
  start: number;
  end: number | null;
  result: ReadResult | null;
  error: string | null;
}

export interface CheckOptions {
  /** Stop after this many messages per invariant (default 50). */
  maxPerInvariant?: number;
  /**
   * How much earlier than the retention a claim may have been deleted (skewed clocks: the writer
   * stamps its expiry, a maintainer judges its age): I4's documented window opens that much earlier.
   */
  claimWindowSlackMs?: number;
}

export interface InvariantViolation {
  invariant: Invariant;
  message: string;
}

/** Observation of a trajectory (the read's events of one item). */
export function trajectoryObservation(itemId: string, events: readonly Pick<TrajectoryEvent, 'eventId' | 'itemSeq' | 'checkpointId'>[]): ItemObservation {
  return { itemId, events: events.map((e) => ({ eventId: e.eventId, seq: e.itemSeq, checkpointId: e.checkpointId })) };
}

export interface HistoryOptions {
  /** The clock the system under test runs on (for I4's documented claim window). */
  nowMs?: () => number;
  /**
   * Claims are deleted after this long (docs/design/invariants.md, "Assumptions"): a second
   * `duplicate: false` ack that ended at least this long after the first one started is the
   * documented window, not a violation. Unset: no window.
   */
  claimRetentionMs?: number;
}

export class History {
  constructor(private readonly options: HistoryOptions = {}) {}

  get claimRetentionMs(): number | undefined {
    return this.options.claimRetentionMs;
  }
  private t = 0;
  private readonly appends: AppendRecord[] = [];
  private readonly reads: ReadRecord[] = [];
  /** checkpointId -> the prepared batch (deterministic ids from parseBatch). */
  private readonly checkpoints = new Map<string, PreparedBatch>();
  /** eventId -> [checkpointId, index in batch] */
  private readonly eventIndex = new Map<string, [string, number]>();
  private readonly deletes: DeleteRecord[] = [];
  /** checkpoint id as sent -> the batch under the ids of every incarnation known when sent. */
  private readonly variants = new Map<string, PreparedBatch[]>();

  /** A delete of `itemId` starts (its retries are part of it). Returns its id for `endDelete`. */
  beginDelete(itemId: string, guard: number | null = null): number {
    this.deletes.push({ itemId, start: ++this.t, end: null, throughSeq: null, guard, deleted: null });
    return this.deletes.length - 1;
  }

  /** A delete returned `throughSeq` (deleted now, or by an earlier attempt). */
  endDelete(id: number, throughSeq: number, deleted: boolean | null = null): void {
    const d = this.deletes[id]!;
    d.end = ++this.t;
    d.throughSeq = throughSeq;
    d.deleted = deleted;
  }

  private register(p: PreparedBatch): void {
    if (this.checkpoints.has(p.checkpointId)) return;
    this.checkpoints.set(p.checkpointId, p);
    p.events.forEach((e, i) => this.eventIndex.set(e.eventId, [p.checkpointId, i]));
  }

  /** The current logical time (the tick of the last begin/end). */
  now(): number {
    return this.t;
  }

  /** An append call starts. Returns its id for `endAppend`. Unparsable batches are kept out. */
  beginAppend(writer: string, inputs: readonly unknown[]): number {
    const batches: PreparedBatch[] = [];
    for (const input of inputs) {
      let p: PreparedBatch;
      try {
        // A copy: the caller may reuse a blob's buffer once its batch is acked.
        p = parseBatch(structuredClone(input));
      } catch {
        continue; // the append will reject it; nothing of it can be acked
      }
      batches.push(p);
      const all = [p];
      for (const d of this.deletes) if (d.itemId === p.itemId && d.throughSeq !== null && d.throughSeq > 0) all.push(incarnate(p, d.throughSeq));
      for (const v of all) this.register(v);
      this.variants.set(p.checkpointId, [...new Map([...(this.variants.get(p.checkpointId) ?? []), ...all].map((v) => [v.checkpointId, v])).values()]);
    }
    const id = this.appends.length;
    this.appends.push({ id, writer, batches, start: ++this.t, end: null, startMs: this.options.nowMs?.() ?? null, endMs: null, acks: null, error: null });
    return id;
  }

  endAppend(id: number, outcome: { acks: Ack[] } | { error: unknown }): void {
    const r = this.appends[id]!;
    r.end = ++this.t;
    r.endMs = this.options.nowMs?.() ?? null;
    if ('acks' in outcome) r.acks = outcome.acks.map((a) => ({ ...a, eventIds: [...a.eventIds] }));
    else r.error = errText(outcome.error);
  }

  /** A read starts; `what` describes it in messages (e.g. `fold x`). */
  beginRead(reader: string, what: string): number {
    const id = this.reads.length;
    this.reads.push({ id, reader, what, start: ++this.t, end: null, result: null, error: null });
    return id;
  }

  endRead(id: number, outcome: ReadResult | { error: unknown }): void {
    const r = this.reads[id]!;
    r.end = ++this.t;
    if ('error' in outcome) r.error = errText(outcome.error);
    else r.result = outcome;
  }

  /** Every item any recorded batch was for (the final read should cover them all). */
  itemIds(): string[] {
    return [...new Set([...this.checkpoints.values()].map((b) => b.itemId))].sort();
  }

  /** Prepared batch of a checkpoint id recorded by some append, if any. */
  batch(checkpointId: string): PreparedBatch | undefined {
    return this.checkpoints.get(checkpointId);
  }

  /** Acked batches so far: [ack, writer, append end]. */
  acked(): Array<{ ack: Ack; writer: string; end: number }> {
    const out: Array<{ ack: Ack; writer: string; end: number }> = [];
    for (const a of this.appends) for (const ack of a.acks ?? []) out.push({ ack, writer: a.writer, end: a.end! });
    return out;
  }

  counts(): { appends: number; acked: number; reads: number; failedReads: number } {
    return {
      appends: this.appends.length,
      acked: this.appends.filter((a) => a.acks).length,
      reads: this.reads.length,
      failedReads: this.reads.filter((r) => r.error !== null).length,
    };
  }

  check(options: CheckOptions = {}): InvariantViolation[] {
    return checkHistory(this, options);
  }

  /** The batch sent as `checkpointId`, under each incarnation's ids. */
  variantsOf(checkpointId: string): readonly PreparedBatch[] {
    return this.variants.get(checkpointId) ?? [];
  }

  /** @internal for checkHistory */
  data(): {
    appends: readonly AppendRecord[];
    reads: readonly ReadRecord[];
    deletes: readonly DeleteRecord[];
    eventIndex: ReadonlyMap<string, [string, number]>;
  } {
    return { appends: this.appends, reads: this.reads, deletes: this.deletes, eventIndex: this.eventIndex };
  }
}

/** The item as a read saw it: an observation, `absent` (listing read without it), or unknown. */
function observed(r: ReadRecord, itemId: string): ItemObservation | undefined {
  const res = r.result!;
  const found = res.items?.filter((o) => o.itemId === itemId) ?? [];
  if (found.length === 0) return res.allItems ? { itemId, absent: true } : undefined;
  // Several observations of one item by one read (fold + trajectory): merge them.
  const m: ItemObservation = { itemId };
  for (const o of found) {
    if (o.absent) m.absent = true;
    if (o.state) m.state = o.state;
    if (o.events) m.events = o.events;
    if (o.listedSeq !== undefined) m.listedSeq = o.listedSeq;
  }
  return m;
}

function describeRead(r: ReadRecord): string {
  return `read #${r.id} (${r.what} by ${r.reader}, t=${r.start}..${r.end})`;
}

function short(id: string): string {
  return id.slice(0, 10);
}

export function checkHistory(h: History, options: CheckOptions = {}): InvariantViolation[] {
  const max = options.maxPerInvariant ?? 50;
  const { appends, reads, deletes, eventIndex } = h.data();
  /** Whether a delete of the item through `seq` or above began before read `r` ended (r may not show it). */
  const mayBeDeleted = (itemId: string, seq: number, r: ReadRecord) =>
    deletes.some((d) => d.itemId === itemId && d.start < r.end! && (d.throughSeq === null || d.throughSeq >= seq));
  /** Whether a delete of the item overlapped the time from r1's start to r2's end. */
  const deletedBetween = (itemId: string, r1: ReadRecord, r2: ReadRecord) =>
    deletes.some((d) => d.itemId === itemId && d.start < r2.end! && (d.end === null || d.end > r1.start));
  const out: InvariantViolation[] = [];
  const perInv = new Map<Invariant, number>();
  const seen = new Set<string>();
  const report = (invariant: Invariant, message: string) => {
    if (seen.has(message)) return;
    seen.add(message);
    const n = perInv.get(invariant) ?? 0;
    perInv.set(invariant, n + 1);
    if (n < max) out.push({ invariant, message });
    else if (n === max) out.push({ invariant, message: `${invariant}: more violations left out` });
  };
  const done = reads.filter((r) => r.result !== null && r.end !== null);

  // Acks, with sanity of their shape against the batch sent.
  const acks: Array<{ ack: Ack; a: AppendRecord }> = [];
  for (const a of appends) {
    if (!a.acks) continue;
    a.acks.forEach((ack, i) => {
      acks.push({ ack, a });
      const b = h.variantsOf(a.batches[i]?.checkpointId ?? '').find((v) => v.checkpointId === ack.checkpointId) ?? a.batches[i];
      const expected = b?.events.map((e) => e.eventId) ?? [];
      if (!b || b.checkpointId !== ack.checkpointId || expected.join() !== ack.eventIds.join() || ack.lastSeq - ack.firstSeq + 1 !== ack.eventIds.length) {
        report('I1', `I1 append #${a.id} (${a.writer}): ack ${i} ${JSON.stringify(ack)} does not match the batch sent (checkpoint ${b?.checkpointId ?? '?'}, ${expected.length} events)`);
      }
    });
  }

  // I4: at most one duplicate:false per checkpoint.
  const firsts = new Map<string, Array<{ ack: Ack; a: AppendRecord }>>();
  for (const x of acks) {
    if (x.ack.duplicate) continue;
    const l = firsts.get(x.ack.checkpointId) ?? [];
    l.push(x);
    firsts.set(x.ack.checkpointId, l);
  }
  const retention = h.claimRetentionMs === undefined ? undefined : h.claimRetentionMs - (options.claimWindowSlackMs ?? 0);
  for (const [cp, all] of firsts) {
    // Outside the claim window (see HistoryOptions.claimRetentionMs) a repeat is documented: one
    // claim may have been made at least `retention` after the other, in either order. The
    // append that started first is not always the first to claim (it may be the stalled one).
    const apart = (later: AppendRecord, earlier: AppendRecord) =>
      later.endMs !== null && earlier.startMs !== null && later.endMs - earlier.startMs >= retention!;
    const l = all.filter((x, i) => i === 0 || retention === undefined || !(apart(x.a, all[0]!.a) || apart(all[0]!.a, x.a)));
    if (l.length > 1) {
      report('I4', `I4 checkpoint ${short(cp)} of item ${JSON.stringify(l[0]!.ack.itemId)} acked duplicate:false ${l.length} times: ${l.map((x) => `append #${x.a.id} (${x.a.writer}) seqs ${x.ack.firstSeq}-${x.ack.lastSeq}`).join('; ')}`);
    }
  }

  /** Whether delete `d` deleted what it says (a delete given a seq that answered "not deleted" deleted nothing). */
  const deletedSomething = (d: DeleteRecord) => !(d.guard !== null && d.deleted === false);
  /**
   * Whether a delete may have deleted what append `a` acked through `seq` before read `r` ended:
   * it began before `r` ended and had not returned when `a` began. An append that began after a
   * delete of its item returned writes a later incarnation, above every seq that delete covers.
   */
  const mayDeleteAcked = (itemId: string, seq: number, a: AppendRecord, r: ReadRecord) =>
    deletes.some((d) => d.itemId === itemId && d.start < r.end! && (d.throughSeq === null || d.throughSeq >= seq) && (d.end === null || d.end > a.start) && deletedSomething(d));

  // I1 (and I4 for duplicate acks): visible, whole, at the acked seqs to every later read.
  for (const { ack, a } of acks) {
    const inv: Invariant = ack.duplicate ? 'I4' : 'I1';
    const what = `${ack.duplicate ? 'duplicate ' : ''}ack of checkpoint ${short(ack.checkpointId)} (item ${JSON.stringify(ack.itemId)}, seqs ${ack.firstSeq}-${ack.lastSeq}, append #${a.id} by ${a.writer}, returned t=${a.end})`;
    // Acked at seqs a delete that returned before the append began covers: they can never be
    // visible (D1), whatever is read later.
    const before = deletes.find((d) => d.itemId === ack.itemId && d.end !== null && d.end < a.start && d.throughSeq !== null && d.throughSeq >= ack.firstSeq && deletedSomething(d));
    if (before) report(inv, `${inv} ${what}: the append began after the delete of the item through seq ${before.throughSeq} (t=${before.start}..${before.end}) returned, and is acked at seqs it deleted`);
    for (const r of done) {
      if (r.start <= a.end!) continue;
      if (mayDeleteAcked(ack.itemId, ack.lastSeq, a, r)) continue;
      const o = observed(r, ack.itemId);
      if (!o) continue;
      if (o.absent) {
        report(inv, `${inv} ${what}: ${describeRead(r)} says the item does not exist`);
        continue;
      }
      if (o.events) {
        const at = new Map(o.events.map((e) => [e.eventId, e.seq]));
        ack.eventIds.forEach((id, i) => {
          const seq = at.get(id);
          if (seq === undefined) report(inv, `${inv} ${what}: ${describeRead(r)} lacks event ${short(id)} (seq ${ack.firstSeq + i})`);
          else if (seq !== ack.firstSeq + i) report(inv, `${inv} ${what}: ${describeRead(r)} has event ${short(id)} at seq ${seq}, acked at ${ack.firstSeq + i}`);
        });
      }
      if (o.state && o.state.lastSeq < ack.lastSeq) {
        report(inv, `${inv} ${what}: ${describeRead(r)} folds to lastSeq ${o.state.lastSeq}`);
      }
      if (o.listedSeq !== undefined && o.listedSeq < ack.lastSeq) {
        report(inv, `${inv} ${what}: ${describeRead(r)} lists the item at lastSeq ${o.listedSeq}`);
      }
    }
  }

  // I2: whole batches only.
  for (const r of done) {
    for (const o of r.result!.items ?? []) {
      if (!o.events) continue;
      const ids = new Set(o.events.map((e) => e.eventId));
      for (const cp of new Set(o.events.map((e) => e.checkpointId))) {
        const b = h.batch(cp);
        if (!b) continue; // not sent through this history (e.g. written by another test step)
        const missing = b.events.filter((e) => !ids.has(e.eventId));
        if (missing.length > 0) {
          report('I2', `I2 item ${JSON.stringify(o.itemId)} checkpoint ${short(cp)}: ${describeRead(r)} returns ${b.events.length - missing.length} of its ${b.events.length} events (missing ${missing.map((e) => short(e.eventId)).join(', ')})`);
        }
      }
    }
  }

  // I2 for event reads: the item as it was at one moment. Every acked batch of the item between
  // the lowest and the highest seq a read returns is there (a later batch without an earlier one
  // is no state the item ever had), unless a delete may have taken it.
  for (const r of done) {
    for (const o of r.result!.items ?? []) {
      if (!o.events || o.events.length === 0) continue;
      const ids = new Set(o.events.map((e) => e.eventId));
      const seqs = o.events.map((e) => e.seq);
      const [low, top] = [Math.min(...seqs), Math.max(...seqs)];
      for (const { ack, a } of acks) {
        if (ack.itemId !== o.itemId || ack.firstSeq < low || ack.lastSeq >= top) continue;
        const gone = ack.eventIds.filter((id, i) => !ids.has(id) && !mayDeleteAcked(o.itemId, ack.firstSeq + i, a, r));
        if (gone.length > 0) report('I2', `I2 item ${JSON.stringify(o.itemId)}: ${describeRead(r)} returns seq ${top} but not checkpoint ${short(ack.checkpointId)} (seqs ${ack.firstSeq}-${ack.lastSeq}, acked by append #${a.id})`);
      }
    }
  }

  // I2 for folds and listings: the last seq they show ends a batch, never falls inside one.
  const ranges = new Map<string, Array<[number, number, string]>>();
  for (const { ack } of acks) if (ack.lastSeq > ack.firstSeq) ranges.set(ack.itemId, [...(ranges.get(ack.itemId) ?? []), [ack.firstSeq, ack.lastSeq, ack.checkpointId]]);
  for (const r of done) {
    for (const o of r.result!.items ?? []) {
      for (const [what, L] of [['folds', o.state?.lastSeq], ['lists', o.listedSeq]] as const) {
        if (L === undefined) continue;
        const cut = ranges.get(o.itemId)?.find(([f, l]) => f <= L && L < l);
        if (cut) report('I2', `I2 item ${JSON.stringify(o.itemId)}: ${describeRead(r)} ${what} it to lastSeq ${L}, inside checkpoint ${short(cut[2])} (seqs ${cut[0]}-${cut[1]})`);
      }
    }
  }

  // Views of item states (listing lines, fields, failures, export rows): test/support/views.ts.
  const viewReads: ViewRead[] = [];
  for (const r of done) for (const o of r.result!.items ?? []) if (o.view) viewReads.push({ id: r.id, itemId: o.itemId, start: r.start, end: r.end!, view: o.view, describe: describeRead(r) });
  if (viewReads.length > 0) {
    checkViews(
      viewReads,
      appends.map((a) => ({ start: a.start, end: a.end, itemIds: a.batches.map((b) => b.itemId), acks: a.acks, failed: a.error !== null })),
      deletes,
      (cp) => h.batch(cp),
      report,
    );
  }

  // A guarded delete deletes through the seq it was given, or nothing.
  for (const d of deletes) {
    if (d.deleted === true && d.guard !== null && d.throughSeq !== d.guard) {
      report('I1', `I1 delete of item ${JSON.stringify(d.itemId)} guarded at seq ${d.guard} (t=${d.start}..${d.end}) deleted through seq ${d.throughSeq}`);
    }
  }

  // I3: monotonic reads.
  for (const r1 of done) {
    for (const o1 of r1.result!.items ?? []) {
      if (o1.absent) continue;
      for (const r2 of done) {
        if (r2.start <= r1.end!) continue;
        const o2 = observed(r2, o1.itemId);
        if (!o2) continue;
        const gone = deletedBetween(o1.itemId, r1, r2);
        if (o2.absent && !gone) {
          report('I3', `I3 item ${JSON.stringify(o1.itemId)}: ${describeRead(r1)} returned it, later ${describeRead(r2)} says it does not exist`);
          continue;
        }
        if (o1.events && o2.events) {
          const at = new Map(o2.events.map((e) => [e.eventId, e.seq]));
          for (const e of o1.events) {
            if (mayBeDeleted(o1.itemId, e.seq, r2)) continue;
            const seq = at.get(e.eventId);
            if (seq === undefined) report('I3', `I3 item ${JSON.stringify(o1.itemId)} event ${short(e.eventId)} (seq ${e.seq}, checkpoint ${short(e.checkpointId)}): returned by ${describeRead(r1)}, missing from later ${describeRead(r2)}`);
            else if (seq !== e.seq) report('I3', `I3 item ${JSON.stringify(o1.itemId)} event ${short(e.eventId)}: seq ${e.seq} in ${describeRead(r1)}, seq ${seq} in later ${describeRead(r2)}`);
          }
        }
        const last1 = o1.state?.lastSeq ?? o1.listedSeq ?? (o1.events ? Math.max(0, ...o1.events.map((e) => e.seq)) : 0);
        const last2 = o2.state?.lastSeq ?? o2.listedSeq ?? (o2.events ? Math.max(0, ...o2.events.map((e) => e.seq)) : Infinity);
        if (last2 < last1 && !gone) report('I3', `I3 item ${JSON.stringify(o1.itemId)}: lastSeq ${last1} in ${describeRead(r1)}, ${last2} in later ${describeRead(r2)}`);
      }
    }
  }

  // I5: no seq_conflict in any fold, no two events at one seq in any trajectory.
  for (const r of done) {
    for (const o of r.result!.items ?? []) {
      for (const v of o.state?.violations ?? []) {
        if (v.kind === 'seq_conflict') report('I5', `I5 item ${JSON.stringify(o.itemId)} seq ${v.seq}: ${describeRead(r)} reports seq_conflict of ${v.eventIds.map((e) => describeEvent(e, eventIndex)).join(' and ')}`);
      }
      if (o.events) {
        const bySeq = new Map<number, string[]>();
        for (const e of o.events) bySeq.set(e.seq, [...(bySeq.get(e.seq) ?? []), e.eventId]);
        for (const [seq, ids] of bySeq) {
          if (new Set(ids).size > 1) report('I5', `I5 item ${JSON.stringify(o.itemId)} seq ${seq}: ${describeRead(r)} returns ${ids.map((e) => describeEvent(e, eventIndex)).join(' and ')}`);
        }
      }
    }
  }

  // Blob loads: an acked blob event loads, with its bytes (I1).
  const ackedEvents = new Map<string, number>();
  const ackSeqOf = new Map<string, number>();
  for (const { ack, a } of acks) {
    ack.eventIds.forEach((id, i) => ackSeqOf.set(id, ack.firstSeq + i));
    for (const id of ack.eventIds) ackedEvents.set(id, Math.min(ackedEvents.get(id) ?? Infinity, a.end!));
  }
  for (const r of done) {
    for (const b of r.result!.blobs ?? []) {
      const loc = eventIndex.get(b.eventId);
      const ev = loc ? h.batch(loc[0])!.events[loc[1]]! : undefined;
      const ackedAt = ackedEvents.get(b.eventId);
      const item = loc ? h.batch(loc[0])!.itemId : undefined;
      const seq = ackSeqOf.get(b.eventId);
      if (b.bytes === null) {
        if (item !== undefined && seq !== undefined && mayBeDeleted(item, seq, r)) continue;
        if (ackedAt !== undefined && ackedAt < r.start) report('I1', `I1 blob event ${short(b.eventId)} (acked t=${ackedAt}): ${describeRead(r)} answers ${b.corrupt ? 'CORRUPT' : 'NotFound'}`);
      } else if (ev?.value?.kind === 'blob' && !sameBytes(ev.value.bytes, b.bytes)) {
        report('I1', `I1 blob event ${short(b.eventId)}: ${describeRead(r)} returns ${b.bytes.byteLength} bytes that differ from the ${ev.value.size} sent`);
      }
    }
  }

  // D1: nothing a delete covers shows in a read that started after it returned.
  for (const d of deletes) {
    if (d.end === null || d.throughSeq === null) continue;
    const what = `delete of item ${JSON.stringify(d.itemId)} through seq ${d.throughSeq} (t=${d.start}..${d.end})`;
    for (const r of done) {
      if (r.start <= d.end) continue;
      const o = observed(r, d.itemId);
      for (const e of o?.events ?? []) {
        if (e.seq <= d.throughSeq) report('D1', `D1 ${what}: ${describeRead(r)} shows event ${short(e.eventId)} at seq ${e.seq}`);
      }
      if (o?.state && o.state.lastSeq <= d.throughSeq) report('D1', `D1 ${what}: ${describeRead(r)} folds the item to lastSeq ${o.state.lastSeq}`);
      if (o?.listedSeq !== undefined && o.listedSeq <= d.throughSeq) report('D1', `D1 ${what}: ${describeRead(r)} lists the item at lastSeq ${o.listedSeq}`);
      for (const b of r.result!.blobs ?? []) {
        const seq = ackSeqOf.get(b.eventId);
        const loc = eventIndex.get(b.eventId);
        if (b.bytes !== null && seq !== undefined && seq <= d.throughSeq && loc && h.batch(loc[0])!.itemId === d.itemId) {
          report('D1', `D1 ${what}: ${describeRead(r)} loads the blob of event ${short(b.eventId)}`);
        }
      }
    }
  }
  return out;
}

function describeEvent(eventId: string, index: ReadonlyMap<string, [string, number]>): string {
  const loc = index.get(eventId);
  return loc ? `${short(eventId)} (checkpoint ${short(loc[0])}#${loc[1]})` : short(eventId);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

function errText(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return String(e);
}
