/**
 * Seals (docs/design/fencing.md): an epoch's generations and the versions readers may see of
 * them, written once (put-if-absent) by whoever ends the epoch: its successor at takeover, the
 * writer itself when it closes or gives up after a failed commit, or a reader that found a
 * takeover stalled between fence and seal. Here the takeover's and the writer's steps; the seal
 * itself (fence first) is written by lib/log/write-seal.ts, which readers use as well.
 */
import type { Clock } from '../../clock.ts';
import { CorruptError } from '../../errors.ts';
import { formatWriterEpoch } from '../../lease/slots.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { parseShardName } from '../layout.ts';
import type { LogReader } from '../read/reader.ts';
import type { LanceTables } from '../tables.ts';
import { writeSeal } from '../write-seal.ts';

type SealCtx = { objects: ObjectStore; reader: LogReader; tables: LanceTables };

/**
 * The takeover step of a new epoch: seal the direct predecessor (even without generations, so
 * that a zombie of it creating one later stays invisible). Its seal seals every earlier unsealed
 * epoch with generations first (lib/log/write-seal.ts), so none with acknowledged data is left
 * below a sealed one.
 */
export async function sealPredecessors(ctx: SealCtx, slot: number, epoch: number, sealedBy: string, clock: Clock): Promise<void> {
  const listing = await ctx.reader.listShards();
  // An epoch at or below a sealed one would be read as a zombie's (e.g. after DynamoDB TTL
  // deleted a lease record untouched for its grace period and the counter restarted).
  for (const sealed of listing.sealedEpochs) {
    const p = parseShardName(`${sealed}-g000000`);
    if (p && p.slot === slot && p.epoch >= epoch) {
      throw new CorruptError(`slot ${slot} was given epoch ${epoch}, but epoch ${p.epoch} of it is already sealed; the lease record was reset (DynamoDB TTL?). Release the slot and raise its epoch above ${p.epoch}.`);
    }
  }
  if (epoch <= 1) return;
  const predecessor = formatWriterEpoch(slot, epoch - 1);
  if (listing.seals.has(predecessor) || (await ctx.reader.readSeal(predecessor))) return;
  await writeSeal(ctx, predecessor, sealedBy, clock);
}

/**
 * Seal an epoch's own generations at their current versions: a writer's clean end, or its end
 * after a commit whose outcome it does not know (a commit landing later stays invisible).
 */
export async function sealOwnEpoch(ctx: SealCtx, writerEpoch: string, clock: Clock): Promise<void> {
  if (await ctx.reader.readSeal(writerEpoch)) return;
  await writeSeal(ctx, writerEpoch, writerEpoch, clock);
}
