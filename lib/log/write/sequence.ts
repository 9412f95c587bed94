/**
 * Sequencing, pure: what a writer knows of an item (built from its visible rows), the checks
 * a batch must pass against it, and the seqs it gets. Duplicates are answered from the item's
 * rows with the seqs of the first copy.
 */
import { toRows } from '../../batch.ts';
import { InternalError, ItemExistsError, ItemNotFoundError, ItemTerminalError } from '../../errors.ts';
import { eventId, incarnationCheckpointId } from '../../ids.ts';
import type { Ack, EventRow, PreparedBatch } from '../../types.ts';

/** What the writer needs to know of an item to validate and sequence a batch. */
export interface ItemTrack {
  created: boolean;
  rootItemId: string | null;
  parentItemId: string | null;
  terminal: boolean;
  lastSeq: number;
  /**
   * The seq the item's creation follows: 0 for an item created once; for an item re-created
   * after a deletion, the last deleted seq. Its batches' ids are bound to it (incarnate).
   */
  base: number;
  /** checkpoint_id -> (event_id -> seq) */
  checkpoints: Map<string, Map<string, number>>;
}

/** Columns the writer reads to sequence batches: no values, no blobs. */
export const TRACK_COLUMNS = [
  'event_id',
  'item_id',
  'root_item_id',
  'parent_item_id',
  'item_seq',
  'checkpoint_id',
  'event_type',
  'writer_epoch',
] as const;

/** Validate one batch against its item and give it seqs; mutates the track. */
export function sequence(
  b: PreparedBatch,
  t: ItemTrack,
  writerEpoch: string,
  eventTsUs: number,
): { ack: Ack; rows: EventRow[] } {
  // A deleted item continues after its last deleted seq; a new creation starts there.
  b = incarnate(b, t.created ? t.base : t.lastSeq);
  const seen = t.checkpoints.get(b.checkpointId);
  if (seen) {
    // An ifMissing creation the item did not need was never written: it is not in `seen`.
    const events = b.create?.ifMissing ? b.events.filter((e) => e.eventType !== 'ITEM_CREATED' || seen.has(e.eventId)) : b.events;
    const eventIds = events.map((e) => e.eventId);
    const seqs = eventIds.map((id) => seen.get(id));
    if (seqs.some((s) => s === undefined)) {
      throw new InternalError(`checkpoint ${b.checkpointId} of item ${b.itemId} is only partly in the log`);
    }
    return {
      ack: { itemId: b.itemId, checkpointId: b.checkpointId, eventIds, firstSeq: seqs[0] ?? t.lastSeq + 1, lastSeq: seqs.at(-1) ?? t.lastSeq, duplicate: true },
      rows: [],
    };
  }
  if (b.create?.ifMissing && t.created) {
    // The item exists: the batch applies without its creation.
    b = { ...b, create: null, events: b.events.filter((e) => e.eventType !== 'ITEM_CREATED') };
    if (b.events.length === 0) {
      // Nothing else to write: an ack naming no event, like a duplicate (nothing was written).
      return { ack: { itemId: b.itemId, checkpointId: b.checkpointId, eventIds: [], firstSeq: t.lastSeq + 1, lastSeq: t.lastSeq, duplicate: true }, rows: [] };
    }
  }
  const eventIds = b.events.map((e) => e.eventId);
  if (b.create && t.created) {
    throw new ItemExistsError(`item ${JSON.stringify(b.itemId)} already exists; only its first batch may have "create" (or use create: "ifMissing")`, b.itemId, { field: 'create' });
  }
  if (!b.create && !t.created) {
    throw new ItemNotFoundError(`item ${JSON.stringify(b.itemId)} does not exist: its first batch must have "create"`, b.itemId, { field: 'itemId' });
  }
  if (t.terminal) {
    throw new ItemTerminalError(`item ${JSON.stringify(b.itemId)} is terminal: no event may follow a TERMINAL event`, b.itemId, { field: 'itemId' });
  }
  // No step order check: a valid batch is always written or answered duplicate, also when it
  // completes a step below one its item already completed (a retry after an unknown outcome, a
  // redelivery, a standard queue). The cursor is chosen by step order (lib/step-order.ts), so
  // such a batch does not move it back; durable steps refuse running a step out of order.
  const firstSeq = t.lastSeq + 1;
  const rows = toRows(b, {
    firstSeq,
    writerEpoch,
    eventTsUs,
    ...(t.rootItemId !== null ? { rootItemId: t.rootItemId, parentItemId: t.parentItemId } : {}),
  });
  const ids = new Map<string, number>();
  for (const r of rows) ids.set(r.event_id, r.item_seq);
  t.checkpoints.set(b.checkpointId, ids);
  t.lastSeq = firstSeq + rows.length - 1;
  if (b.create) {
    t.base = firstSeq - 1;
    t.created = true;
    t.rootItemId = b.create.rootItemId;
    t.parentItemId = b.create.parentItemId;
  }
  if (b.events.some((e) => e.eventType === 'TERMINAL')) t.terminal = true;
  return {
    ack: { itemId: b.itemId, checkpointId: b.checkpointId, eventIds, firstSeq, lastSeq: t.lastSeq, duplicate: false },
    rows,
  };
}

/** The batch with ids bound to the item's incarnation (itself for an item created once). */
export function incarnate(b: PreparedBatch, base: number): PreparedBatch {
  if (base === 0) return b;
  const cp = incarnationCheckpointId(b.checkpointId, base);
  return { ...b, checkpointId: cp, events: b.events.map((e, i) => ({ ...e, eventId: eventId(cp, i) })) };
}

function emptyTrack(): ItemTrack {
  return { created: false, rootItemId: null, parentItemId: null, terminal: false, lastSeq: 0, base: 0, checkpoints: new Map() };
}

export function cloneTrack(t: ItemTrack | undefined): ItemTrack {
  if (!t) return emptyTrack();
  return { ...t, checkpoints: new Map(t.checkpoints) };
}

/**
 * Tracks of items from their visible rows (deleted rows already hidden). `deleted` gives an
 * item's last deleted seq: a deleted item continues after it (and has no track without it).
 */
export function buildTracks(rows: readonly EventRow[], deleted: (itemId: string) => number = () => 0, itemIds: readonly string[] = []): Map<string, ItemTrack> {
  const tracks = new Map<string, ItemTrack>();
  // Copies of one event: keep the smallest seq, as the fold does.
  const best = new Map<string, EventRow>();
  for (const r of rows) {
    const b = best.get(r.event_id);
    if (!b || r.item_seq < b.item_seq || (r.item_seq === b.item_seq && r.writer_epoch < b.writer_epoch)) best.set(r.event_id, r);
  }
  for (const r of best.values()) {
    let t = tracks.get(r.item_id);
    if (!t) tracks.set(r.item_id, (t = emptyTrack()));
    if (r.event_type === 'ITEM_CREATED') {
      t.base = r.item_seq - 1;
      t.created = true;
      t.rootItemId = r.root_item_id;
      t.parentItemId = r.parent_item_id;
    } else if (t.rootItemId === null) {
      t.rootItemId = r.root_item_id;
      t.parentItemId = r.parent_item_id;
    }
    if (r.event_type === 'TERMINAL') t.terminal = true;
    t.lastSeq = Math.max(t.lastSeq, r.item_seq);
    let ck = t.checkpoints.get(r.checkpoint_id);
    if (!ck) t.checkpoints.set(r.checkpoint_id, (ck = new Map()));
    ck.set(r.event_id, r.item_seq);
  }
  for (const id of itemIds) {
    const d = deleted(id);
    if (d === 0) continue;
    let t = tracks.get(id);
    if (!t) tracks.set(id, (t = emptyTrack()));
    t.lastSeq = Math.max(t.lastSeq, d);
  }
  return tracks;
}
