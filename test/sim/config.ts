/**
 * What one seed's schedule runs with. Swarm testing: each seed draws its own mix of features
 * instead of every seed being the same uniform noise, and a focus (a scenario generator) that
 * steers the mix toward one protocol's windows:
 *  - takeover:    leases run out while writers commit (renewals lost, clocks moved past the ttl,
 *                 more writers than slots), readers busy: fencing, seals, zombies;
 *  - retirement:  frequent merges and maintenance passes with readers busy: reads racing
 *                 retirements, seal and record clean-up, projections, merge copies;
 *  - faults:      requests of the write path failing, timing out and landing late, on one item
 *                 several writers take in turn, late copies of item markers landing after the
 *                 marker's next PUT: acks, markers, cached tracks, claims;
 *  - generations: generations made, made ahead, rotated and given up under faults on their
 *                 making, late copies of their markers (timed out, or resent) landing after the
 *                 generation is gone: names, markers, sweeps;
 *  - deletes:     deletes, redelivered deletes and purges beside merges: tombstones, floors, D1;
 *  - own-reads:   a writer's reads of what it keeps of its commits, right as another commit of
 *                 its lands and is confirmed, beside other processes' reads of the same item;
 *  - relist:      reads steered into one of three races the read side's checks decide (a zombie's
 *                 commit above a seal, a retirement under a read, a seal cleaned up under a new
 *                 process's listing), by holds that wait for the other actor's step
 *                 (test/sim/steer.ts), few faults;
 *  - incarnations: items deleted and created again, each mostly through one writer (`sticky`):
 *                 as a writer's merge retires a generation, its deletion fails now and then (the
 *                 merge stays queued, its base commit done) and an item whose latest rows it holds
 *                 is deleted; after a delete a maintenance pass purges (after the item's writer
 *                 merged, unless the delete came with a failed retirement) and the item is created
 *                 again through its writer once the pass ended: new incarnations' seqs, a merge
 *                 tried again after a purge, a writer's memory of a retired generation;
 *  - repair:      repairs of a log in the lease table while writers beyond the slots wait for one,
 *                 deliveries to every writer as a repair's last record and switch land, the old
 *                 scope's leases held briefly (`repairLeaseHoldMs`) and then run out: a process that
 *                 read the old records before the switch takes one of their slots after it;
 *  - mixed:       everything a little;
 *  - listings:    listings of live generations steered while one item's batches go into two of
 *                 them: as its writer rotates to the generation it made ahead, or as it moves to
 *                 another writer (test/sim/steer.ts), no faults;
 *  - sealing:     a writer's lease runs out as it is about to make its epoch's first generation;
 *                 the fences of its epoch and later ones wait until a read of that generation's
 *                 commit ended, or the writer waits until its epoch's seal was cleaned up
 *                 (test/sim/steer.ts), no faults but the steered ones;
 *  - markers:     the faults generator, but more item-marker PUTs time out, and the late copy of
 *                 each lands only after another process's PUT of that marker (not its own
 *                 writer's retry): a writer's earlier body back in place after another took the item;
 *  - own-merges:  writers' own merges of generations into the base, with one of three races
 *                 steered into them (test/sim/steer.ts): a delete of an item only the merged
 *                 generation holds, purged by a pass that listed the log before the merge made the
 *                 base; a point read of such an item that reads the generation as its retirement
 *                 deletes it; or a pass counting the base for the listing projection, overtaken by
 *                 another maintainer's pass that purges an item of it. No faults;
 *  - late:        the commit of a writer whose epoch ended lands after its client moved on
 *                 (test/sim/steer-late.ts): a timed-out add landing once its item was retried
 *                 elsewhere, deleted and purged; a zombie's add above its takeover's seal, whose
 *                 batch the client gives up for another attempt and later gets delivered again;
 *                 or a writer's merge of a generation that a pass sealed, merged and purged
 *                 while the writer stalled. No faults but the steered ones.
 *  - zombie-seals: the sealing generator's zombie, whose epoch's seal was cleaned up, carried on
 *                 (test/sim/steer-late.ts `superseded`): its add lands, its epoch check times out,
 *                 and it seals its own epoch only after its item was retried elsewhere, deleted and
 *                 purged by a pass whose removal of the zombie's generation failed (the passes
 *                 before the delete fail their merges).
 *  - stale-merges: a maintenance pass overtaken at a merge goes on with the listing it took before
 *                 (test/sim/steer-merges.ts `stale`): another maintainer merged a generation of it,
 *                 failed to delete its files, purged an item of it and dropped the tombstone.
 *  - swept:       a writer taken over as it makes a generation; its marker lands only after a
 *                 maintenance pass, started at the takeover's fence, listed the log and the dataset
 *                 folders, and before the takeover's seal (test/sim/steer-swept.ts): a sweep of an
 *                 epoch that is fenced, not sealed.
 *  - repair-objects: the repair generator on a log whose markers are objects under the root: a
 *                 writer of the old scope that took a slot after the switch has no sentinel to
 *                 miss at its marker reads.
 *  - unfenced:    a zombie's commit read between a takeover's reading of its generation's version
 *                 and its seal (test/sim/steer.ts `unfenced`).
 *  - repair-lost: the repair generator, each repair losing its leases as it is about to seal, while
 *                 a writer takes a slot and marks a generation (test/sim/steer-repair.ts).
 *  - switch-late: the repair generator on one slot, each repair's switch timing out and landing
 *                 after a writer took the slot of the old scope (test/sim/steer-repair.ts).
 * Each feature draws from a stream of its own, forked from the seed in a fixed order; the focus
 * is drawn from the seed unless the caller sets it (the mutants run targets a guard's windows).
 */
import { FOCUSES, type Focus, type SimConfig } from './config-types.ts';
import { Rng } from './prng.ts';
import { late, listings, ownMerges, sealing, staleMerges, swept, unfenced, zombieSeals } from './steered-foci.ts';

export { FOCUSES, type CoordChoice, type Focus, type SimConfig, type SteerWindow } from './config-types.ts';

/**
 * The foci drawn by the focus stream. Those added later have streams of their own, drawn after
 * every other, at a fixed chance: the seeds' other draws stay as they were.
 */
const DRAWN = FOCUSES.filter((f) => f !== 'listings' && f !== 'sealing' && f !== 'own-merges' && f !== 'markers' && f !== 'late' && f !== 'zombie-seals' && f !== 'stale-merges' && f !== 'swept' && f !== 'repair-objects' && f !== 'unfenced' && f !== 'repair-lost' && f !== 'switch-late');

export function pickConfig(seed: number, focus?: Focus): SimConfig {
  const rng = new Rng(seed * 7919 + 17);
  const f = () => rng.fork();
  const base = f();
  const coordRng = f();
  const delRng = f();
  const clockRng = f();
  const faultRng = f();
  const workRng = f();
  const focusRng = f();
  const repairRng = f(); // drawn after every other stream: the seeds' other draws stay as they were
  const listingsRng = f(); // after those too, for the same reason
  const sealingRng = f(); // and so on
  const ownMergesRng = f();
  const markersRng = f();
  const lateRng = f();
  const zombieSealsRng = f();
  const staleMergesRng = f();
  const sweptRng = f();
  const repairObjectsRng = f();
  const unfencedRng = f();
  const repairLostRng = f();
  const switchLateRng = f();
  const coord = coordRng.pick(['objects', 'table', 'sqlite'] as const);
  const deletions = delRng.chance(0.4) ? delRng.between(1, 4) : 0;
  const skewed = clockRng.chance(0.5);
  // Drawn either way: a forced focus replays as the seed's own.
  const picked = focusRng.pick(DRAWN);
  const firstDrawn: Focus = listingsRng.chance(1 / 11) ? 'listings' : picked;
  const secondDrawn: Focus = sealingRng.chance(1 / 12) ? 'sealing' : firstDrawn;
  const thirdDrawn: Focus = ownMergesRng.chance(1 / 13) ? 'own-merges' : secondDrawn;
  const fourthDrawn: Focus = markersRng.chance(1 / 14) ? 'markers' : thirdDrawn;
  const fifthDrawn: Focus = lateRng.chance(1 / 15) ? 'late' : fourthDrawn;
  const sixthDrawn: Focus = zombieSealsRng.chance(1 / 16) ? 'zombie-seals' : fifthDrawn;
  const seventhDrawn: Focus = staleMergesRng.chance(1 / 17) ? 'stale-merges' : sixthDrawn;
  const eighthDrawn: Focus = sweptRng.chance(1 / 18) ? 'swept' : seventhDrawn;
  const ninthDrawn: Focus = repairObjectsRng.chance(1 / 19) ? 'repair-objects' : eighthDrawn;
  const tenthDrawn: Focus = unfencedRng.chance(1 / 20) ? 'unfenced' : ninthDrawn;
  const eleventhDrawn: Focus = repairLostRng.chance(1 / 21) ? 'repair-lost' : tenthDrawn;
  const drawn: Focus = switchLateRng.chance(1 / 22) ? 'switch-late' : eleventhDrawn;
  const cfg: SimConfig = {
    focus: focus ?? drawn,
    writers: base.between(2, 4),
    slots: base.pick([1, 2, 2, 3]),
    leaseTtlMs: 10_000,
    mergeEveryCommits: base.between(2, 4),
    mergeEveryBytes: base.pick([2 ** 30, 8_000, 20_000]),
    mergeIdleMs: base.pick([0, 0, 1_500, 6_000]),
    cachedItems: base.pick([1, 2, 100]),
    maxBatchesPerCommit: base.pick([1, 512]),
    claimRetentionMs: base.pick([20_000, 3_600_000]),
    faultRate: faultRng.pick([0, 0.02, 0.05, 0.1]),
    priorityBias: base.pick([0, 0.5, 0.9]),
    deliveries: workRng.between(10, 28),
    reads: workRng.between(6, 16),
    items: workRng.between(2, 5),
    maintains: workRng.between(0, 3),
    merges: workRng.between(0, 3),
    closes: workRng.between(0, 2),
    clockMoves: workRng.between(0, 4),
    pauses: workRng.between(0, 4),
    coord,
    leases: coord === 'table' ? 'table' : coordRng.pick(['table', 'local'] as const),
    maintainers: base.chance(0.5) ? 2 : 1,
    deletions,
    deletionRetentionMs: deletions > 0 ? delRng.pick([0, 3_600_000]) : 3_600_000,
    redeliverDeletes: deletions > 0 && delRng.chance(0.5),
    failures: workRng.pick([0, 0, 0.1, 0.25]),
    reuseBuffers: workRng.chance(0.5),
    blobs: 0.3,
    renewalsLost: clockRng.pick([0, 0.5, 1]),
    skewMs: skewed ? clockRng.pick([200, 2_000, 6_000]) : 0,
    jumps: clockRng.chance(0.4) ? clockRng.between(1, 3) : 0,
    crashes: faultRng.pick([0, 0, 1, 1, 2, 3]),
    crashLanding: faultRng.pick([0, 0.5, 1]),
    resends: faultRng.chance(0.5) ? faultRng.pick([0.05, 0.2]) : 0,
    lateMarkers: 0,
    burstChance: faultRng.chance(0.3) ? faultRng.pick([0.01, 0.03]) : 0,
    windows: faultRng.pick([0, 0.1, 0.3]),
    hot: workRng.pick([0, 0.5, 0.8]),
    readerStalls: workRng.pick([0, 0.05, 0.15]),
    reactiveReads: workRng.pick([0, 4, 8]),
    reactiveChance: workRng.pick([0.1, 0.3]),
    reactions: workRng.pick([0, 4, 8]),
    takeoverOnCommit: 0,
    readOnLanding: workRng.pick([0, 0.2]),
    holdOnLanding: 0,
    readOnMerge: workRng.pick([0, 0.2]),
    repairs: 0,
    steer: null,
    clockAfterRepair: 0,
    repairRenews: false,
    deliverOnRepair: 0,
    repairLoses: 0,
    switchLate: 0,
    sticky: 0,
    retireFaults: 0,
    deleteOnRetire: 0,
    passAfterDelete: 0,
    mergeBeforePass: 0,
    holdRecreate: 0,
  };
  focusOn(cfg, focusRng);
  if (cfg.focus !== 'own-merges' && cfg.focus !== 'late' && cfg.focus !== 'zombie-seals' && cfg.focus !== 'stale-merges' && cfg.focus !== 'swept' && cfg.focus !== 'unfenced' && cfg.repairs === 0 && cfg.coord === 'table' && cfg.deletions === 0 && repairRng.chance(0.4)) cfg.repairs = repairRng.between(1, 2);
  return cfg;
}


/** The focus's steering, over the swarm's draws. */
function focusOn(c: SimConfig, r: Rng): void {
  switch (c.focus) {
    case 'takeover':
      Object.assign(c, {
        writers: r.between(3, 4),
        slots: r.between(1, 2),
        renewalsLost: 1,
        clockMoves: r.between(3, 7),
        pauses: r.between(3, 8),
        priorityBias: r.pick([0.5, 0.9]),
        windows: r.pick([0.1, 0.3]),
        faultRate: r.pick([0, 0.02]),
        reads: r.between(12, 22),
        readerStalls: r.pick([0.05, 0.15]),
        reactiveReads: r.between(4, 12),
        reactions: r.between(4, 10),
        takeoverOnCommit: r.pick([0.3, 0.6]),
        readOnLanding: r.pick([0.3, 0.6]),
        // A sealer between reading an epoch's versions and writing its seal.
        slowSteps: { kinds: '^lance\\.(checkoutLatest|version)$|^fs\\.sync$', probability: r.pick([0.3, 0.6]) },
        maintains: r.between(1, 3),
        crashes: r.between(0, 2),
        hot: r.pick([0.5, 0.8]),
      });
      return;
    case 'retirement':
      Object.assign(c, {
        mergeEveryCommits: 2,
        merges: r.between(3, 6),
        maintains: r.between(3, 6),
        reads: r.between(25, 40),
        readerStalls: r.pick([0.15, 0.3]),
        reactions: r.between(6, 14),
        readOnMerge: r.pick([0.4, 0.8]),
        reactiveReads: r.between(4, 12),
        windows: r.pick([0.1, 0.3]),
        faultRate: r.pick([0, 0.02]),
        reuseBuffers: true,
        blobs: 0.6,
        hot: r.pick([0.5, 0.8]),
        clockMoves: r.between(1, 4),
      });
      return;
    case 'faults':
    case 'markers':
      // The markers focus is this one; only the late copies of item markers wait longer (schedule.ts).
      Object.assign(c, {
        writers: r.between(3, 4),
        slots: r.between(2, 3),
        faultRate: r.pick([0.02, 0.05]),
        burstChance: r.pick([0.01, 0.02]),
        burstTargets: ['obj.put', 'coord.put', 'sqlite.put', 'lance.add', 'lease.assertCurrent', 'fs.sync', 'obj.list', 'coord.get', 'sqlite.get'],
        resends: r.pick([0.05, 0.2]),
        crashLanding: r.pick([0.5, 1]),
        cachedItems: r.pick([2, 100]),
        hot: 0.8,
        items: r.between(1, 3),
        deliveries: r.between(20, 35),
        closes: r.between(0, 1),
        windows: r.pick([0.1, 0.3]),
      });
      // Markers that can land late: in objects or the lease table (a local SQLite file's cannot).
      if (c.focus === 'markers' && c.coord === 'sqlite') c.coord = 'objects';
      return;
    case 'generations':
      Object.assign(c, {
        mergeEveryCommits: 2,
        mergeEveryBytes: r.pick([8_000, 20_000]),
        mergeIdleMs: r.pick([1_500, 6_000]),
        burstChance: r.pick([0.01, 0.02]),
        burstTargets: ['obj.putIfAbsent', 'lance.createEmptyTable', 'fs.sync', 'obj.delete', 'lance.openTable'],
        faultRate: r.pick([0.02, 0.05]),
        deliveries: r.between(18, 30),
        maintains: r.between(2, 4),
        clockMoves: r.between(2, 5),
        merges: r.between(2, 5),
        resends: r.pick([0.2, 0.4]),
        lateMarkers: r.pick([0.3, 0.5]),
      });
      return;
    case 'deletes':
      Object.assign(c, {
        deletions: r.between(3, 6),
        deletionRetentionMs: 0,
        redeliverDeletes: r.chance(0.7),
        maintains: r.between(3, 6),
        merges: r.between(2, 5),
        items: r.between(2, 3),
        hot: r.pick([0.5, 0.8]),
        windows: r.pick([0.1, 0.3]),
      });
      return;
    case 'own-reads':
      Object.assign(c, {
        mergeEveryCommits: r.between(3, 6),
        mergeEveryBytes: 2 ** 30,
        faultRate: r.pick([0, 0.02]),
        windows: r.pick([0.2, 0.4]),
        hot: 0.8,
        items: r.between(1, 2),
        deliveries: r.between(20, 30),
        reactiveReads: r.between(8, 16),
        reactiveChance: r.pick([0.3, 0.5]),
        reactions: r.between(6, 14),
        readOnLanding: r.pick([0.4, 0.8]),
        readerStalls: 0,
        crashes: 0,
        closes: 0,
        holdOnLanding: r.pick([0.5, 1]),
      });
      return;
    case 'relist': {
      const window = r.pick(['fence', 'retirement', 'seal'] as const);
      Object.assign(c, {
        steer: { window, chance: r.pick([0.5, 0.8]), count: r.between(3, 8) },
        reads: r.between(12, 24),
        hot: r.pick([0.5, 0.8]),
        // Few faults and pauses: the holds set the interleaving, and a failed step closes a window.
        faultRate: r.pick([0, 0.01]),
        burstChance: 0,
        readerStalls: 0,
        windows: r.pick([0, 0.05]),
      });
      if (window === 'fence') {
        Object.assign(c, {
          writers: r.between(3, 4),
          slots: r.pick([1, 1, 2]),
          renewalsLost: 1,
          clockMoves: r.between(1, 4),
          maintains: r.between(1, 3),
          crashes: r.between(0, 1),
        });
      } else if (window === 'retirement') {
        Object.assign(c, {
          mergeEveryCommits: r.between(2, 3),
          mergeEveryBytes: 2 ** 30,
          merges: r.between(2, 5),
          maintains: r.between(1, 3),
          items: r.between(2, 4),
          deliveries: r.between(18, 30),
        });
      } else {
        // No merge before maintenance's: writers never rotate, merge nor close.
        Object.assign(c, {
          writers: r.between(2, 4),
          // One slot: each takeover seals the epoch before, and the pass's own epoch is the highest.
          slots: 1,
          mergeEveryCommits: 1_000,
          mergeEveryBytes: 2 ** 30,
          mergeIdleMs: 0,
          merges: 0,
          closes: 0,
          renewalsLost: 1,
          clockMoves: r.between(3, 6),
          maintains: r.between(2, 4),
          crashes: 0,
        });
      }
      return;
    }
    case 'incarnations':
      // Items deleted and created again, their generations merged and retired around the deletes
      // (some retirements failing half way), purges between: a new incarnation's seqs, a merge
      // tried again after a purge, a writer's memory of a retired generation.
      Object.assign(c, {
        deletions: r.between(4, 8),
        deletionRetentionMs: 0,
        redeliverDeletes: r.chance(0.5),
        writers: r.between(2, 3),
        slots: 3,
        items: r.between(1, 2),
        hot: r.pick([0.5, 0.8]),
        sticky: r.pick([0.8, 1]),
        mergeEveryCommits: r.between(2, 3),
        mergeIdleMs: 0,
        merges: r.between(1, 3),
        maintains: r.between(2, 4),
        maintainers: 1,
        retireFaults: r.pick([0.3, 0.6]),
        deleteOnRetire: r.pick([0.5, 1]),
        passAfterDelete: r.pick([0.6, 1]),
        mergeBeforePass: r.pick([0.3, 0.6]),
        holdRecreate: r.pick([0.5, 1]),
        // Reads as merges commit and retire (a merge tried again after a purge puts rows back).
        reactions: r.between(6, 14),
        readOnMerge: r.pick([0.4, 0.8]),
        faultRate: r.pick([0, 0.02]),
        clockMoves: r.between(0, 2),
        crashes: r.between(0, 1),
      });
      return;
    case 'repair':
    case 'repair-objects':
    case 'repair-lost':
    case 'switch-late':
      // Writers beyond the slots whose leases run out (so the repair gets every slot), waiting for
      // a slot while the repair holds them all and switches; the old scope's leases held briefly.
      Object.assign(c, {
        coord: 'table',
        leases: 'table',
        deletions: 0,
        deletionRetentionMs: 3_600_000,
        redeliverDeletes: false,
        repairs: r.between(2, 4),
        repairLeaseHoldMs: r.pick([1, 1_000, 4_000]),
        clockAfterRepair: r.pick([0.5, 1]),
        deliverOnRepair: r.pick([0.5, 1]),
        writers: r.between(3, 4),
        slots: r.between(1, 2),
        // Long leases: a writer waits that long for a slot (across the repair's switch), and the
        // repair's own leases outlast its slow steps.
        leaseTtlMs: r.pick([30_000, 60_000]),
        maintainers: 1,
        // Uniform releases: a repair starved while others' sleeps move time on loses its leases.
        priorityBias: 0,
        renewalsLost: 1,
        repairRenews: true,
        // A repair takes every slot of the old scope (a request each): one fault ends it.
        faultRate: 0,
        burstChance: 0,
        // Time passes by the processes' sleeps and after each repair: a clock moved past the ttl
        // while a repair runs takes its leases away (it then refuses to switch).
        clockMoves: 0,
        jumps: 0,
        skewMs: 0,
        deliveries: r.between(20, 32),
        maintains: r.between(1, 3),
      });
      // repair-objects: the log keeps its markers as objects under the root (moved into the lease
      // table by the repair, which leaves the old ones): a writer of the old scope finds no
      // sentinel gone.
      if (c.focus === 'repair-objects') c.coord = 'objects';
      // repair-lost: every repair loses its leases as it is about to seal (test/sim/steer-repair.ts).
      if (c.focus === 'repair-lost') c.repairLoses = 1;
      // switch-late: each repair's switch lands late (test/sim/steer-repair.ts), on one slot: the
      // writer of the new records takes the one the old scope's writer holds.
      if (c.focus === 'switch-late') Object.assign(c, { switchLate: 1, slots: 1 });
      return;
    case 'listings':
      listings(c, r);
      return;
    case 'sealing':
      sealing(c, r);
      return;
    case 'own-merges':
      ownMerges(c, r);
      return;
    case 'late':
      late(c, r);
      return;
    case 'zombie-seals':
      zombieSeals(c, r);
      return;
    case 'stale-merges':
      staleMerges(c, r);
      return;
    case 'swept':
      swept(c, r);
      return;
    case 'unfenced':
      unfenced(c, r);
      return;
    case 'mixed':
      return;
  }
}
