/**
 * The old scope's leases a repair or adoption holds (lib/log/admin/rehome.ts): every writer slot
 * and the maintainer lease of the log's current scope, taken before it reads anything, renewed
 * while it runs, confirmed right before the switch, and held after it (or after a switch that
 * failed, until it can no longer land).
 */
import type { Clock } from '../../clock.ts';
import type { CoordRecord } from '../../coord/choose.ts';
import { LeaseHeldError, UnavailableError } from '../../errors.ts';
import { guard } from '../../guards.ts';
import { MAX_TTL_MS } from '../../lease/rules.ts';
import { acquireMaintainer, acquireWriterSlot, LeaseKeeper, MAX_SLOTS, slotKey } from '../../lease/slots.ts';
import type { Lease, LeaseStore } from '../../lease/types.ts';

/** What taking the old scope needs of the repair's context. */
export interface OldScopeCtx {
  leases: LeaseStore;
  pipeline: string;
  experiment: string;
  owner: string;
  clock: Clock;
  leaseTtlMs: number;
  /** How long the old scope's leases stay held after the switch (tests only; default RETIRED_LEASE_TTL_MS). */
  retiredLeaseTtlMs?: number;
}

/** How long the old scope's leases stay held after the switch: a process of a version before scoped leases, still holding the log open, cannot take them meanwhile. */
const RETIRED_LEASE_TTL_MS = MAX_TTL_MS;

/**
 * The longest a repair's switch (one PUT) may still land after it was sent, as this log assumes
 * (docs/design/invariants.md, "Assumptions"): the PUT timed out, or its process died with it in
 * flight. Records rebuilt from the events read before the switch must not become the log's after
 * a writer of the old records wrote again.
 */
export const SWITCH_LANDS_WITHIN_MS = 15 * 60_000;

/**
 * How long the old scope's leases stay held from the confirmation on, unless the switch is known to
 * have landed: the landing bound, plus the renewals before the switch is sent and a taker's clock
 * ahead of the repair's (by up to the rest of the hour).
 */
export const SWITCH_HOLD_MS = 60 * 60_000;

/** A repair's switch failed, its outcome unknown: the old records stay locked for the switch hold. */
export class SwitchOutcomeUnknownError extends UnavailableError {}

export interface OldScope {
  leases: Lease[];
  /** Slot -> the epoch of its lease held now: the highest the old scope ever gave it. */
  slots: Map<number, number>;
  /** The slots whose previous epoch may still commit (its holder never released the lease), with the epoch held now. */
  sealPrevious: Map<number, number>;
  /** Throws unless every held lease is still current (a lost one may have let a writer in). */
  confirm(): Promise<void>;
  /**
   * Before the confirmation: give them back. After the switch: keep them held
   * (RETIRED_LEASE_TTL_MS), so no process of the old records takes one again. A switch that
   * failed: leave them held until the switch hold (SWITCH_HOLD_MS) runs out.
   */
  end(switched: boolean): Promise<void>;
}

/**
 * Every writer slot and the maintainer lease of the log's current scope, each waited for up to
 * a lease ttl: a writer still running keeps its slot, and the repair refuses rather than rebuild
 * records it is changing. They are renewed while the repair runs.
 */
export async function takeOldScope(ctx: OldScopeCtx, r: CoordRecord | null): Promise<OldScope> {
  const logId = r !== null && r.scoped ? r.id : null;
  const taken: Lease[] = [];
  const slots = new Map<number, number>();
  /** Slots whose previous holder may not have ended (it never released its lease): the epoch held now. */
  const sealPrevious = new Map<number, number>();
  const deadline = ctx.clock.nowMs() + ctx.leaseTtlMs;
  const keepers: LeaseKeeper[] = [];
  const keep = (l: Lease) => {
    taken.push(l);
    keepers.push(new LeaseKeeper(ctx.leases, l, { ttlMs: ctx.leaseTtlMs, clock: ctx.clock }));
  };
  const giveBack = async () => {
    await Promise.all(keepers.map((k) => k.stop()));
    await Promise.all(keepers.map((k) => ctx.leases.release(k.current()).catch(() => undefined)));
  };
  try {
    for (let slot = 0; slot < MAX_SLOTS; slot++) {
      // A holder that never released its lease (it died, or froze) may commit later: its epoch is
      // sealed (sealAll). One that released it wrote its last commit before.
      const before = await ctx.leases.read(slotKey(ctx.pipeline, ctx.experiment, slot, logId));
      const s = await acquireWriterSlot(ctx.leases, {
        pipeline: ctx.pipeline,
        experiment: ctx.experiment,
        logId,
        owner: ctx.owner,
        slots: MAX_SLOTS,
        slot,
        ttlMs: ctx.leaseTtlMs,
        waitMs: Math.max(0, deadline - ctx.clock.nowMs()),
        clock: ctx.clock,
      });
      keep(s.lease);
      slots.set(slot, s.lease.epoch);
      if (before !== null && (before.owner !== '' || s.lease.epoch !== before.epoch + 1)) sealPrevious.set(slot, s.lease.epoch);
    }
    for (;;) {
      try {
        keep(await acquireMaintainer(ctx.leases, { pipeline: ctx.pipeline, experiment: ctx.experiment, logId, owner: ctx.owner, ttlMs: ctx.leaseTtlMs }));
        break;
      } catch (e) {
        if (!(e instanceof LeaseHeldError) || ctx.clock.nowMs() >= deadline) throw e;
        await ctx.clock.sleep(Math.min(1000, Math.max(1, deadline - ctx.clock.nowMs())));
      }
    }
  } catch (e) {
    await giveBack();
    if (e instanceof LeaseHeldError) {
      throw new LeaseHeldError(`${e.message}. A repair or adoption needs every writer and maintainer of the log stopped (it waited one lease ttl); stop them and run it again`, e.holder, { cause: e });
    }
    throw e;
  }
  /** The leases as confirm() renewed them (the keepers stopped then). */
  let confirmed: Lease[] | null = null;
  return {
    leases: taken,
    slots,
    sealPrevious,
    async confirm() {
      // Each lease renewed for the switch hold, and the renewal is the check: it fails on a lease a
      // writer took meanwhile. A check that only read them would leave the time up to the switch
      // to a taker whose clock says they ran out; the hold covers the switch right after, and
      // its late landing.
      await Promise.all(keepers.map((k) => k.stop()));
      for (const k of keepers) {
        if (k.lost) throw new UnavailableError(`the repair lost its lease ${k.current().key} (${k.lostReason?.message ?? 'not renewed in time'}); nothing was switched: run it again`);
      }
      confirmed = await Promise.all(
        keepers.map((k) =>
          ctx.leases.renew(k.current(), Math.max(ctx.leaseTtlMs, SWITCH_HOLD_MS)).catch((e: unknown) => {
            throw new UnavailableError(`the repair lost its lease ${k.current().key} (${e instanceof Error ? e.message : String(e)}); nothing was switched: run it again`, { cause: e });
          }),
        ),
      );
    },
    async end(switched) {
      await Promise.all(keepers.map((k) => k.stop()));
      // Confirmed and not switched: the switch was sent and failed, and may land yet. The leases
      // stay held until the switch hold runs out, so that no writer of the old records writes
      // what the new ones would not know of (a late switch would hide its commits).
      if (!switched && confirmed !== null && guard('keep-leases-on-failed-switch')) return;
      const held = confirmed ?? keepers.map((k) => k.current());
      const ttl = ctx.retiredLeaseTtlMs ?? RETIRED_LEASE_TTL_MS;
      await Promise.all(held.map((l) => (switched ? ctx.leases.renew(l, ttl) : ctx.leases.release(l)).catch(() => undefined)));
    },
  };
}
