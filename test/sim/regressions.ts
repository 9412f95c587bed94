/**
 * Seeds that found bugs, by name. They run on every `npm run test:sim` and in sim.test.ts, so
 * a fix that regresses shows at once. Add a seed when the harness finds a new bug. A change to
 * the workload or the scheduler changes what a seed does: re-find them then (and say so).
 */
export const REGRESSION_SEEDS: ReadonlyArray<{ seed: number; name: string }> = [
  // Issue 8 race 1 (same root): zombie w1.2 commits after w2.1 acquired its slot but before the
  // seal (its generation is created after the sealer's listing, so the seal omits it); a reader
  // returns x1, then x1 vanishes (I3).
  { seed: 5124, name: 'race 1: unfenced zombie commit seen before the seal, then gone' },
  // Issue 8 race 2: zombie w1.1 commits x3#1 above the seal w2.1 wrote, its epoch check fails
  // with UnavailableError (answer lost), the rows stay in ownRows; a redelivery of x3#1 to w1.1
  // is acked duplicate:true from them; no read ever shows it (I4).
  { seed: 5147, name: 'race 2: duplicate ack from ownRows that never passed the epoch check' },
  // Issue 8 race 3: w3.1 caches x0, w4.1/w2.1 write x0, w3.1's marker PUT lands but its answer
  // is lost, the retry trusts w3.1's old cache and writes seqs 4-5 again (I5).
  { seed: 1, name: 'race 3: stale cached track trusted after a failed attempt' },
  // Issue 8 race 3, related: w2.2's add of x1's creation lands, the answer is lost; the rows are
  // in neither ownRows nor the storage read (own generation skipped), so the next creation
  // attempt is written at seq 1 too (I5).
  { seed: 27, name: 'race 3 (related): landed add neither in ownRows nor read back' },
  // Issue 8 race 4: r1 lists meta before the base exists and before the retire marker, then
  // reads the generation after its newest manifest was deleted: Lance serves an older version
  // without error and x3 (acked) is "not found" (I1).
  { seed: 113, name: 'race 4: read racing a retirement returns an older state' },
  // Found by a soak after the fixes: a gen. marker PUT timed out and landed after maintenance
  // swept the fenced epoch's unmarked folder; every seal attempt then failed on the missing
  // dataset and reads stayed pending forever (fixed: a marked generation without a dataset never
  // had a commit, so it is sealed out).
  { seed: 102077, name: 'late gen. marker after the sweep: seal it out' },
  // Found once reads also went through items() (different interleavings): r2 lists meta while
  // x0's generation is sealed and the base does not exist yet, then stalls; maintenance merges,
  // retires and deletes the generation and deletes its (no longer highest) seal; r2's seal GET
  // finds nothing, so it took the generation for a zombie's and read nothing of x0 (I1).
  { seed: 910099, name: 'seal deleted between the listing and its GET' },
  // Found by CI after the writer's merge copies (the schedules moved): w1.2 starts x0#0 first,
  // stalls 21 s, and claims after w2.1's claim of the same checkpoint expired (20 s retention):
  // the documented claim window, which the checker took for an I4 break because it measured
  // from the append that started first rather than in both orders (test/unit/invariants-i4.test.ts).
  { seed: 842, name: 'a stalled first starter claims after the window: documented, not I4' },
  // Review39 (found by the adversarial review, then by this seed once a writer's point reads
  // ran as an actor of their own, after a reader's read of the same item): w2.1's commit of x1
  // landed and waited for its epoch check; r2's fold showed it; w2.1's fold from memory, which
  // did not hold it yet, showed less (I3). Fails with the landing mark removed (lib/log/writer.ts).
  { seed: 32303, name: "review39: a writer's read from memory missed its landed commit a reader showed" },
];
