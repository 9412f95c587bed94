/**
 * Writing a seal (docs/design/fencing.md): the fence, then the epoch's generations and the
 * versions readers may see of them, each put-if-absent. Shared by every sealer: a takeover and a
 * writer's end (lib/log/maintain/seal.ts), and a reader that found a takeover stalled between
 * fence and seal (lib/log/read/reader.ts).
 *
 * Every seal is preceded by a fence (`fence.<epoch>`, put-if-absent) written before the versions
 * are read. A reader that read an unsealed generation at its latest version checks afterwards
 * that no fence appeared; if none did, the versions any sealer reads later are at least the ones
 * it saw, so the rows it returned stay visible forever.
 */
import { guard } from '../guards.ts';
import type { Clock } from '../clock.ts';
import { DgclError, UnavailableError } from '../errors.ts';
import type { ObjectStore } from '../storage/objects.ts';
import { fenceKey, maxEpochPerSlot, META_DIR, parseMetaNames, parseShardName, sealKey, type Seal } from './layout.ts';
import type { LanceTables } from './tables.ts';

/**
 * Fence, list the epoch's generations, read their latest versions, seal; each write
 * put-if-absent, so any number of sealers may race and the first seal wins. The listing comes
 * after the fence: a generation created before the fence is in it (a reader that read it at
 * latest sees the fence when it re-lists), one created after is not (and never visible). Earlier
 * unsealed epochs of the slot with generations in that listing are sealed first, the same way.
 */
export async function writeSeal(
  ctx: { objects: ObjectStore; tables: LanceTables },
  writerEpoch: string,
  sealedBy: string,
  clock: Clock,
): Promise<void> {
  try {
    await sealEpoch(ctx, writerEpoch, sealedBy, clock);
  } catch (e) {
    // Lance reports storage trouble as plain errors; every step is idempotent: retry later.
    if (e instanceof DgclError) throw e;
    throw new UnavailableError(`sealing writer epoch ${writerEpoch} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}

async function sealEpoch(ctx: { objects: ObjectStore; tables: LanceTables }, writerEpoch: string, sealedBy: string, clock: Clock): Promise<void> {
  const early = guard('seal-lists-after-fence') ? null : await ctx.objects.list(META_DIR);
  if (guard('fence-before-seal')) await ctx.objects.putIfAbsent(fenceKey(writerEpoch), sealedBy);
  const meta = parseMetaNames(early ?? (await ctx.objects.list(META_DIR)));
  // A later epoch of the slot already sealed: readers see none of this epoch's generations (a
  // zombie's, created after the takeover), and its own seal must keep them so. Such an epoch is
  // sealed now because its seal was cleaned up (cleanupMeta) and a zombie's late marker landed
  // since, or because a sealer of a higher epoch lost a race to it (below); listing that
  // generation made the zombie's commit visible, and a sweep that had decided on its folder left
  // a visible generation without data.
  const self = parseShardName(`${writerEpoch}-g000000`);
  const highestSealed = self === null ? 0 : (maxEpochPerSlot(meta.sealEpochs).get(self.slot) ?? 0);
  const superseded = self !== null && highestSealed > self.epoch && guard('superseded-epoch-seals-nothing');
  if (self !== null && !superseded && guard('seal-earlier-epochs')) {
    // This seal hides every unsealed earlier epoch of the slot (readers take them for a zombie's).
    // One whose generation is listed now may have been read at latest by a read that listed
    // before this fence (an epoch whose successor died before sealing it): seal it first, oldest
    // first, so what that read returned stays visible. One created after this fence was never
    // read (readers wait for the seal of a fenced epoch at or above its own).
    const earlier = new Map<number, string>();
    for (const g of meta.gens) {
      const p = parseShardName(g);
      if (p && p.slot === self.slot && p.epoch > highestSealed && p.epoch < self.epoch && !meta.retired.has(g)) earlier.set(p.epoch, p.writerEpoch);
    }
    for (const e of [...earlier.keys()].sort((a, b) => a - b)) await sealEpoch(ctx, earlier.get(e)!, sealedBy, clock);
  }
  const gens = superseded ? [] : meta.gens.filter((g) => parseShardName(g)?.writerEpoch === writerEpoch && !meta.retired.has(g));
  const versions: Record<string, number> = {};
  for (const name of gens) {
    // A fresh handle at the latest version (checkoutLatest below as well: a cached one may lag).
    ctx.tables.forget(name);
    try {
      const t = await ctx.tables.shard(name);
      await t.checkoutLatest();
      versions[String(parseShardName(name)!.generation)] = await t.version();
      // The seal names this version for good: it must survive power loss (the writer may have
      // died between its commit and its fsync). A no-op on object stores.
      await ctx.tables.sync(name);
    } catch (e) {
      // Merged and retired meanwhile: its rows are in the base, readers skip it either way.
      const now = parseMetaNames(await ctx.objects.list(META_DIR).catch(() => { throw e; }));
      if (!now.gens.includes(name) || now.retired.has(name)) continue;
      // A marker whose dataset does not exist: the marker PUT of a generation that never got a
      // commit landed late, after maintenance swept the ended epoch's unmarked folder (or a copy
      // made by other tools caught the marker and not the data). Commits follow only a confirmed
      // marker, so nothing of it was acknowledged: seal it out. Not a guard: a sweep takes only
      // epochs that are over, so a sealer meeting such a generation lost its race to the seal
      // anyway, and without this it would fail once and find the seal when retried.
      if (!isMissingDataset(e)) throw e;
    }
  }
  const seal: Seal = { writerEpoch, gens: versions, sealedBy, sealedAtMs: clock.nowMs() };
  await ctx.objects.putIfAbsent(sealKey(writerEpoch), JSON.stringify(seal));
}

function isMissingDataset(e: unknown): boolean {
  return /was not found|Not found|does not exist/.test(e instanceof Error ? e.message : String(e));
}
