/**
 * Seeds that reach a guard's window, by the guard they prove (lib/guards.ts). They run with every
 * guard on in every `npm run test:sim` and in sim.test.ts (they must pass), and
 * test/sim/mutants.test.ts asserts that each still fails with its guard switched off. A change to
 * the workload or the scheduler changes what a seed does: when one stops failing on its mutant,
 * replace it by a seed the mutants run finds (`npm run test:mutants -- --only GUARD`).
 */
import type { Guard } from '../../lib/guards.ts';
import type { Focus } from './config.ts';

export interface RegressionSeed {
  seed: number;
  /** The guard whose window it reaches (absent: a bug it found that no guard names). */
  guard?: Guard;
  /** The scenario generator it was found with (test/sim/config.ts). */
  focus: Focus;
  /** The window it reaches, in a few words. */
  name: string;
}

export const REGRESSION_SEEDS: readonly RegressionSeed[] = [
  // An append whose takeover sealed the previous epoch failed on a Lance error (fs.sync timed
  // out) and answered it raw, without a code (fixed: UNAVAILABLE; lib/log/write-seal.ts writeSeal).
  { seed: 154, focus: 'takeover', name: 'a takeover seal failing on a Lance error answered an append untyped' },
  // A repair that lost a slot's lease while it ran sealed the live epoch of the writer that took
  // the slot (fixed: it seals only epochs below the one it holds; lib/log/admin/rehome.ts).
  { seed: 500008, focus: 'repair', name: "a repair sealed the live epoch of a writer that took a slot it lost" },
  // A writer that took an old-scope slot just before the switch kept it after finding the records
  // rebuilt, and its acks were hidden by the new scope's seals (fixed: it ends its epoch).
  { seed: 500080, focus: 'repair', name: 'a writer kept its old-scope slot after the records were rebuilt' },
  // Every append failed, so no log was made: the final repair's LOG_NOT_FOUND was counted as a
  // failure (fixed in the simulation: accepted when nothing was acked, as for the final read).
  { seed: 2011, focus: 'mixed', name: 'a final repair of a log no append made' },
  // The same with no repair: every append failed before the log was made, and the final
  // maintenance's LOG_NOT_FOUND was counted as a failure (fixed in the simulation; found by the soak).
  { seed: 39716, focus: 'mixed', name: 'a final maintenance of a log no append made' },
  // A listing read a writer's older generation before an item's batch went into it, and the
  // generation it made ahead after the item's next batch: the later batch without the earlier
  // (fixed: each epoch's generations read newest first, and whole-log reads count again; either
  // alone now keeps this seed passing).
  { seed: 6477, focus: 'relist', name: "a listing across a writer's rotation to its made-ahead generation" },
  // A purge listed the log before a writer's merge made the base, counted the generation as it
  // was being retired (its files going: none of the deleted rows), and dropped the tombstone
  // (deletion retention 0): the rows came back from the base (fixed: a purge that found no base
  // lists again before it drops tombstones; found by the soak).
  { seed: 30247, guard: 'purge-relists-before-drop', focus: 'faults', name: 'a purge counting a generation being retired into a base it had not listed' },
  // A seed per guard the mutants run found (the first it found; two where a generator of its own
  // came later), each failing on its mutant.
  { seed: 300024, guard: 'fence-before-seal', focus: 'takeover', name: 'a read at the latest version while a takeover seals' },
  { seed: 300000, guard: 'fence-before-seal', focus: 'unfenced', name: "a read of a zombie's commit between the takeover's version read and its seal" },
  { seed: 300000, guard: 'epoch-check', focus: 'takeover', name: 'a takeover between a commit and its ack' },
  { seed: 300008, guard: 'end-epoch-on-unknown-outcome', focus: 'faults', name: 'a commit whose outcome was unknown, kept as confirmed' },
  { seed: 300001, guard: 'cached-track-marker-check', focus: 'faults', name: 'a cached track trusted after another writer wrote the item' },
  { seed: 300003, guard: 'marker-before-commit', focus: 'faults', name: 'another writer trusting its copy while a commit lands' },
  { seed: 300002, guard: 'landing-mark', focus: 'own-reads', name: 'a read of its own items while a commit lands' },
  { seed: 300011, guard: 'claims', focus: 'faults', name: 'two first acks of one checkpoint through two writers' },
  { seed: 300003, guard: 'blob-copied-at-validation', focus: 'retirement', name: 'a blob buffer reused once its batch was acked' },
  { seed: 300000, guard: 'delete-guard', focus: 'deletes', name: 'a guarded delete redelivered after newer events' },
  { seed: 300008, guard: 'seal-earlier-epochs', focus: 'takeover', name: 'an earlier epoch left unsealed by a takeover' },
  { seed: 300014, guard: 'wait-for-seal', focus: 'takeover', name: 'a read meeting a fenced, unsealed epoch' },
  { seed: 300017, guard: 'sealed-version', focus: 'takeover', name: 'a sealed generation read past its seal' },
  { seed: 300000, guard: 'tombstones-hide', focus: 'deletes', name: 'deleted rows still in an unmerged generation' },
  { seed: 300002, guard: 'rows-files-match-base', focus: 'retirement', name: 'rows files built from an older base' },
  { seed: 300002, guard: 'cleanup-keeps-seals-with-generations', focus: 'takeover', name: 'a seal cleaned up while its generations remain' },
  { seed: 300000, guard: 'purge-waits-for-shards', focus: 'deletes', name: 'a purge while a generation still holds deleted rows' },
  { seed: 300000, guard: 'deleted-seq-records', focus: 'incarnations', name: "a new incarnation after a purge dropped the tombstone" },
  { seed: 300000, guard: 'merge-base-commit-once', focus: 'incarnations', name: 'a merge retried after its base commit landed, under a delete' },
  { seed: 300012, guard: 'own-rows-listed-only', focus: 'incarnations', name: "a writer's own rows of a retired generation joining a read after a delete" },
  { seed: 300009, guard: 'relist-sees-retirement', focus: 'relist', name: "a read racing a retirement" },
  { seed: 300004, guard: 'relist-sees-fence', focus: 'relist', name: "a read at the latest version racing a fence" },
  { seed: 300002, guard: 'retired-marker', focus: 'relist', name: "a read of a generation being retired" },
  { seed: 300003, guard: 'relist-on-vanished-seal', focus: 'relist', name: "a seal cleaned up under a new listing" },
  { seed: 300020, guard: 'read-newest-first', focus: 'listings', name: "a read across a writer's rotation to its made-ahead generation" },
  { seed: 300013, guard: 'recount-live-generations', focus: 'listings', name: 'a listing while an item moves to another writer' },
  { seed: 300006, guard: 'point-read-marker-check', focus: 'listings', name: 'a point read while an item moves to another writer' },
  { seed: 300000, guard: 'keep-leases-on-failed-switch', focus: 'switch-late', name: "a repair's switch landing after a writer took a slot of the old scope" },
  { seed: 300000, guard: 'repair-seals-below-held', focus: 'repair-lost', name: "a writer that took a slot after the repair lost its lease" },
  { seed: 300024, guard: 'recheck-record-after-slot', focus: 'repair-objects', name: "a writer of a log with object markers that took a slot of the old scope after a repair's switch" },
  { seed: 300001, guard: 'gen-marker-sent-once', focus: 'generations', name: "a generation's marker resent, its earlier copy landing after the retirement" },
  { seed: 300009, guard: 'give-up-failed-names', focus: 'generations', name: 'a generation name made again after its marker timed out' },
  { seed: 300011, guard: 'put-sent-once', focus: 'faults', name: "a writer's item marker resent, landing over another writer's" },
  { seed: 300005, guard: 'seal-lists-after-fence', focus: 'sealing', name: 'a generation made between a takeover listing the log and its fence' },
  { seed: 300008, guard: 'zombie-generations-invisible', focus: 'sealing', name: "a zombie's generation made after its epoch's seal was cleaned up" },
  { seed: 300005, guard: 'purge-relists-before-drop', focus: 'own-merges', name: "a purge that listed no base, as a writer's merge made it out of the generation it counted" },
  { seed: 300000, guard: 'errors-after-layout-check', focus: 'own-merges', name: 'a point read of an item whose only generation was retired under it' },
  { seed: 300001, guard: 'projection-describes-base', focus: 'own-merges', name: 'a projection of the base before a purge, written by a pass another maintainer overtook' },
  { seed: 300004, guard: 'unique-marker-bodies', focus: 'markers', name: "a writer's earlier marker body landing after another writer took the item" },
  { seed: 300004, guard: 'retire-given-up-once-marker-seen', focus: 'generations', name: "a given-up generation retired before its late marker landed" },
  { seed: 300004, guard: 'seal-own-epoch-before-next', focus: 'late', name: 'a timed-out add landing after its item was retried elsewhere, deleted and purged' },
  { seed: 300026, guard: 'claim-after-epoch-check', focus: 'late', name: "a zombie's batch given up for another attempt and delivered again later" },
  { seed: 300006, guard: 'merge-own-only-in-current-epoch', focus: 'late', name: "a writer's merge of its frozen generation after a pass sealed, merged and purged it" },
  { seed: 300000, guard: 'superseded-epoch-seals-nothing', focus: 'zombie-seals', name: "a zombie's own seal of its epoch after a pass cleaned up its seal and purged a deleted item" },
  { seed: 300003, guard: 'maintainer-stops-when-overtaken', focus: 'stale-merges', name: 'an overtaken pass merging, from its old listing, a generation retired meanwhile whose files stayed' },
  { seed: 300023, guard: 'cleanup-keeps-highest-seal', focus: 'zombie-seals', name: "a zombie's generation under a slot whose highest sealed epoch lost its last generation in the pass that purged" },
  { seed: 300000, guard: 'sweep-only-ended-epochs', focus: 'swept', name: "a generation swept while its epoch was fenced, its late marker then listed by the takeover's seal" },
];
