/**
 * Deleting an item (docs/design/deletion.md), as ShardWriter.deleteItem runs it between commits
 * (lib/log/write/writer.ts): put the item's marker, read its last visible seq (storage and the
 * writer's own rows), and write the deleted-seq record and the tombstone. The guarded decision is
 * lib/log/write/delete-guard.ts.
 */
import type { Clock } from '../../clock.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { guard } from '../../guards.ts';
import { deletedThrough } from '../deleted.ts';
import { floorKey, tombKey, type Tombstone } from '../layout.ts';
import { sqlIn } from '../tables.ts';
import { guardDecision } from './delete-guard.ts';
import { DELETED_MARKER } from './markers.ts';
import { ownVisible } from './own-memory.ts';
import type { PlanContext } from './plan.ts';
import { TRACK_COLUMNS } from './sequence.ts';

/** What a delete reads and writes: the plan's context, and the object store for its records. */
export interface DeleteContext extends PlanContext {
  ctx: PlanContext['ctx'] & { objects: ObjectStore };
  opts: { clock: Clock };
}

/** Delete `itemId` now (between commits: ShardWriter.deleteItem runs it as an exclusive job). */
export async function deleteItemNow(dc: DeleteContext, itemId: string, guardSeq?: number): Promise<{ itemId: string; deleted: boolean; throughSeq: number }> {
  dc.tracks.delete(itemId);
  await dc.markers.putMarker(itemId, DELETED_MARKER);
  const own = [...dc.ownRows.entries()];
  const skip = new Set(own.map(([name]) => name));
  const { rows, tombstones, visible } = await dc.ctx.reader.read(
    async (listing) => ({
      rows: await dc.ctx.reader.scanListing(listing, sqlIn('item_id', [itemId]), TRACK_COLUMNS, skip, { scope: { items: [itemId] } }),
      tombstones: listing.tombstones,
      visible: new Set(listing.visible.map((v) => v.name)),
    }),
    skip,
    'none',
  );
  const gone = deletedThrough(tombstones, itemId);
  for (const [, mine] of ownVisible(own, visible)) for (const r of mine.get(itemId) ?? []) if (r.item_seq > gone) rows.push(r);
  let throughSeq: number;
  if (guardSeq !== undefined && guard('delete-guard')) {
    // The deleted-seq records are read whenever a guard is given, rows or not: the purge
    // drops the tombstone but keeps them, so they alone tell a retry from a new incarnation.
    const decision = guardDecision(itemId, guardSeq, { tombstoned: gone, floors: await dc.markers.floorSeqs(itemId), visibleSeqs: rows.map((r) => r.item_seq) });
    if (!decision.deleted) return { itemId, deleted: false, throughSeq: decision.throughSeq };
    throughSeq = decision.throughSeq;
  } else {
    if (rows.length === 0) return { itemId, deleted: false, throughSeq: Math.max(gone, (await dc.markers.floorsOf([itemId])).get(itemId) ?? 0) };
    throughSeq = rows.reduce((m, r) => Math.max(m, r.item_seq), 0);
  }
  const tomb: Tombstone = { itemId, throughSeq, deletedAtMs: dc.opts.clock.nowMs() };
  // The floor first: once the tombstone exists the item may be purged at any time.
  await dc.ctx.objects.putIfAbsent(floorKey(itemId, throughSeq), '');
  await dc.ctx.objects.putIfAbsent(tombKey(itemId, throughSeq), JSON.stringify(tomb));
  return { itemId, deleted: true, throughSeq };
}
