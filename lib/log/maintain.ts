/**
 * The elected maintainer's pass over one experiment (docs/design/shards.md, "Maintenance"):
 * finish interrupted retirements, merge sealed generations, take over and merge slots whose
 * writer died, delete zombie generations, compact the base, refresh its scalar indexes, prune old
 * versions, and delete stale claims and seals.
 */
import { Index } from '@lancedb/lancedb';
import type { Clock } from '../clock.ts';
import { LeaseHeldError } from '../errors.ts';
import { acquireMaintainer, acquireWriterSlot, LeaseKeeper, slotKey } from '../lease/slots.ts';
import { isFree } from '../lease/rules.ts';
import type { LeaseStore } from '../lease/types.ts';
import type { ObjectStore } from '../storage/objects.ts';
import type { MaintenanceReport } from '../api.ts';
import { CLAIMS_DIR, genKey, META_DIR, parseMetaNames, parseShardName, retiredKey, sealKey, shardPrefix } from './layout.ts';
import { mergeGeneration, retireGeneration, type MergeHooks } from './merge.ts';
import type { LogReader } from './reader.ts';
import type { LanceTables } from './tables.ts';
import { sealOwnEpoch, sealPredecessors } from './seal.ts';

export interface MaintainOptions {
  pipeline: string;
  experiment: string;
  owner: string;
  slots: number;
  leaseTtlMs: number;
  /** Keep base versions younger than this (readers may still be on them). */
  versionRetentionMs: number;
  /** Claims only matter while duplicates of a batch are in flight. */
  claimRetentionMs: number;
  clock: Clock;
  hooks?: MergeHooks;
}

export const INDEXED_COLUMNS = ['item_id', 'event_id'] as const;

export async function maintain(
  ctx: { tables: LanceTables; objects: ObjectStore; reader: LogReader; leases: LeaseStore },
  o: MaintainOptions,
): Promise<MaintenanceReport> {
  const report: MaintenanceReport = {
    experiment: `${o.pipeline}/${o.experiment}`,
    ran: false,
    mergedShards: [],
    mergedRows: 0,
    compacted: null,
    indexes: [],
    prunedVersions: 0,
    deletedClaims: 0,
  };
  let lease;
  try {
    lease = await acquireMaintainer(ctx.leases, { pipeline: o.pipeline, experiment: o.experiment, owner: o.owner, ttlMs: o.leaseTtlMs });
  } catch (e) {
    if (e instanceof LeaseHeldError) return { ...report, heldBy: e.holder?.owner ?? 'another maintainer' };
    throw e;
  }
  const keeper = new LeaseKeeper(ctx.leases, lease, o.leaseTtlMs);
  const mctx = { ...ctx, hooks: o.hooks };
  try {
    report.ran = true;
    // 1. Orphaned slots: unsealed generations whose writer's lease is free. Take the slot (a new
    //    epoch seals the old one), so its data becomes immutable and mergeable below.
    let listing = await ctx.reader.listShards();
    const orphanSlots = new Set(listing.visible.filter((v) => !v.sealed).map((v) => v.slot));
    for (const slot of orphanSlots) {
      const rec = await ctx.leases.read(slotKey(o.pipeline, o.experiment, slot));
      if (rec && !isFree(rec, o.clock.nowMs())) continue;
      try {
        const taken = await acquireWriterSlot(ctx.leases, {
          pipeline: o.pipeline,
          experiment: o.experiment,
          owner: o.owner,
          slots: o.slots,
          ttlMs: o.leaseTtlMs,
          slot,
        });
        await sealPredecessors(ctx, slot, taken.lease.epoch, taken.writerEpoch, o.clock);
        await sealOwnEpoch(ctx, taken.writerEpoch, o.clock);
        await ctx.leases.release(taken.lease);
      } catch (e) {
        if (!(e instanceof LeaseHeldError)) throw e;
      }
    }
    if (orphanSlots.size > 0) listing = await ctx.reader.listShards();

    // 2. Finish retirements a crash interrupted.
    for (const r of listing.retired) await retireGeneration(mctx, r.name, null);

    // 3. Merge sealed generations; delete generations no reader may see.
    for (const v of listing.visible.filter((s) => s.sealed)) {
      report.mergedRows += await mergeGeneration(mctx, v.name, v.version);
      report.mergedShards.push(v.name);
    }
    for (const z of listing.invisible) {
      ctx.tables.forget(z.name);
      await ctx.objects.deletePrefix(shardPrefix(z.name));
      await ctx.objects.delete(genKey(z.name));
    }

    // 4. Base: compaction + prune, then scalar indexes.
    const base = await ctx.tables.base((await ctx.reader.listShards()).baseExists);
    if (base) {
      const stats = await base.optimize({ cleanupOlderThan: new Date(o.clock.nowMs() - o.versionRetentionMs) });
      report.compacted = { fragmentsRemoved: stats.compaction.fragmentsRemoved, fragmentsAdded: stats.compaction.fragmentsAdded };
      report.prunedVersions = stats.prune.oldVersionsRemoved;
      const have = new Set((await base.listIndices()).flatMap((i) => i.columns));
      for (const col of INDEXED_COLUMNS) {
        if (!have.has(col) && (await base.countRows()) > 0) await base.createIndex(col, { config: Index.btree() });
      }
      report.indexes = (await base.listIndices()).map((i) => i.name);
    }

    // 5. Clean-up of small objects.
    report.deletedClaims = await ctx.objects.deleteOlderThan(CLAIMS_DIR, o.clock.nowMs() - o.claimRetentionMs);
    await cleanupMeta(ctx);
    return report;
  } finally {
    keeper.stop();
    await ctx.leases.release(keeper.current()).catch(() => undefined);
  }
}

/**
 * Delete seals of epochs with no generation left (keeping each slot's highest, which hides any
 * later zombie generation of older epochs) and retired markers whose data is gone.
 */
async function cleanupMeta(ctx: { objects: ObjectStore; reader: LogReader }): Promise<void> {
  const listing = await ctx.reader.listShards();
  const live = new Set([...listing.visible, ...listing.invisible, ...listing.retired].map((s) => s.writerEpoch));
  const liveShards = new Set([...listing.visible, ...listing.invisible, ...listing.retired].map((s) => s.name));
  const { sealEpochs, retired } = parseMetaNames(await ctx.objects.list(META_DIR));
  const maxPerSlot = new Map<number, number>();
  for (const e of sealEpochs) {
    const p = parseShardName(`${e}-g000000`);
    if (p) maxPerSlot.set(p.slot, Math.max(maxPerSlot.get(p.slot) ?? 0, p.epoch));
  }
  for (const e of sealEpochs) {
    const p = parseShardName(`${e}-g000000`);
    if (!p || live.has(e) || maxPerSlot.get(p.slot) === p.epoch) continue;
    await ctx.objects.delete(sealKey(e));
  }
  for (const r of retired) if (!liveShards.has(r)) await ctx.objects.delete(retiredKey(r));
}
