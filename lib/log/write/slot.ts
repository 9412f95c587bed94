/**
 * Taking a writer slot (docs/design/fencing.md): acquire a slot's lease (a new writer epoch),
 * keep it renewed, and seal the predecessors' epochs before anything is written under it.
 * Called by ShardWriter (lib/log/write/writer.ts) when it has no slot or lost it.
 */
import { acquireWriterSlot, LeaseKeeper } from '../../lease/slots.ts';
import type { LeaseStore } from '../../lease/types.ts';
import { sealPredecessors } from '../maintain/seal.ts';
import type { SlotState } from './generations.ts';
import type { WriterOptions } from './writer-options.ts';

/**
 * A new slot state, its predecessors sealed; on a failed seal the slot is given back. `closing`:
 * whether the writer's close() began (a signal must not wait out the holders' leases).
 */
export async function takeSlot(ctx: Parameters<typeof sealPredecessors>[0] & { leases: LeaseStore }, opts: WriterOptions, closing: () => boolean): Promise<SlotState> {
  const { slot, lease, writerEpoch } = await acquireWriterSlot(ctx.leases, {
    pipeline: opts.pipeline,
    experiment: opts.experiment,
    owner: opts.owner,
    slots: opts.slots,
    ttlMs: opts.leaseTtlMs,
    ...(opts.slot !== undefined ? { slot: opts.slot } : {}),
    // Writers beyond the slots (or behind a pinned slot's holder) wait: a dead holder's
    // lease runs out within one ttl.
    waitMs: opts.leaseTtlMs,
    clock: opts.clock,
    ...(opts.onSlotWait ? { onWait: opts.onSlotWait } : {}),
    stop: () => closing(), // close() (a signal) must not wait out the holders' leases
  });
  const keeper = new LeaseKeeper(ctx.leases, lease, { ttlMs: opts.leaseTtlMs, clock: opts.clock });
  try {
    await sealPredecessors(ctx, slot, lease.epoch, writerEpoch, opts.clock);
  } catch (e) {
    await keeper.stop();
    // Nothing was written under the new epoch: give the slot back rather than hold it till expiry.
    await ctx.leases.release(lease).catch(() => undefined);
    throw e;
  }
  return { slot, lease, writerEpoch, keeper, generation: 1, table: null, commitsInGen: 0, bytesInGen: 0, creating: null, givenUp: [] };
}
