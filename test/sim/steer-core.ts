/**
 * What the steered windows share (test/sim/steer.ts, steer-merges.ts): the host they act through
 * (the schedule: test/sim/schedule.ts), the steering's own state and tools, and the names of the
 * protocol's objects they watch for.
 */
import { itemHash, META_DIR, shardPrefix } from '../../lib/log/layout.ts';
import type { SimTime } from './clock.ts';
import type { SimConfig } from './config.ts';
import type { Rng } from './prng.ts';
import type { ReadKind } from './reads.ts';
import type { Fault, Op, OpSpec, Scheduler } from './scheduler.ts';
import type { ItemModel } from './workload.ts';

/**
 * A steered read: of `item` (else the whole log), by an idle reader (none: a new process), or
 * always by a new process (`fresh`: nothing cached, no base handle open).
 */
export interface SteerRead {
  item?: ItemModel;
  kind?: ReadKind;
  fresh?: boolean;
  /** Told the read's actor and when it ends, once it started. */
  started?: (actor: string, ended: Promise<unknown>) => void;
}

export interface SteerHost {
  sched: Scheduler;
  rng: Rng;
  cfg: SimConfig;
  time: SimTime;
  /** The items of `proc`'s deliveries in flight. */
  inFlight(proc: string): ItemModel[];
  /** A writer other than those of `not` takes a delivery (it needs a slot: maybe theirs); false if none could. */
  deliverVia(not: readonly string[]): boolean;
  /** Start a read; false if none could start now. */
  read(o: SteerRead): boolean;
  /** Writer `proc` takes the next delivery of item `itemId`; false if it could not now (one in flight). */
  deliverItem(proc: string, itemId: string): boolean;
  /**
   * Writer `proc` takes a delivery of item `itemId`, nothing of which is in flight, held or not:
   * its next batch, a failed current one given up for another attempt unless it is in doubt
   * (then retried), or its batch `idx` delivered again (an old message of an at-least-once
   * queue; nothing in doubt); false if it could not now.
   */
  deliverBatch(proc: string, itemId: string, which: 'next' | number): boolean;
  /** Hold item `itemId` back (no delivery or delete of it starts), or let it go, at once (letting go ends every hold of it). */
  setHeld(itemId: string, held: boolean): void;
  /** The deleter deletes item `itemId` (true: it was deleted); null if it could not start now. */
  deleteItem(itemId: string): Promise<boolean> | null;
  /** Every live writer (of `only`, if given) merges its own shard (nothing of it is live after); settles when all did. */
  mergeWriters(only?: readonly string[]): Promise<unknown>;
  /** No delivery of item `itemId` starts until `until` settles. */
  holdItem(itemId: string, until: Promise<unknown>): void;
  /** The live writer processes (not closing). */
  writers(): string[];
  /** Start a maintenance pass, now or once the running one ended. */
  maintain(): void;
}

/** Steps a hold waits at most: long enough for a takeover or a retirement, short of a whole schedule. */
export const WAIT = 120;
/** A maintenance pass (merges, compaction, indexes, projection, clean-up) takes longer; maybe two. */
export const PASS_WAIT = 800;
export const GEN_MARKER = `${META_DIR}/gen.`;
export const FENCE = `${META_DIR}/fence.`;
export const TOMB = `${META_DIR}/tomb.`;

/** Whether a landed request drops the tombstone of the item's delete. */
export const tombstoneDropped = (it: ItemModel) => {
  const tomb = `${TOMB}${itemHash(it.id)}.`;
  return (landed: { kind: string; target: string }) => /delete$/.test(landed.kind) && landed.target.startsWith(tomb);
};

/**
 * Steer faults with `fault` (null: as before) on top of the scheduler's steering; the function
 * returned takes it off again, if nothing was put on top of it meanwhile.
 */
export function steerFaults(sched: Scheduler, fault: (spec: OpSpec<unknown>, actor: string) => Exclude<Fault, 'ok'> | null): () => void {
  const below = sched.steerFault;
  const mine: Scheduler['steerFault'] = (spec, actor) => fault(spec, actor) ?? below?.(spec, actor) ?? null;
  sched.steerFault = mine;
  return () => {
    if (sched.steerFault === mine) sched.steerFault = below;
  };
}
export const RETIRED = `${META_DIR}/retired.`;
export const SEAL = `${META_DIR}/seal.`;
export const PROJECTION_DIR = '_dgcl/projection';
export const PROJECTION_KEY = `${PROJECTION_DIR}/items.json`;
/** The file name of a Lance dataset's manifest of `version` (V2 naming: u64::MAX - version, so a listing sorts newest first). */
export const manifestName = (version: number) => `${(2n ** 64n - 1n - BigInt(version)).toString()}.manifest`;
/** A retirement deleted the generation's manifest of version 2 (newest first: only the empty table's is left). */
export const secondManifestDeleted = (shard: string) => (op: Op) => /deletePrefix\.delete$/.test(op.spec.kind) && op.spec.target === `${shardPrefix(shard)}/_versions/${manifestName(2)}`;
/**
 * What steered reads read: one consistent read each (`items` without a projection reads twice,
 * its second listing after the window).
 */
export const ITEM_KINDS: readonly ReadKind[] = ['fold', 'trajectory', 'latest', 'fields'];

/** A request of a maintenance process. */
export const byMaintainer = (op: { actor: string }) => /^m\d/.test(op.actor);
/** A maintenance pass ended: it gave the maintainer's lease back. */
export const passEnded = (op: Op) => byMaintainer(op) && op.spec.kind === 'lease.release' && /maintainer/.test(op.spec.target);

/** The steering's state and tools a window uses (test/sim/steer.ts `Steering`). */
export interface SteerCore {
  readonly h: SteerHost;
  /** Whether the base was made (its marker landed). */
  readonly baseMade: boolean;
  /** The number of commits that landed in each generation (from afterCommit). */
  readonly commits: ReadonlyMap<string, number>;
  /** The items of each generation's commits (from afterCommit). */
  readonly genItems: ReadonlyMap<string, readonly ItemModel[]>;
  /** Generations whose `retired.` marker landed (merged into the base). */
  readonly retired: ReadonlySet<string>;
  /** Writer epochs whose seal landed. */
  readonly sealed: ReadonlySet<string>;
  /** A flag set once a request `match` accepts lands (`then` told it, once). */
  watch(match: (op: Op) => boolean, then?: (op: Op) => void): { seen: boolean };
  /** Whether to steer at this point (`always`: the window comes once a seed). */
  take(always?: boolean): boolean;
  /** Give back a `take` whose window could not open (the next point may steer). */
  untake(): void;
  /** The steered read, then a read of the same item and kind once it ended. */
  readThen(o: SteerRead, onStart: (actor: string, ended: { seen: boolean }, done: Promise<unknown>) => void): boolean;
  /** `actor`'s requests waiting to be released. */
  pendingOf(actor: string): Op[];
  /** Move the clock past every lease's ttl (a lease runs out at a protocol point). */
  expire(why: string): void;
  /** The step until which the running `zombie` window lasts (0: none; steer-zombie.ts). */
  zombieUntil: number;
}
