/**
 * Seals (docs/design/fencing.md): an epoch's generations and the versions readers may see of
 * them, written once (put-if-absent) by whoever ends the epoch: its successor at takeover, the
 * writer itself when it closes or gives up after a failed commit, or a reader that found a
 * takeover stalled between fence and seal.
 *
 * Every seal is preceded by a fence (`fence.<epoch>`, put-if-absent) written before the versions
 * are read. A reader that read an unsealed generation at its latest version checks afterwards
 * that no fence appeared; if none did, the versions any sealer reads later are at least the ones
 * it saw, so the rows it returned stay visible forever.
 */
import { guard } from '../../guards.ts';
import type { Clock } from '../../clock.ts';
import { CorruptError, DgclError, UnavailableError } from '../../errors.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { fenceKey, maxEpochPerSlot, META_DIR, parseMetaNames, parseShardName, sealKey, type Seal } from '../layout.ts';
import type { LogReader } from '../read/reader.ts';
import type { LanceTables } from '../tables.ts';

type SealCtx = { objects: ObjectStore; reader: LogReader; tables: LanceTables };

/**
 * The takeover step of a new epoch: seal every earlier epoch of the slot that still has
 * generations and no seal, then the direct predecessor (even without generations, so that a
 * zombie of it creating one later stays invisible). Ascending order: a crash in between never
 * leaves an unsealed epoch with acknowledged data below a sealed one.
 */
export async function sealPredecessors(ctx: SealCtx, slot: number, epoch: number, sealedBy: string, clock: Clock): Promise<void> {
  const listing = await ctx.reader.listShards();
  const toSeal = new Set<number>();
  for (const s of [...listing.visible, ...listing.invisible, ...listing.pending, ...listing.retired]) {
    if (s.slot === slot && s.epoch < epoch && (s.epoch === epoch - 1 || guard('seal-earlier-epochs'))) toSeal.add(s.epoch);
  }
  // An epoch at or below a sealed one would be read as a zombie's (e.g. after DynamoDB TTL
  // deleted a lease record untouched for its grace period and the counter restarted).
  for (const sealed of listing.sealedEpochs) {
    const p = parseShardName(`${sealed}-g000000`);
    if (p && p.slot === slot && p.epoch >= epoch) {
      throw new CorruptError(`slot ${slot} was given epoch ${epoch}, but epoch ${p.epoch} of it is already sealed; the lease record was reset (DynamoDB TTL?). Release the slot and raise its epoch above ${p.epoch}.`);
    }
  }
  if (epoch > 1) toSeal.add(epoch - 1);
  for (const e of [...toSeal].sort((a, b) => a - b)) {
    const writerEpoch = `s${String(slot).padStart(2, '0')}-e${String(e).padStart(6, '0')}`;
    if (listing.seals.has(writerEpoch) || (await ctx.reader.readSeal(writerEpoch))) continue;
    await writeSeal(ctx, writerEpoch, sealedBy, clock);
  }
}

/**
 * Seal an epoch's own generations at their current versions: a writer's clean end, or its end
 * after a commit whose outcome it does not know (a commit landing later stays invisible).
 */
export async function sealOwnEpoch(ctx: SealCtx, writerEpoch: string, clock: Clock): Promise<void> {
  if (await ctx.reader.readSeal(writerEpoch)) return;
  await writeSeal(ctx, writerEpoch, writerEpoch, clock);
}

/**
 * Fence, list the epoch's generations, read their latest versions, seal; each write
 * put-if-absent, so any number of sealers may race and the first seal wins. The listing comes
 * after the fence: a generation created before the fence is in it (a reader that read it at
 * latest sees the fence when it re-lists), one created after is not (and never visible).
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
  // sealed now only because its seal was cleaned up (cleanupMeta) and a zombie's late marker
  // landed since; listing that generation made the zombie's commit visible, and a sweep that had
  // decided on its folder left a visible generation without data (review6 F1).
  const self = parseShardName(`${writerEpoch}-g000000`);
  const superseded = self !== null && (maxEpochPerSlot(meta.sealEpochs).get(self.slot) ?? 0) > self.epoch && guard('superseded-epoch-seals-nothing');
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
      // commit landed late, after maintenance swept the ended epoch's unmarked folder. Commits
      // follow only a confirmed marker, so nothing of it was acknowledged: seal it out.
      if (!isMissingDataset(e) || !guard('seal-out-missing-dataset')) throw e;
    }
  }
  const seal: Seal = { writerEpoch, gens: versions, sealedBy, sealedAtMs: clock.nowMs() };
  await ctx.objects.putIfAbsent(sealKey(writerEpoch), JSON.stringify(seal));
}

function isMissingDataset(e: unknown): boolean {
  return /was not found|Not found|does not exist/.test(e instanceof Error ? e.message : String(e));
}
