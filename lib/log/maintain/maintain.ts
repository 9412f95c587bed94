/**
 * The elected maintainer's pass over one experiment (docs/design/shards.md, "Maintenance"):
 * finish interrupted retirements, merge sealed generations, take over and merge slots whose
 * writer died, delete zombie generations, sweep what dead snapshot attempts left, compact the
 * base, refresh its scalar and full-text indexes, prune old versions, and delete stale claims,
 * seals and fences. Steps are independent:
 * one that fails is reported and the others still run (each is idempotent; the next pass retries
 * it).
 */
import type { LogContext } from '../write/log-context.ts';
import { guard } from '../../guards.ts';
import { Index } from '@lancedb/lancedb';
import type { Clock } from '../../clock.ts';
import { CorruptError, DgclError, FencedError, LeaseHeldError, UnavailableError } from '../../errors.ts';
import { acquireMaintainer, acquireWriterSlot, LeaseKeeper, slotKey } from '../../lease/slots.ts';
import { isFree } from '../../lease/rules.ts';
import type { Lease } from '../../lease/types.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { MaintenanceReport, MaintenanceStep } from '../../api.ts';
import { fenceKey, genKey, maxEpochPerSlot, META_DIR, parseMetaNames, parseShardName, retiredKey, sealKey, SHARDS_DIR, shardPrefix, type ShardName } from '../layout.ts';
import { mergeGeneration, retireGeneration, type MergeHooks } from './merge.ts';
import { refreshProjection } from '../projection/build.ts';
import { purgeDeleted, sweepRecords } from './purge.ts';
import type { LogReader, ShardListing } from '../read/reader.ts';
import { TEXT_COLUMNS, textIndexConfig, textIndexName } from '../text-index.ts';
import { sealOwnEpoch, sealPredecessors } from './seal.ts';
import { pruneCutoffMs } from './tagged.ts';
import { sweepLeftovers } from '../snapshot/catalog.ts';

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
  /** Deleted items are purged once their tombstone is this old. */
  deletionRetentionMs: number;
  clock: Clock;
  hooks?: MergeHooks;
  /** Told after each step (a skipped one too), so a caller can show progress; never awaited. */
  onProgress?: MaintainProgress;
}

/** `done` of `total` steps are over, the last one `step`; `total` grows once the merges are known. */
export type MaintainProgress = (step: MaintenanceStep, done: number, total: number) => void;

/** Steps every pass runs besides one `merge` per sealed generation. */
const FIXED_STEPS: readonly MaintenanceStep[] = ['orphans', 'retirements', 'zombies', 'deletions', 'snapshots', 'compaction', 'indexes', 'projection', 'claims', 'meta'];

export const INDEXED_COLUMNS = ['item_id', 'event_id'] as const;

type Ctx = LogContext;

/** A report of a pass over `experiment` ("pipeline/experiment") that has done nothing yet. */
export function emptyMaintenanceReport(experiment: string): MaintenanceReport {
  return {
    experiment,
    ran: false,
    mergedShards: [],
    mergedRows: 0,
    compacted: null,
    indexes: [],
    prunedVersions: 0,
    deletedClaims: 0,
    purgedItems: 0,
    pendingDeletions: 0,
    sweptShards: [],
    sweptSnapshotAttempts: [],
    projection: null,
    failures: [],
  };
}

export async function maintain(ctx: Ctx, o: MaintainOptions): Promise<MaintenanceReport> {
  const report = emptyMaintenanceReport(`${o.pipeline}/${o.experiment}`);
  // The log's coordination store first: a process that may not write this log (another lease
  // table than its records', a copy of the log, no table for a table log) must stop before it
  // takes a slot or merges anything, not at the claims step (a maintainer on
  // another table sealed and merged away a live writer's generation, whose writer still held its
  // slot in the right table and acked a batch nobody could see).
  // Only looks: a pass over an experiment with no log must not make one.
  const scope = await ctx.leaseScope({ create: false });
  let lease;
  try {
    lease = await acquireMaintainer(ctx.leases, { pipeline: o.pipeline, experiment: o.experiment, logId: scope.logId, owner: o.owner, ttlMs: o.leaseTtlMs });
  } catch (e) {
    if (e instanceof LeaseHeldError) return { ...report, heldBy: e.holder?.owner ?? 'another maintainer' };
    throw e;
  }
  // A repair or an adoption replaced the record (and the lease scope) meanwhile: this pass's
  // lease elects nobody there, and its slot takeovers would not fence the new scope's writers.
  if (guard('recheck-record-after-slot') && !(await ctx.coordUnchanged(scope).catch(async (e: unknown) => {
    await ctx.leases.release(lease).catch(() => undefined);
    throw e;
  }))) {
    await ctx.leases.release(lease).catch(() => undefined);
    throw new UnavailableError(`skipped: the coordination record of ${ctx.objects.baseUri} changed (made, repaired or adopted) while the maintainer lease was taken; the next pass runs with the new one`);
  }
  const keeper = new LeaseKeeper(ctx.leases, lease, { ttlMs: o.leaseTtlMs, clock: o.clock });
  // The lease elects, it does not fence: a pass frozen mid-way (a Lambda container thawed later,
  // a long pause) would go on beside the maintainer that took over. So before each step, a pass
  // whose keeper missed its renewals (half the ttl gone: it renews every third) renews the lease
  // itself, or reads it if the renewal got no answer, and once another maintainer holds it skips
  // every step left (FENCED). An expired lease the store does not answer for stops the pass too
  // (UNAVAILABLE): it may have been taken. Skipping is always safe (a later pass does each step
  // again); a step already running finishes (its commits are safe beside another maintainer's:
  // docs/design/deletion.md, "Stalled mergers"). Half the ttl also covers a taker whose clock
  // runs up to that much ahead of this pass's.
  let stop: DgclError | undefined;
  let askedAtMs = -Infinity;
  const leaseStop = async (): Promise<DgclError | undefined> => {
    if (stop) return stop;
    const fenced = (e: FencedError) => (stop = new FencedError(`skipped: another maintainer took the lease over (${e.message})`, { cause: e }));
    if (!guard('maintainer-stops-when-overtaken')) return undefined;
    if (keeper.lostReason) return fenced(keeper.lostReason);
    const now = o.clock.nowMs();
    if (keeper.current().expiresAtMs - now > o.leaseTtlMs / 2) return undefined;
    // A store that did not renew is asked again a keeper interval later, or once the lease ran
    // out if it had not at the last ask (no answer just before the expiry).
    if (now - askedAtMs < o.leaseTtlMs / 3 && !(keeper.expired() && askedAtMs < keeper.current().expiresAtMs)) return undefined;
    askedAtMs = now;
    try {
      await keeper.renewNow();
      return undefined;
    } catch (e) {
      if (e instanceof FencedError) return fenced(e);
    }
    try {
      await ctx.leases.assertCurrent(keeper.current());
      return undefined;
    } catch (e) {
      if (e instanceof FencedError) return fenced(e);
      if (!keeper.expired()) return undefined; // asked again before the next step
      return (stop = new UnavailableError(`skipped: the maintainer lease ran out and the lease store did not answer (${e instanceof Error ? e.message : String(e)})`, { cause: e }));
    }
  };
  const mctx = { ...ctx, hooks: o.hooks };
  let done = 0;
  let total = FIXED_STEPS.length;
  const tick = (name: MaintenanceStep): void => {
    done++;
    try {
      o.onProgress?.(name, done, total);
    } catch {
      // a failing progress display must not stop a maintenance pass
    }
  };
  /** Whether the pass stops before step `name` (then it is listed in `failures` and counted). */
  const skipped = async (name: MaintenanceStep): Promise<boolean> => {
    const why = await leaseStop();
    if (!why) return false;
    report.failures.push({ step: name, code: why.code, message: why.message, skipped: true });
    report.stoppedBy = why.code === 'FENCED' ? 'FENCED' : 'UNAVAILABLE';
    tick(name);
    return true;
  };
  const step = async (name: MaintenanceStep, fn: () => Promise<void>): Promise<void> => {
    if (await skipped(name)) return;
    try {
      await fn();
    } catch (e) {
      report.failures.push({ step: name, code: e instanceof DgclError ? e.code : 'INTERNAL', message: e instanceof Error ? e.message : String(e) });
    }
    tick(name);
  };
  try {
    report.ran = true;
    // 1. Orphaned slots: unsealed generations whose writer's lease is free. Take the slot (a new
    //    epoch seals the old one), so its data becomes immutable and mergeable below.
    await step('orphans', () => takeOrphans(ctx, o));
    let listing: ShardListing | null = null;
    await step('retirements', async () => {
      listing = await ctx.reader.listShards();
      // 2. Finish retirements a crash interrupted.
      for (const r of listing.retired) await retireGeneration(mctx, r.name, null);
    });
    if (listing) {
      const l: ShardListing = listing;
      total += l.visible.filter((s) => s.sealed).length;
      // 3. Merge sealed generations (each on its own: one failure does not stop the others).
      for (const v of l.visible.filter((s) => s.sealed)) {
        await step('merge', async () => {
          report.mergedRows += await mergeGeneration(mctx, v.name, v.version);
          report.mergedShards.push(v.name);
        });
      }
      // Generations no reader may see: a zombie's writes after its seal.
      await step('zombies', async () => {
        for (const z of l.invisible) {
          ctx.tables.forget(z.name);
          await ctx.objects.deletePrefix(shardPrefix(z.name));
          await ctx.objects.delete(genKey(z.name));
        }
        report.sweptShards.push(...(await sweepUnlisted(ctx)));
      });
    } else if (!(await skipped('zombies'))) {
      tick('zombies'); // no listing to sweep from
    }

    // Deleted items: after the merges above, so that sealed generations no longer hold their rows.
    await step('deletions', async () => {
      // No tombstone in the pass's listing: nothing to purge (one made after it is purged by the
      // next pass); only removal records left behind are deleted (one LIST).
      const seen: ShardListing | null = listing;
      const r =
        seen !== null && seen.tombstones.size === 0
          ? { purgedItems: 0, pendingDeletions: 0, unreadable: [], leftovers: await sweepRecords(ctx.objects, new Set()) }
          : await purgeDeleted(ctx, { clock: o.clock, deletionRetentionMs: o.deletionRetentionMs });
      report.purgedItems = r.purgedItems;
      report.pendingDeletions = r.pendingDeletions;
      if (r.unreadable.length > 0) {
        throw new CorruptError(`${r.unreadable.length} tombstone(s) or their removal records are not valid, their items not purged (the other tombstones were handled): ${r.unreadable.join(', ')}`);
      }
      if (r.leftovers.length > 0) {
        throw new UnavailableError(`${r.leftovers.length} removal record folder(s) of dropped tombstones could not be deleted (tried again next pass; the purge went on): ${r.leftovers.join(', ')}`);
      }
    });

    // Before the prune: a snapshot attempt that died after tagging the base and before writing its
    // record leaves a tag that holds the cutoff back (tagged.ts). The snapshots' own sweep decides
    // what is dead: a tag no record names whose attempt marker is gone or older than
    // ATTEMPT_GRACE_MS (longer than any attempt takes); a younger attempt may still be running.
    await step('snapshots', async () => {
      report.sweptSnapshotAttempts = await sweepLeftovers({ tables: ctx.tables, objects: ctx.objects, reader: ctx.reader, clock: o.clock });
    });

    // 4. Base: compaction + prune, then scalar indexes.
    await step('compaction', async () => {
      const base = await ctx.tables.base((await ctx.reader.listShards()).baseExists);
      if (!base) return;
      // Compact, make the compacted files durable, and only then prune the old versions (and
      // with them the files the merges fsynced): in one call Lance prunes before we can fsync.
      // The prune may only reach versions older than this pass: the second call compacts again
      // (a merge may have landed meanwhile) and would otherwise delete files whose rows are only
      // in its own, not yet fsynced, output.
      const passStartMs = o.clock.nowMs();
      const stats = await base.optimize({ cleanupOlderThan: new Date(0) });
      report.compacted = { fragmentsRemoved: stats.compaction.fragmentsRemoved, fragmentsAdded: stats.compaction.fragmentsAdded };
      await ctx.tables.sync('base');
      const pruned = await base.optimize({ cleanupOlderThan: new Date(await pruneCutoffMs(base, ctx.objects, passStartMs - o.versionRetentionMs)) });
      report.prunedVersions = pruned.prune.oldVersionsRemoved;
      await ctx.tables.sync('base');
    });
    await step('indexes', async () => {
      const base = await ctx.tables.base((await ctx.reader.listShards()).baseExists);
      if (!base) return;
      const have = new Set((await base.listIndices()).flatMap((i) => i.columns));
      for (const col of INDEXED_COLUMNS) {
        if (!have.has(col) && (await base.countRows()) > 0) await base.createIndex(col, { config: Index.btree() });
      }
      // Full-text indexes of the text columns (search); the compaction's optimize folds new rows into them.
      for (const col of TEXT_COLUMNS) {
        if (!have.has(col) && (await base.countRows()) > 0) await base.createIndex(col, { config: textIndexConfig(), name: textIndexName(col) });
      }
      report.indexes = (await base.listIndices()).map((i) => i.name);
      await ctx.tables.sync('base');
    });

    // After compaction: a projection of the base before it would describe fragments that are gone.
    await step('projection', async () => {
      report.projection = await refreshProjection(ctx, (await ctx.reader.listShards()).baseExists);
    });

    // 5. Clean-up of small objects.
    await step('claims', async () => {
      report.deletedClaims = await (await ctx.coord({ create: false })).deleteClaimsOlderThan(o.clock.nowMs() - o.claimRetentionMs);
    });
    await step('meta', () => cleanupMeta(ctx));
    return report;
  } finally {
    await keeper.stop();
    await ctx.leases.release(keeper.current()).catch(() => undefined);
  }
}

/** Give a lease back, then throw `e`: a check after taking it failed. */
async function giveBack(ctx: Ctx, lease: Lease, e: unknown): Promise<never> {
  await ctx.leases.release(lease).catch(() => undefined);
  throw e;
}

async function takeOrphans(ctx: Ctx, o: MaintainOptions): Promise<void> {
  const listing = await ctx.reader.listShards();
  const orphanSlots = new Set([...listing.visible.filter((v) => !v.sealed), ...listing.pending].map((v) => v.slot));
  const scope = await ctx.leaseScope({ create: false });
  const logId = scope.logId;
  for (const slot of orphanSlots) {
    const key = slotKey(o.pipeline, o.experiment, slot, logId);
    const rec = await ctx.leases.read(key);
    // A holder known to be dead (a local process that died) frees its slot before the expiry.
    if (rec && !isFree(rec, o.clock.nowMs()) && !(await ctx.leases.holderIsGone?.(key))) continue;
    try {
      const taken = await acquireWriterSlot(ctx.leases, {
        pipeline: o.pipeline,
        experiment: o.experiment,
        owner: o.owner,
        slots: o.slots,
        ttlMs: o.leaseTtlMs,
        slot,
        logId,
        waitMs: 0, // a writer that just took it is alive: leave it
        clock: o.clock,
      });
      if (guard('recheck-record-after-slot') && !(await ctx.coordUnchanged(scope).catch(async (e: unknown) => giveBack(ctx, taken.lease, e)))) {
        await ctx.leases.release(taken.lease).catch(() => undefined);
        throw new UnavailableError(`skipped: the coordination record of ${ctx.objects.baseUri} changed during the pass (repaired or adopted); the next pass runs with the new one`);
      }
      await sealPredecessors(ctx, slot, taken.lease.epoch, taken.writerEpoch, o.clock);
      await sealOwnEpoch(ctx, taken.writerEpoch, o.clock);
      await ctx.leases.release(taken.lease);
    } catch (e) {
      if (!(e instanceof LeaseHeldError)) throw e;
    }
  }
}

/**
 * Dataset folders without a `gen.` marker whose epoch is over: a zombie's commit after its
 * generation was deleted, or a writer that died between creating a generation and marking it.
 * "Over" means the epoch has its seal (a generation the seal does not list stays invisible
 * whatever lands later), or a later epoch of its slot is sealed (a seal of this epoch written
 * after that lists no generation: lib/log/write-seal.ts). Not an epoch that is only fenced: a takeover
 * is between fence and seal, the marker may still land, and the seal then lists the generation
 * (with whatever the zombie committed); deleting the folder would leave a visible generation
 * without data and every read failing. A live epoch's folder without a marker is a
 * generation being created right now: left alone too.
 */
async function sweepUnlisted(ctx: Ctx): Promise<string[]> {
  const meta = parseMetaNames(await ctx.objects.list(META_DIR));
  const listed = new Set(meta.gens);
  const sealed = new Set(meta.sealEpochs);
  const maxSealed = maxEpochPerSlot(meta.sealEpochs);
  const fenced = new Set(guard('sweep-only-ended-epochs') ? [] : meta.fenceEpochs);
  const over = (p: ShardName) => sealed.has(p.writerEpoch) || (maxSealed.get(p.slot) ?? 0) > p.epoch || fenced.has(p.writerEpoch);
  const swept: string[] = [];
  for (const entry of await ctx.objects.list(SHARDS_DIR)) {
    const name = entry.replace(/\/$/, '').replace(/\.lance$/, '');
    const p = parseShardName(name);
    if (!p || listed.has(name) || !over(p)) continue;
    ctx.tables.forget(name);
    await ctx.objects.deletePrefix(shardPrefix(name));
    swept.push(name);
  }
  return swept;
}

/**
 * Delete seals of epochs with no generation left (keeping each slot's highest, which hides any
 * later zombie generation of older epochs), fences of sealed epochs (the seal decides), and
 * retired markers whose data is gone. Every decision comes from ONE listing: a generation
 * created after it belongs to an epoch that had no seal in it, so no seal it needs is deleted.
 */
async function cleanupMeta(ctx: { objects: ObjectStore; reader: LogReader }): Promise<void> {
  const meta = parseMetaNames(await ctx.objects.list(META_DIR));
  const listing = await ctx.reader.listingOf(meta);
  const all = [...listing.visible, ...listing.invisible, ...listing.pending, ...listing.retired];
  const live = new Set(all.map((s) => s.writerEpoch));
  const liveShards = new Set(all.map((s) => s.name));
  const maxPerSlot = new Map<number, number>();
  for (const e of meta.sealEpochs) {
    const p = parseShardName(`${e}-g000000`);
    if (p) maxPerSlot.set(p.slot, Math.max(maxPerSlot.get(p.slot) ?? 0, p.epoch));
  }
  const sealed = new Set(meta.sealEpochs);
  for (const e of meta.fenceEpochs) if (sealed.has(e)) await ctx.objects.delete(fenceKey(e));
  for (const e of meta.sealEpochs) {
    const p = parseShardName(`${e}-g000000`);
    if (!p || (live.has(e) && guard('cleanup-keeps-seals-with-generations')) || (maxPerSlot.get(p.slot) === p.epoch && guard('cleanup-keeps-highest-seal'))) continue;
    await ctx.objects.delete(sealKey(e));
  }
  for (const r of meta.retired) if (!liveShards.has(r)) await ctx.objects.delete(retiredKey(r));
}
