/**
 * Planning and sequencing of a group of batches (docs/design/invariants.md, "Acks", step 1): read
 * the items' markers, take each item's state from the writer's cache while its marker is the body
 * this writer put, read the others from storage (and the writer's own unmerged rows), validate
 * and assign seqs. Writes nothing. Called by ShardWriter (lib/log/write/writer.ts) with its cache.
 */
import type { Clock } from '../../clock.ts';
import type { CoordStore } from '../../coord/types.ts';
import { SENTINEL_KEY } from '../../coord/choose.ts';
import { CorruptError, UnavailableError } from '../../errors.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { LeaseScope } from './coord-holder.ts';
import { guard } from '../../guards.ts';
import type { Ack, EventRow, PreparedBatch } from '../../types.ts';
import { deletedThrough } from '../deleted.ts';
import { itemKey } from '../layout.ts';
import type { LogReader } from '../read/reader.ts';
import { sqlIn } from '../tables.ts';
import type { Markers } from './markers.ts';
import { ownVisible, type OwnGeneration } from './own-memory.ts';
import { buildTracks, cloneTrack, sequence, TRACK_COLUMNS, type ItemTrack } from './sequence.ts';

export interface Request {
  batches: PreparedBatch[];
  resolve(acks: Ack[]): void;
  reject(e: unknown): void;
}

/** Placeholder epoch for a validation pass before the slot is taken; never written. */
export const PENDING_EPOCH = 'pending';

/** What planGroup reads: the writer's context, its cache of item tracks, its own rows and markers. */
export interface PlanContext {
  ctx: { reader: LogReader; objects: ObjectStore; coord: (o?: { create: boolean }) => Promise<CoordStore>; leaseScope: (o: { create: boolean }) => Promise<LeaseScope>; coordUnchanged: (scope: LeaseScope) => Promise<boolean> };
  opts: { clock: Clock };
  /** Tracks of items this writer sequenced (LRU, `cachedItems`), with the marker body they hold under. */
  tracks: Map<string, { track: ItemTrack; marker: string }>;
  /** The writer's own unmerged generations' light rows (lib/log/write/own-memory.ts). */
  ownRows: Map<string, OwnGeneration>;
  markers: Markers;
}

/**
 * The log's records were rebuilt under this writer (UNAVAILABLE: a retry takes a slot of the new
 * records). The writer's slot is of the old scope, whose lease checks no longer fence it.
 */
export class RecordsRebuiltError extends UnavailableError {}

/**
 * The group's markers, and the check that the store still holds the log's records: in the lease
 * table its sentinel comes in the same request (a table replaced or lost under running writers
 * has none: every item would look new); a SQLite file checks it was not deleted or replaced. A
 * store whose records a repair rebuilt meanwhile is forgotten, and the group is retried.
 */
async function markersOf(pc: PlanContext, coord: CoordStore, keys: string[], scope: LeaseScope): Promise<Map<string, string | null>> {
  try {
    const bodies = await coord.getMany(coord.kind === 'table' ? [...keys, SENTINEL_KEY] : keys);
    if (coord.kind === 'table' && bodies.get(SENTINEL_KEY) == null) {
      throw new CorruptError(`the lease table no longer holds the records of the log ${pc.ctx.objects.baseUri} (replaced or lost?); nothing was written: stop the log's writers, then run \`dgcl repair\` (docs/operations.md, "A lost or new lease table")`);
    }
    return bodies;
  } catch (e) {
    if (e instanceof CorruptError && !(await pc.ctx.coordUnchanged(scope))) {
      throw new RecordsRebuiltError(`the records of the log ${pc.ctx.objects.baseUri} were rebuilt (a repair or adoption) while this writer ran; nothing was written, retry`, { cause: e });
    }
    throw e;
  }
}

export async function planGroup(pc: PlanContext, group: Request[], writerEpoch: string) {
  const itemIds = [...new Set(group.flatMap((r) => r.batches.map((b) => b.itemId)))];
  // Item markers say which writer last began writing each item. A cached track is good
  // while the marker is exactly the body this writer put (nobody else wrote the item since);
  // no marker means no writer ever wrote it. Only the other items are read from storage
  // (base + other writers' shards, which is what makes an ack's cost grow with writers).
  const markers = new Map<string, string | null>();
  /** Items whose marker is one this writer put and whose state it has cached: the body. */
  const ownMarkers = new Map<string, string>();
  const tracks = new Map<string, ItemTrack>();
  const toRead: string[] = [];
  // One request for the group's markers in the lease table; one GET each as objects. The
  // validation pass before the slot is taken must write nothing, not even the choice record.
  const create = { create: writerEpoch !== PENDING_EPOCH };
  const scope = await pc.ctx.leaseScope(create);
  const coord = await pc.ctx.coord(create);
  const keys = itemIds.map(itemKey);
  const bodies = await markersOf(pc, coord, keys, scope);
  for (const [i, id] of itemIds.entries()) {
    const marker = bodies.get(keys[i]!) ?? null;
    markers.set(id, marker);
    const cached = pc.tracks.get(id);
    if (cached && writerEpoch !== PENDING_EPOCH && (!guard('cached-track-marker-check') || (marker === cached.marker && marker.startsWith(`${writerEpoch} `)))) {
      tracks.set(id, cached.track);
      ownMarkers.set(id, cached.marker);
      continue;
    }
    // Not (or no longer) ours alone: forget the copy before anything else can fail, so no
    // later attempt trusts it once our marker is back.
    pc.tracks.delete(id);
    if (marker === null) tracks.set(id, cloneTrack(undefined));
    else toRead.push(id);
  }
  if (toRead.length > 0) {
    const wanted = new Set(toRead);
    // Snapshot the own rows before reading storage: a background merge that finishes during
    // the read moves them into the base (maybe after we read it) and drops them from memory.
    const own = [...pc.ownRows.entries()];
    const skip = new Set(own.map(([name]) => name));
    const { existing, tombstones, visible } = await pc.ctx.reader.read(
      async (listing) => ({
        existing: await pc.ctx.reader.scanListing(listing, sqlIn('item_id', toRead), TRACK_COLUMNS, skip, { scope: { items: toRead } }),
        tombstones: listing.tombstones,
        visible: new Set(listing.visible.map((v) => v.name)),
      }),
      skip,
      // No damage probe here: it would scan the log while every append waits (a read names it).
      'none',
    );
    for (const [, mine] of ownVisible(own, visible)) for (const id of wanted) for (const r of mine.get(id) ?? []) if (r.item_seq > deletedThrough(tombstones, id)) existing.push(r);
    // A deleted item keeps its deleted seqs after the purge dropped its tombstone: a new
    // incarnation continues after them (its ids never repeat a deleted incarnation's).
    // Read for items with a marker (someone began writing them) but no visible row: deleted,
    // or a creation that never committed.
    const withRows = new Set(existing.map((r) => r.item_id));
    const floors = await pc.markers.floorsOf(toRead.filter((id) => !withRows.has(id)));
    const read = buildTracks(existing, (id) => Math.max(deletedThrough(tombstones, id), floors.get(id) ?? 0), toRead);
    for (const id of toRead) tracks.set(id, read.get(id) ?? cloneTrack(undefined));
  }
  const eventTsUs = pc.opts.clock.nowMs() * 1000;
  const rows: EventRow[] = [];
  const plans: Array<{ req: Request; acks: Ack[]; fresh: Ack[] }> = [];
  for (const req of group) {
    try {
      const overlay = new Map<string, ItemTrack>();
      const acks: Ack[] = [];
      const fresh: Ack[] = [];
      const reqRows: EventRow[] = [];
      for (const b of req.batches) {
        const t = overlay.get(b.itemId) ?? cloneTrack(tracks.get(b.itemId));
        overlay.set(b.itemId, t);
        const { ack, rows: batchRows } = sequence(b, t, writerEpoch, eventTsUs);
        acks.push(ack);
        if (batchRows.length > 0) {
          fresh.push(ack);
          reqRows.push(...batchRows);
        }
      }
      for (const [id, t] of overlay) tracks.set(id, t);
      rows.push(...reqRows);
      plans.push({ req, acks, fresh });
    } catch (e) {
      req.reject(e);
    }
  }
  return { epoch: writerEpoch, itemIds, rows, plans, tracks, markers, ownMarkers };
}
