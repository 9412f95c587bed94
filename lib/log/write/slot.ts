/**
 * Taking a writer slot (docs/design/fencing.md): acquire a slot's lease (a new writer epoch),
 * keep it renewed, and seal the predecessors' epochs before anything is written under it.
 * Called by ShardWriter (lib/log/write/writer.ts) when it has no slot or lost it.
 */
import type { LeaseScope } from './coord-holder.ts';
import { acquireWriterSlot, LeaseKeeper } from '../../lease/slots.ts';
import type { Lease, LeaseStore } from '../../lease/types.ts';
import { LeaseHeldError, UnavailableError } from '../../errors.ts';
import { guard } from '../../guards.ts';
import { sealPredecessors } from '../maintain/seal.ts';
import type { SlotState } from './generations.ts';
import type { WriterOptions } from './writer-options.ts';

/** What taking a slot reads and writes: the seal's context, the leases, the log's record. */
export type SlotCtx = Parameters<typeof sealPredecessors>[0] & {
  leases: LeaseStore;
  leaseScope: (o: { create: boolean }) => Promise<LeaseScope>;
  coordUnchanged: (scope: LeaseScope) => Promise<boolean>;
};

/**
 * A new slot state, its predecessors sealed; on a failed seal the slot is given back. `closing`:
 * whether the writer's close() began (a signal must not wait out the holders' leases).
 * The slot's lease key is scoped by the log's record, and the record is read again once the lease
 * is held: a repair or an adoption replaces the record while it holds every lease of the old
 * scope, so a lease taken in the old scope after the record changed is seen here, given back,
 * and taken again in the new one (`rehomed` is told, to forget what was cached of the old records).
 */
export async function takeSlot(ctx: SlotCtx, opts: WriterOptions, closing: () => boolean, rehomed: () => void): Promise<SlotState> {
  for (let tries = 0; ; tries++) {
    if (tries >= 3) throw new UnavailableError(`the coordination record of ${ctx.objects.baseUri} kept changing while a writer slot was taken (a repair or adoption running?); nothing was written, retry`);
    const scope = await ctx.leaseScope({ create: true });
    // One pass without waiting first: slots held because a repair retired the old scope's leases
    // are no reason to wait (the record says where the log's leases are now).
    let st;
    try {
      st = await takeScopedSlot(ctx, opts, closing, scope.logId, 0);
    } catch (e) {
      if (!(e instanceof LeaseHeldError)) throw e;
      if (guard('recheck-record-after-slot') && !(await ctx.coordUnchanged(scope))) {
        rehomed();
        continue;
      }
      st = await takeScopedSlot(ctx, opts, closing, scope.logId, opts.leaseTtlMs);
    }
    if (!guard('recheck-record-after-slot') || (await ctx.coordUnchanged(scope).catch(async (e: unknown) => giveBack(ctx, st, e)))) {
      return sealed(ctx, opts, st, scope.record);
    }
    rehomed();
    await giveBack(ctx, st);
  }
}

async function giveBack(ctx: SlotCtx, st: { lease: Lease }, e?: unknown): Promise<never | false> {
  await ctx.leases.release(st.lease).catch(() => undefined);
  if (e !== undefined) throw e;
  return false;
}

function takeScopedSlot(ctx: SlotCtx, opts: WriterOptions, closing: () => boolean, logId: string | null, waitMs: number) {
  return acquireWriterSlot(ctx.leases, {
    pipeline: opts.pipeline,
    experiment: opts.experiment,
    logId,
    owner: opts.owner,
    slots: opts.slots,
    ttlMs: opts.leaseTtlMs,
    ...(opts.slot !== undefined ? { slot: opts.slot } : {}),
    // Writers beyond the slots (or behind a pinned slot's holder) wait: a dead holder's
    // lease runs out within one ttl.
    waitMs,
    clock: opts.clock,
    ...(opts.onSlotWait ? { onWait: opts.onSlotWait } : {}),
    stop: () => closing(), // close() (a signal) must not wait out the holders' leases
  });
}

async function sealed(ctx: SlotCtx, opts: WriterOptions, taken: { slot: number; lease: Lease; writerEpoch: string }, scopeRecord: string | null): Promise<SlotState> {
  const { slot, lease, writerEpoch } = taken;
  const keeper = new LeaseKeeper(ctx.leases, lease, { ttlMs: opts.leaseTtlMs, clock: opts.clock });
  try {
    await sealPredecessors(ctx, slot, lease.epoch, writerEpoch, opts.clock);
  } catch (e) {
    await keeper.stop();
    // Nothing was written under the new epoch: give the slot back rather than hold it till expiry.
    await ctx.leases.release(lease).catch(() => undefined);
    throw e;
  }
  return { slot, scopeRecord, lease, writerEpoch, keeper, generation: 1, table: null, commitsInGen: 0, bytesInGen: 0, creating: null, givenUp: [] };
}
