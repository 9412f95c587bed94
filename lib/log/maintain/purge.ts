/**
 * Maintenance's purge of deleted items (docs/design/deletion.md). For each tombstone older than
 * the retention: wait while any visible shard generation still holds the item's deleted rows
 * (a live writer's, merged by it later; sealed ones were merged earlier in the same pass); else
 * rewrite the base fragments holding them without them, in ONE Lance commit, delete the
 * item's claims, and drop the tombstone once the base holds none of them any more and the last
 * removal is the retention old (a merger stalled across the purge may still bring them back
 * until then, hidden by the tombstone and removed again: "Stalled mergers" there). The rows'
 * bytes leave the disk when the compaction step's cleanup prunes the versions before the purge
 * (after `versionRetentionMs`). The `item_id` index is rebuilt after a purge that removed rows,
 * since its files hold the ids of the rows it indexed.
 */
import { guard } from '../../guards.ts';
import { Index } from '@lancedb/lancedb';
import type { Clock } from '../../clock.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { claimKey, META_DIR, parseMetaNames, PURGED_DIR, purgedDir, tombKey, type Tombstone } from '../layout.ts';
import { CorruptError } from '../../errors.ts';
import type { CoordStore } from '../../coord/types.ts';
import type { LogReader } from '../read/reader.ts';
import { sqlString, type LanceTables, type Table } from '../tables.ts';
import { dropStaleDocs } from '../projection/build.ts';

export interface PurgeResult {
  purgedItems: number;
  pendingDeletions: number;
  /** Tombstones whose body is not a tombstone (or not the one its name says): not purged. */
  unreadable: string[];
  /** Removal record folders of dropped tombstones that could not be deleted (tried again next pass). */
  leftovers: string[];
}

type Ctx = { tables: LanceTables; objects: ObjectStore; reader: LogReader; coord: (o?: { create: boolean }) => Promise<CoordStore> };

export async function purgeDeleted(ctx: Ctx, o: { clock: Clock; deletionRetentionMs: number }): Promise<PurgeResult> {
  const out: PurgeResult = { purgedItems: 0, pendingDeletions: 0, unreadable: [], leftovers: [] };
  const meta = parseMetaNames(await ctx.objects.list(META_DIR));
  if (meta.tombNames.length === 0) {
    out.leftovers = await sweepRecords(ctx.objects, new Set());
    return out;
  }
  const listing = await ctx.reader.listingOf(meta);
  const base = await ctx.tables.base(listing.baseExists);
  /** Tombstones whose rows are gone from every dataset: dropped once the pass cleaned up after them. */
  const done: string[] = [];
  for (const [i, name] of meta.tombNames.entries()) {
    // Local reads are synchronous (lib/storage/local.ts): give the event loop a turn now and
    // then, or many pending deletes would hold it for the whole loop (lease renewals included).
    if (i % 256 === 255) await new Promise((r) => setImmediate(r));
    const key = `${META_DIR}/${name}`;
    const body = await ctx.objects.get(key);
    if (body === null) continue;
    const tomb = parseTombstone(body, key);
    if (!tomb) {
      // reported after the others were purged: one must not stop them
      out.unreadable.push(key);
      continue;
    }
    if (o.clock.nowMs() - tomb.deletedAtMs < o.deletionRetentionMs) {
      out.pendingDeletions++;
      continue;
    }
    const doomed = `item_id = ${sqlString(tomb.itemId)} AND item_seq <= ${tomb.throughSeq}`;
    // Shard generations are their writers' datasets: only merges empty them. A takeover in
    // progress (pending) may hide one: wait for its seal too.
    let inShards = listing.pending.length > 0 && guard('purge-waits-for-shards');
    for (const v of guard('purge-waits-for-shards') ? listing.visible : []) {
      if (inShards) break;
      inShards = (await (await ctx.reader.shardTable(v)).countRows(doomed)) > 0;
    }
    if (inShards) {
      out.pendingDeletions++;
      continue;
    }
    // A merger that checked its epoch before a takeover, then stalled (a frozen Lambda
    // container, a long pause), may still commit the item's rows into the base after the
    // takeover merged its generation and this purge removed them. While the tombstone stands
    // they stay hidden, and a later pass removes them again; so the tombstone stays until the
    // last removal is the retention old: only a merger stalled longer than that can bring them
    // back (docs/design/deletion.md, "Stalled mergers").
    const records = purgedDir(name);
    let lastRemovalMs: number | null;
    try {
      lastRemovalMs = await latestRemoval(ctx.objects, records);
    } catch (e) {
      // Not one of ours: this tombstone waits (reported), the others go on.
      if (!(e instanceof CorruptError)) throw e;
      out.unreadable.push(`${records}/: ${e.message}`);
      continue;
    }
    if (base && (await base.countRows(doomed)) > 0) {
      // Recorded before the commit: the grace runs from before the rows went.
      lastRemovalMs = o.clock.nowMs();
      await ctx.objects.putIfAbsent(`${records}/${String(lastRemovalMs).padStart(15, '0')}`, '');
      const checkpoints = await purgeBase(base, doomed);
      // The purge commit must outlive a power loss before the tombstone goes (local roots).
      if (checkpoints.length > 0) await ctx.tables.sync('base');
      if (checkpoints.length > 0) {
        const coord = await ctx.coord({ create: false });
        for (const cp of checkpoints) await coord.delete(claimKey(cp));
      }
      if ((await base.countRows(doomed)) > 0) {
        out.pendingDeletions++;
        continue;
      }
    }
    if (lastRemovalMs === null) {
      // No removal on record (the rows never reached the base, or a tombstone from before these
      // records): a merger may still be on its way with them, so the grace starts now.
      lastRemovalMs = o.clock.nowMs();
      await ctx.objects.putIfAbsent(`${records}/${String(lastRemovalMs).padStart(15, '0')}`, '');
    }
    if (o.clock.nowMs() - lastRemovalMs < o.deletionRetentionMs) {
      out.pendingDeletions++;
      continue;
    }
    done.push(key);
  }
  if (done.length > 0 && !base && guard('purge-relists-before-drop')) {
    // No base at the listing: a writer may have made it since by merging a generation counted
    // above, whose rows this pass then never read (and a count of a generation whose files are
    // being deleted may find none). The base, once it exists, is read at its latest version
    // after the generations' counts, so only its appearance needs a second look.
    if (parseMetaNames(await ctx.objects.list(META_DIR)).baseExists) {
      out.pendingDeletions += done.length;
      done.length = 0;
    }
  }
  if (base && done.length > 0) {
    // Before any tombstone goes, whether or not this pass purged the rows (a pass that stopped
    // after its purge commit left this undone, and its tombstone is the only sign): the item_id
    // index keeps the ids of the rows it indexed (rebuilt without them; its old files go with
    // the old versions, like the purged fragments), and so do the listing projection's
    // documents of the rewritten fragments.
    if ((await base.listIndices()).some((i) => i.columns.includes('item_id'))) {
      await base.createIndex('item_id', { config: Index.btree(), replace: true });
    }
    await dropStaleDocs(ctx.objects, base);
  }
  for (const key of done) {
    // The records first: a pass that stops between the two finds a tombstone without records,
    // and waits the grace again (the other order would leave records nothing ever deletes).
    await ctx.objects.deletePrefix(purgedDir(key.slice(META_DIR.length + 1)));
    await ctx.objects.delete(key);
    out.purgedItems++;
  }
  // Last: a leftover that cannot be deleted must not stop the purge.
  out.leftovers = await sweepRecords(ctx.objects, new Set(meta.tombNames));
  return out;
}

/**
 * Delete the removal records of tombstones not in `tombNames` (the meta listing's): dropped
 * ones, whose records a PUT landing late (or a version before the records, which drops
 * tombstones without them) left behind. Deleting a live tombstone's records (made
 * after the listing) is harmless: without them it waits one grace more.
 */
export async function sweepRecords(objects: ObjectStore, tombNames: ReadonlySet<string>): Promise<string[]> {
  const failed: string[] = [];
  for (const name of await objects.list(PURGED_DIR)) {
    if (tombNames.has(name)) continue;
    try {
      await objects.deletePrefix(`${PURGED_DIR}/${name}`);
    } catch (e) {
      failed.push(`${PURGED_DIR}/${name} (${e instanceof Error ? e.message : String(e)})`);
    }
  }
  return failed;
}

/** The latest removal on record under `records` (ms on the maintainer's clock), or null. */
async function latestRemoval(objects: ObjectStore, records: string): Promise<number | null> {
  let latest: number | null = null;
  for (const name of await objects.list(records)) {
    const ms = Number(name);
    if (!/^\d{15}$/.test(name) || !Number.isSafeInteger(ms)) throw new CorruptError(`purge record ${records}/${name} is not a time`);
    latest = Math.max(latest ?? 0, ms);
  }
  return latest;
}

/** The tombstone, or null when the body is not one. */
function parseTombstone(body: string, key: string): Tombstone | null {
  try {
    const t = JSON.parse(body) as Tombstone;
    if (typeof t.itemId === 'string' && Number.isSafeInteger(t.throughSeq) && typeof t.deletedAtMs === 'number' && key === tombKey(t.itemId, t.throughSeq)) return t;
  } catch {
    // not JSON
  }
  return null;
}

/**
 * Remove the rows matching `doomed` from the base in one commit, rewriting the fragments that
 * hold them: merge-insert the fragments' other rows onto themselves (matched by event_id:
 * updated, i.e. rewritten into a new fragment) and delete the doomed rows as "not matched by
 * source". Every row of those fragments is then deleted, so Lance drops the fragments and the
 * cleanup of old versions removes their files. Row ids are `fragment << 32 | offset` (the base
 * is created without stable row ids). Returns the purged rows' checkpoint ids.
 */
async function purgeBase(base: Table, doomed: string): Promise<string[]> {
  const hits = await base.query().where(doomed).withRowId().select(['checkpoint_id']).toArrow();
  if (hits.numRows === 0) return [];
  const rowIds = hits.getChild('_rowid')!.toArray() as BigInt64Array | BigUint64Array;
  const fragments = new Set<bigint>();
  for (const id of rowIds) fragments.add(BigInt(id) >> 32n);
  const inFragments = [...fragments].map((f) => `(_rowid >= ${f << 32n} AND _rowid < ${(f + 1n) << 32n})`).join(' OR ');
  const keep = await base.query().where(`(${inFragments}) AND NOT (${doomed})`).toArrow();
  if (keep.numRows === 0) await base.delete(doomed); // the fragments hold nothing else: all deleted, dropped
  else await base.mergeInsert('event_id').whenMatchedUpdateAll().whenNotMatchedBySourceDelete({ where: doomed }).execute(keep as never);
  const checkpoints = new Set<string>();
  const col = hits.getChild('checkpoint_id')!;
  for (let i = 0; i < hits.numRows; i++) checkpoints.add(col.get(i) as string);
  return [...checkpoints];
}
