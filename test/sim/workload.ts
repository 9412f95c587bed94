/**
 * The simulated clients' side: items, their batches, and which batch may be delivered when, so
 * that I5 holds for a correct log:
 *  - at any moment the deliveries of one item in flight are copies of its current batch (a
 *    concurrent duplicate delivery to another writer is fine: identical batches), plus copies of
 *    its already-acked batches (old redeliveries);
 *  - its next batch is created only when none of its deliveries is in flight (acked, failed, or
 *    its writer crashed); a failed current batch is retried (same batch, any writer) or
 *    abandoned for a different one (next attempt), unless a delivery of it timed out (it may
 *    still land): then it is only retried (the late focus's steered clients take an acked retry
 *    as the answer to it, I5, and may then delete the item: test/sim/steer-late.ts);
 *  - a batch may report a failed step (FAILED); the step is then tried again with the next attempt;
 *  - deletes: an item is deleted only when none of its deliveries is in flight or in doubt; a
 *    failed delete blocks the item until a retry returns; then the item starts over (created
 *    again, its old batches never redelivered). Every other delete passes the highest seq acked in
 *    the item's current incarnation as `throughSeq`, every attempt the same seq; a CONFLICT makes
 *    the next attempt read the item first. A guarded delete that returned may be delivered again
 *    later (an at-least-once queue), after the item was created again: it must delete nothing.
 */
import { parseBatch } from '../../lib/batch.ts';
import { incarnate } from '../../lib/log/write/sequence.ts';
import type { Rng } from './prng.ts';

export interface ItemModel {
  id: string;
  chain: Array<Record<string, unknown>>;
  cur: number;
  curAcked: boolean;
  /** A delivery of the current batch timed out: it may still land, so only retry it. */
  curInDoubt: boolean;
  acked: number[];
  inflight: number;
  /** Chain indexes of the batches in flight (one entry per delivery). */
  flying: number[];
  step: number;
  attempt: number;
  terminal: boolean;
  /** The seq the current incarnation's creation follows (0 until the item is deleted). */
  base: number;
  /** History id of a delete that has not returned yet: no delivery until it does. */
  deleting: number | null;
  /** Highest seq acked in the current incarnation (what a guarded delete passes). */
  seen: number;
  /** A guarded attempt of the current delete met CONFLICT: read the item before the next. */
  reread: boolean;
  /** Guarded deletes of earlier incarnations that returned (delivered again later). */
  oldDeletes: number[];
  /** A delete delivered again deleted this incarnation (a broken guard): no more deliveries. */
  broken: boolean;
  /** An old batch delivered again timed out (it may still land): only it is sent until it is acked. */
  oldInDoubt: number | null;
}

export function newItem(id: string): ItemModel {
  return { id, chain: [], cur: -1, curAcked: false, curInDoubt: false, acked: [], inflight: 0, flying: [], step: 0, attempt: 1, terminal: false, base: 0, deleting: null, seen: 0, reread: false, oldDeletes: [], broken: false, oldInDoubt: null };
}

/** The item after a delete through `throughSeq` returned: it starts over. */
export function startOver(it: ItemModel, throughSeq: number, guarded: number | null): void {
  const oldDeletes = guarded !== null ? [...it.oldDeletes, guarded] : it.oldDeletes;
  // Deliveries in flight (the delete's own attempt, settled after this) keep counting.
  Object.assign(it, newItem(it.id), { base: throughSeq, oldDeletes, inflight: it.inflight });
}

export class Workload {
  /** Event ids of blob values, for blob loads. */
  readonly blobEvents: string[] = [];
  /** Each blob value's item and bytes, by event id. */
  readonly blobs = new Map<string, { itemId: string; bytes: Uint8Array }>();

  constructor(
    private readonly wl: Rng,
    private readonly failures: number,
    private readonly blobShare: number,
  ) {}

  private newBatch(it: ItemModel): Record<string, unknown> {
    const wl = this.wl;
    const base = { itemId: it.id, runId: 'r', ...(it.attempt > 1 ? { attempt: it.attempt } : {}) };
    // Until a creation is acked, a new batch creates the item (a failed creation may be
    // abandoned for another attempt; if the failed one landed, the new one is rejected).
    if (it.acked.length === 0) return { ...base, create: {}, step: { name: 's0', index: 0 }, set: { prompt: `p-${it.id}` } };
    if (it.step >= 3 && wl.chance(0.2)) return { ...base, terminal: 'completed' };
    const step = { name: `s${it.step}`, index: it.step };
    if (this.failures > 0 && wl.chance(this.failures)) {
      return { ...base, step, failed: { errorType: `E${it.step}`, errorDump: `{"attempt":${it.attempt}}`, traceback: `at s${it.step}` } };
    }
    const set: Record<string, unknown> = { [`f${it.step}`]: `v${it.step}.${it.attempt}` };
    if (wl.chance(this.blobShare)) set.img = Uint8Array.from({ length: 8 + wl.int(24) }, () => wl.int(256));
    const b: Record<string, unknown> = { ...base, step, set };
    if (wl.chance(0.2)) b.append = { log: [`l${it.step}`] };
    return b;
  }

  /**
   * The batch to deliver for `it` now, or null if none may be sent. `giveUp`: a failed current
   * batch not in doubt is given up for another attempt (else retried or given up, as the seed draws).
   */
  nextFor(it: ItemModel, giveUp = false): { batch: Record<string, unknown>; fresh: boolean } | null {
    if (it.deleting !== null || it.broken) return null;
    // While a batch not yet acked is in flight, only copies of it may go out: a different batch
    // of the item beside it would be two writers writing one item at once (the caller's breach).
    if (it.inflight > 0) {
      const flying = it.flying.find((i) => !it.acked.includes(i));
      if (flying !== undefined) return { batch: it.chain[flying]!, fresh: false };
      return it.cur >= 0 ? { batch: it.chain[it.cur]!, fresh: false } : null;
    }
    if (it.cur >= 0 && !it.curAcked && (it.curInDoubt || (!giveUp && this.wl.chance(0.6)))) return { batch: it.chain[it.cur]!, fresh: false }; // retry
    if (it.terminal) return null;
    if (it.cur >= 0) {
      if (it.curAcked && it.chain[it.cur]!.failed === undefined) {
        it.step++;
        it.attempt = 1;
      } else {
        it.attempt++; // a failed step, or a failed batch abandoned for a different one
      }
    }
    const b = this.newBatch(it);
    it.chain.push(b);
    it.cur = it.chain.length - 1;
    it.curAcked = false;
    it.curInDoubt = false;
    const prepared = incarnate(parseBatch(structuredClone(b)), it.base);
    for (const e of prepared.events) {
      if (e.value?.kind !== 'blob') continue;
      this.blobEvents.push(e.eventId);
      this.blobs.set(e.eventId, { itemId: it.id, bytes: e.value.bytes });
    }
    return { batch: b, fresh: true };
  }
}

/**
 * A copy of `batch` for one delivery: the caller hands the log its own blob buffers, which it may
 * reuse (zero) once the batch is acked; the batch kept for redeliveries stays as it was.
 */
export function deliveryCopy(batch: Record<string, unknown>): Record<string, unknown> {
  const set = batch.set as Record<string, unknown> | undefined;
  if (!set || !(set.img instanceof Uint8Array)) return batch;
  return { ...batch, set: { ...set, img: new Uint8Array(set.img) } };
}

/** The caller reuses the buffers of an acked delivery (they are zeroed). */
export function reuseBuffers(delivered: Record<string, unknown>): void {
  const img = (delivered.set as Record<string, unknown> | undefined)?.img;
  if (img instanceof Uint8Array) img.fill(0);
}
