/**
 * The configurations of the steered scenario generators (test/sim/config.ts draws the swarm, then
 * one of these shapes it), each for windows of test/sim/steer.ts and the files beside it.
 */
import type { SimConfig } from './config-types.ts';
import type { Rng } from './prng.ts';

/** No faults and no noise but the steered ones: one clock, no crash, pause or stall, no repair. */
const QUIET = {
  clockMoves: 0,
  skewMs: 0,
  jumps: 0,
  crashes: 0,
  faultRate: 0,
  burstChance: 0,
  pauses: 0,
  windows: 0,
  readerStalls: 0,
  resends: 0,
  repairs: 0,
} as const;

/**
 * The listings focus: listings of live generations while one item's batches go into two of them,
 * as a writer rotates to the generation it made ahead (lib/log/read/visibility.ts `epochGroups`),
 * or as the item moves to another writer (lib/log/read/tail-cut.ts); or point reads of the item
 * as it moves (`point`: lib/log/read/reader.ts `markerHeld`). Few writers and items,
 * rotations frequent or none, merges that come late (a retirement under the read makes it start
 * over).
 */
export function listings(c: SimConfig, r: Rng): void {
  const window = r.pick(['rotation', 'rotation', 'moved', 'moved', 'point'] as const);
  const moved = window !== 'rotation';
  Object.assign(c, {
    steer: { window, chance: r.pick([0.5, 0.8]), count: r.between(5, 10) },
    writers: moved ? r.between(2, 3) : r.between(1, 2),
    slots: moved ? r.between(2, 3) : c.slots,
    // Moved: no rotation either (a retirement under the read makes it start over).
    mergeEveryCommits: moved ? 1_000 : r.between(2, 3),
    mergeEveryBytes: 2 ** 30,
    mergeIdleMs: 6_000,
    merges: 0,
    items: r.between(1, 3),
    hot: 0.8,
    deliveries: r.between(18, 30),
    reads: r.between(12, 24),
    // No noise: the holds set the interleaving, and a failed step, a stall or a takeover (which
    // starts the read over) closes a window.
    burstChance: 0,
    readerStalls: 0,
    windows: 0,
    resends: 0,
    skewMs: 0,
    clockMoves: 0,
    jumps: 0,
    renewalsLost: 0,
    crashes: 0,
    faultRate: 0,
    pauses: 0,
    maintains: r.between(0, 1),
  });
}

/**
 * The own-merges focus: writers' own merges of generations into the base, with one of three
 * windows steered into them (test/sim/steer.ts): the log's first base, made while a pass purges
 * an item only the merged generation holds (lib/log/maintain/purge.ts: a purge that listed no
 * base lists the log again before it drops tombstones); point reads of such items that read the
 * generation as its retirement deletes it (lib/log/read/reader.ts: a definite answer only after
 * the layout check); or a pass counting the base for the listing projection while a second
 * maintainer's pass purges an item of it (lib/log/projection/projection.ts: the projection is
 * used only if it describes the base read). Writers keep their slots until a window runs every
 * lease out (none is lost otherwise: the base is made by writers' own merges), rotate often, and
 * spread their batches over several items; no faults (a failed step closes the window).
 */
export function ownMerges(c: SimConfig, r: Rng): void {
  const writers = r.between(1, 2);
  const window = r.pick(['purge', 'vanish', 'overtaken'] as const);
  Object.assign(c, {
    steer: window === 'vanish' ? { window, chance: r.pick([0.5, 0.8]), count: r.between(3, 8) } : { window, chance: 1, count: 1 },
    writers,
    slots: writers,
    mergeEveryCommits: r.between(2, 3),
    mergeEveryBytes: 2 ** 30,
    mergeIdleMs: 0,
    merges: r.between(1, 3),
    closes: 0,
    // Vanish, overtaken: items that come late, a few batches each (an item only one generation,
    // or only the base, holds).
    items: window === 'purge' ? r.between(3, 5) : r.between(8, 12),
    hot: 0,
    deliveries: r.between(18, 30),
    reads: r.between(8, 16),
    // Overtaken: a pass after the base has rows (a second maintainer takes over).
    maintains: window === 'overtaken' ? r.between(3, 4) : r.between(1, 2),
    maintainers: window === 'overtaken' ? 2 : 1,
    deletions: r.between(0, 2),
    deletionRetentionMs: 0,
    redeliverDeletes: false,
    renewalsLost: 0,
    ...QUIET,
  });
}

/**
 * The sealing focus: takeovers of a writer about to make its epoch's first generation
 * (lib/log/write-seal.ts: the seal lists the epoch's generations after its fence;
 * lib/log/read/visibility.ts: a zombie's generation below a sealed epoch). One slot, so
 * each delivery to another writer takes it over; no rotation, so each epoch makes one generation;
 * no faults but the steered ones (a failed step closes the window).
 */
export function sealing(c: SimConfig, r: Rng): void {
  Object.assign(c, {
    steer: { window: r.pick(['listed', 'zombie'] as const), chance: r.pick([0.5, 0.8]), count: r.between(3, 8) },
    // Three or more: a zombie window's second takeover is by a writer that is neither the zombie
    // nor the first taker.
    writers: r.between(3, 4),
    slots: 1,
    renewalsLost: 1,
    mergeEveryCommits: 1_000,
    mergeEveryBytes: 2 ** 30,
    mergeIdleMs: 0,
    merges: 0,
    closes: 0,
    items: r.between(1, 3),
    hot: r.pick([0.5, 0.8]),
    deliveries: r.between(18, 30),
    reads: r.between(12, 24),
    maintains: r.between(1, 3),
    maintainers: 1,
    burstChance: 0,
    readerStalls: 0,
    windows: 0,
    resends: 0,
    faultRate: 0,
    crashes: 0,
    pauses: 0,
    clockMoves: r.between(0, 2),
    // One clock: a lease moved past its ttl has run out for every process.
    skewMs: 0,
    jumps: 0,
  });
}


/**
 * The late focus: a commit of an ended epoch lands after its client moved on (test/sim/steer-late.ts).
 * `ended` and `frozen`: two writers with a slot each, rotating often, and a delete's tombstone
 * dropped by the pass that purged it (deletion retention 0): an add that timed out lands after
 * the item was retried through the other writer, deleted and purged (lib/log/write/writer.ts: the
 * writer seals its epoch before it goes on); a writer merges a generation that a pass sealed,
 * merged and purged meanwhile (lib/log/write/own-merges.ts: only in the current epoch).
 * `fenced`: one slot and three or four writers, so a delivery to another writer takes the slot
 * over (lib/log/write/writer.ts: the claims come after the epoch check). No faults but the
 * steered ones (a failed step closes the window), one clock.
 */
export function late(c: SimConfig, r: Rng): void {
  const window = r.pick(['ended', 'fenced', 'frozen'] as const);
  const ended = window !== 'fenced';
  Object.assign(c, {
    steer: { window, chance: r.pick([0.5, 1]), count: 1 },
    writers: ended ? 2 : r.between(3, 4),
    slots: ended ? 2 : 1,
    mergeEveryCommits: ended ? r.between(2, 3) : 1_000,
    mergeEveryBytes: 2 ** 30,
    mergeIdleMs: 0,
    merges: ended ? r.between(0, 2) : 0,
    closes: 0,
    items: r.between(2, 5),
    hot: ended ? 0 : r.pick([0.5, 0.8]),
    deliveries: r.between(18, 30),
    reads: r.between(8, 16),
    maintains: r.between(1, 2),
    maintainers: 1,
    deletions: 0,
    deletionRetentionMs: 0,
    redeliverDeletes: false,
    renewalsLost: ended ? 0 : 1,
    ...QUIET,
  });
}

/**
 * The zombie-seals focus: the sealing focus's `zombie` window, where the zombie's own seal of its
 * epoch comes after a pass cleaned up its epoch's seal (test/sim/steer-zombie.ts, steer-late.ts
 * `superseded`; lib/log/write-seal.ts: a seal below a sealed epoch seals nothing;
 * lib/log/maintain/maintain.ts: the clean-up keeps each slot's highest seal).
 */
export function zombieSeals(c: SimConfig, r: Rng): void {
  sealing(c, r);
  Object.assign(c, { steer: { window: 'superseded', chance: r.pick([0.5, 0.8]), count: r.between(3, 8) }, items: r.between(2, 4), deletions: 0, deletionRetentionMs: 0, redeliverDeletes: false });
}

/**
 * The stale-merges focus: a maintenance pass overtaken at a merge goes on with the
 * listing it took before (test/sim/steer-merges.ts `stale`; lib/log/maintain/maintain.ts: a pass
 * stops once another maintainer holds its lease). Each writer its own slot, one generation per
 * epoch and no merges of their own, so passes merge; lease renewals lose their answers and the
 * clock moves now and then, so epochs end and their generations are sealed; two maintainers. No
 * faults but the steered ones.
 */
export function staleMerges(c: SimConfig, r: Rng): void {
  const writers = r.between(2, 3);
  Object.assign(c, {
    steer: { window: 'stale', chance: 1, count: r.between(1, 3) },
    writers,
    slots: writers,
    mergeEveryCommits: 1_000,
    mergeEveryBytes: 2 ** 30,
    mergeIdleMs: 0,
    merges: 0,
    closes: 0,
    items: r.between(6, 10),
    hot: 0,
    deliveries: r.between(18, 30),
    reads: r.between(8, 16),
    maintains: r.between(6, 10),
    maintainers: 2,
    deletions: 0,
    deletionRetentionMs: 0,
    redeliverDeletes: false,
    renewalsLost: 1,
    ...QUIET,
    clockMoves: r.between(3, 6),
  });
}

/**
 * The swept focus: a sweep of a generation whose marker is in flight while a takeover is between
 * its fence and its seal (test/sim/steer-swept.ts; lib/log/maintain/maintain.ts: the sweep takes
 * only epochs that are over). The sealing focus's shape (one slot, so each delivery to another
 * writer takes it over; one generation per epoch), without clock moves (a lease run out while
 * the window holds its takeover lets the pass take the slot and seal the epoch itself) and with
 * one maintainer.
 */
export function swept(c: SimConfig, r: Rng): void {
  sealing(c, r);
  Object.assign(c, { steer: { window: 'swept', chance: r.pick([0.5, 0.8]), count: r.between(1, 3) }, clockMoves: 0, deletions: 0, deletionRetentionMs: 3_600_000, redeliverDeletes: false });
}

/**
 * The unfenced focus: a read of a zombie's commit between a takeover's reading of the
 * generation's version and its seal (test/sim/steer.ts `unfenced`; lib/log/write-seal.ts: the
 * fence comes before the versions are read). The sealing focus's shape.
 */
export function unfenced(c: SimConfig, r: Rng): void {
  sealing(c, r);
  Object.assign(c, { steer: { window: 'unfenced', chance: r.pick([0.5, 0.8]), count: r.between(2, 6) } });
}
