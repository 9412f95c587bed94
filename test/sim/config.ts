/**
 * What one seed's schedule runs with (swarm testing: each seed draws its own mix of features, so
 * that some seeds are dense in takeovers, others in deletes, retirements or fault bursts, instead
 * of every seed being the same uniform noise). Each feature draws from a stream of its own,
 * forked from the seed in a fixed order.
 */
import { Rng } from './prng.ts';

export type CoordChoice = 'objects' | 'table' | 'sqlite';

export interface SimConfig {
  writers: number;
  slots: number;
  leaseTtlMs: number;
  mergeEveryCommits: number;
  /** Small ones rotate generations by size too (a commit of 10 small rows is ~7 KB). */
  mergeEveryBytes: number;
  /** The writers' idle merge (0: off). */
  mergeIdleMs: number;
  cachedItems: number;
  maxBatchesPerCommit: number;
  claimRetentionMs: number;
  faultRate: number;
  priorityBias: number;
  deliveries: number;
  reads: number;
  items: number;
  /** Where markers and claims live: objects beside the log, the lease table, or a local log's SQLite file. */
  coord: CoordChoice;
  /** The lease store: the simulated table (DynamoDB's rules, in memory), or the real local one of lease files. */
  leases: 'table' | 'local';
  maintainers: 1 | 2;
  /** Deletes (0: none), their retention, and whether old deletes are delivered again later. */
  deletions: number;
  deletionRetentionMs: number;
  redeliverDeletes: boolean;
  /** Share of batches that report a failed step (retried with the next attempt). */
  failures: number;
  /** Blob buffers are reused (zeroed) by the caller once their batch is acked. */
  reuseBuffers: boolean;
  /** Largest skew of a process's clock against true time (0: one clock). */
  skewMs: number;
  /** Jumps of one process's clock. */
  jumps: number;
  /** Crashes of writers, maintainers, readers and deleters (any mix). */
  crashes: number;
  /** Share of a crashed process's requests in flight that land later anyway. */
  crashLanding: number;
  /** SDK resends of writes that may be resent (0: none). */
  resends: number;
  /** Fault bursts: chance per release that one begins (0: none). */
  burstChance: number;
  /** Chance that an actor pauses right after a write of it lands (0: never; scheduler.ts `windows`). */
  windows: number;
  /** Chance that a delivery or a read goes to the item most recently delivered (contention on one item). */
  hot: number;
}

export function pickConfig(seed: number): SimConfig {
  const rng = new Rng(seed * 7919 + 17);
  const f = () => rng.fork();
  const base = f();
  const coordRng = f();
  const delRng = f();
  const clockRng = f();
  const faultRng = f();
  const workRng = f();
  const coord = coordRng.pick(['objects', 'table', 'sqlite'] as const);
  const deletions = delRng.chance(0.4) ? delRng.between(1, 4) : 0;
  const skewed = clockRng.chance(0.5);
  return {
    writers: base.between(2, 4),
    slots: base.pick([1, 2, 2, 3]),
    leaseTtlMs: 10_000,
    mergeEveryCommits: base.between(2, 4),
    mergeEveryBytes: base.pick([2 ** 30, 8_000, 20_000]),
    mergeIdleMs: base.pick([0, 0, 1_500, 6_000]),
    cachedItems: base.pick([1, 2, 100]),
    maxBatchesPerCommit: base.pick([1, 512]),
    claimRetentionMs: base.pick([20_000, 3_600_000]),
    faultRate: faultRng.pick([0, 0.02, 0.05, 0.1, 0.2]),
    priorityBias: base.pick([0, 0.5, 0.9]),
    deliveries: workRng.between(10, 28),
    reads: workRng.between(6, 16),
    items: workRng.between(2, 5),
    coord,
    leases: coord === 'table' ? 'table' : coordRng.pick(['table', 'local'] as const),
    maintainers: base.chance(0.5) ? 2 : 1,
    deletions,
    deletionRetentionMs: deletions > 0 ? delRng.pick([0, 3_600_000]) : 3_600_000,
    redeliverDeletes: deletions > 0 && delRng.chance(0.5),
    failures: workRng.pick([0, 0, 0.1, 0.25]),
    reuseBuffers: workRng.chance(0.5),
    skewMs: skewed ? clockRng.pick([200, 2_000, 6_000]) : 0,
    jumps: clockRng.chance(0.4) ? clockRng.between(1, 3) : 0,
    crashes: faultRng.pick([0, 0, 1, 1, 2, 3]),
    crashLanding: faultRng.pick([0, 0.5, 1]),
    resends: faultRng.chance(0.5) ? faultRng.pick([0.05, 0.2]) : 0,
    burstChance: faultRng.chance(0.3) ? faultRng.pick([0.01, 0.03]) : 0,
    windows: faultRng.pick([0, 0.1, 0.3]),
    hot: workRng.pick([0, 0.5, 0.8]),
  };
}
