/**
 * The mutants run's catalogue: for each guard (lib/guards.ts; docs/design/invariants.md,
 * "Guards"), what the simulation must report when it is switched off. A mutant counts as found
 * only by a violation of one of `finds`: the invariants the guard keeps (or, for a guard that
 * keeps reads answering, AVAIL/FINAL), never by any other check that happens to fail.
 */
import { GUARDS, type Guard } from '../../lib/guards.ts';
import type { Focus } from './config.ts';
import type { ViolationKind } from './kinds.ts';

export interface MutantSpec {
  guard: Guard;
  finds: readonly ViolationKind[];
  /** The scenario generator whose seeds reach the guard's windows (test/sim/config.ts). */
  focus: Focus;
  /**
   * Found in at least 5% of its generator's seeds (measured over 300: docs/design/invariants.md,
   * "Guards"). Only proven mutants run in CI (test/sim/mutants.test.ts); the others are the
   * simulation's known blind spots, listed there until a generator reaches their windows.
   */
  proven: boolean;
}

const ALL: readonly ViolationKind[] = ['I1', 'I2', 'I3', 'I4', 'I5', 'D1'];
const AVAILABILITY: readonly ViolationKind[] = ['I1', 'AVAIL', 'FINAL'];

const FINDS: Record<Guard, readonly ViolationKind[]> = {
  'epoch-check': ['I1', 'I3', 'I4'],
  'end-epoch-on-unknown-outcome': ['I1', 'I3', 'I4', 'I5'],
  'seal-own-epoch-before-next': ['I1', 'I3', 'I4', 'I5', 'D1'],
  'cached-track-marker-check': ['I1', 'I4', 'I5'],
  'unique-marker-bodies': ['I1', 'I4', 'I5'],
  'marker-before-commit': ['I1', 'I4', 'I5'],
  'landing-mark': ['I3'],
  claims: ['I4'],
  'claim-after-epoch-check': ['I4'],
  'own-rows-listed-only': ALL,
  'merge-own-only-in-current-epoch': ['I1', 'I3', 'I4', 'I5', 'D1'],
  'merge-base-commit-once': ['D1'],
  'give-up-failed-names': AVAILABILITY,
  'retire-given-up-once-marker-seen': AVAILABILITY,
  'blob-copied-at-validation': ['I1'],
  'deleted-seq-records': ['I1', 'I4', 'I5', 'D1'],
  'delete-guard': ['I1'],
  'fence-before-seal': ['I1', 'I3', 'I4'],
  'seal-lists-after-fence': ['I1', 'I3', 'I4'],
  'superseded-epoch-seals-nothing': ['I1', 'I3', 'I4', 'I5', 'D1', 'AVAIL', 'FINAL'],
  'seal-earlier-epochs': ['I1', 'I3'],
  'relist-sees-retirement': ['I1', 'I3'],
  'relist-sees-fence': ['I1', 'I3', 'I4'],
  'retired-marker': ['I1', 'I3'],
  'wait-for-seal': ['I1', 'I3', 'AVAIL'],
  'zombie-generations-invisible': ['I1', 'I3', 'I4', 'I5', 'AVAIL'],
  'sealed-version': ['I1', 'I3', 'I4', 'I5'],
  'relist-on-vanished-seal': ['I1', 'I3'],
  'errors-after-layout-check': ['I1', 'I3'],
  'read-newest-first': ['I2'],
  'recount-live-generations': ['I2'],
  'point-read-marker-check': ['I2'],
  'tombstones-hide': ['D1'],
  'projection-describes-base': ['I1', 'I2', 'I3', 'D1', 'FINAL'],
  'rows-files-match-base': ['I1', 'I2', 'I3', 'D1', 'FINAL'],
  'maintainer-stops-when-overtaken': ALL,
  'sweep-only-ended-epochs': AVAILABILITY,
  'cleanup-keeps-highest-seal': ['I1', 'I3', 'I4', 'I5', 'D1'],
  'cleanup-keeps-seals-with-generations': ['I1', 'I3'],
  'purge-waits-for-shards': ['D1'],
  'purge-relists-before-drop': ['D1'],
  'put-sent-once': ['I1', 'I4', 'I5'],
  'gen-marker-sent-once': AVAILABILITY,
  'recheck-record-after-slot': ['I1', 'I3', 'I4', 'I5'],
  'repair-seals-below-held': ['I1', 'I3', 'I4', 'I5'],
  'keep-leases-on-failed-switch': ['I1', 'I3', 'I4', 'I5'],
};

const FOCUS: Record<Focus, readonly Guard[]> = {
  takeover: [
    'epoch-check',
    'seal-earlier-epochs',
    'wait-for-seal',
    'sealed-version',
    'cleanup-keeps-seals-with-generations',
  ],
  retirement: ['rows-files-match-base', 'blob-copied-at-validation'],
  'own-reads': ['landing-mark'],
  relist: ['relist-sees-fence', 'relist-sees-retirement', 'retired-marker', 'relist-on-vanished-seal'],
  listings: ['read-newest-first', 'recount-live-generations', 'point-read-marker-check'],
  faults: ['end-epoch-on-unknown-outcome', 'cached-track-marker-check', 'marker-before-commit', 'claims', 'put-sent-once'],
  markers: ['unique-marker-bodies'],
  generations: ['give-up-failed-names', 'retire-given-up-once-marker-seen', 'gen-marker-sent-once'],
  deletes: ['purge-waits-for-shards', 'tombstones-hide', 'delete-guard'],
  incarnations: ['deleted-seq-records', 'merge-base-commit-once', 'own-rows-listed-only'],
  repair: [],
  mixed: [],
  sealing: ['seal-lists-after-fence', 'zombie-generations-invisible'],
  'own-merges': ['purge-relists-before-drop', 'errors-after-layout-check', 'projection-describes-base'],
  late: ['seal-own-epoch-before-next', 'claim-after-epoch-check', 'merge-own-only-in-current-epoch'],
  'zombie-seals': ['superseded-epoch-seals-nothing', 'cleanup-keeps-highest-seal'],
  'stale-merges': ['maintainer-stops-when-overtaken'],
  swept: ['sweep-only-ended-epochs'],
  'repair-objects': ['recheck-record-after-slot'],
  unfenced: ['fence-before-seal'],
  'repair-lost': ['repair-seals-below-held'],
  'switch-late': ['keep-leases-on-failed-switch'],
};

function focusOf(guard: Guard): Focus {
  const f = (Object.keys(FOCUS) as Focus[]).find((k) => FOCUS[k].includes(guard));
  if (!f) throw new Error(`guard ${guard} has no focus in test/sim/mutants.ts`);
  return f;
}

/** The guards the last 300-seed measurement found in at least 5% of their generator's seeds. */
const PROVEN: ReadonlySet<Guard> = new Set<Guard>([
  'epoch-check',
  'fence-before-seal',
  'end-epoch-on-unknown-outcome',
  'cached-track-marker-check',
  'marker-before-commit',
  'landing-mark',
  'claims',
  'blob-copied-at-validation',
  'delete-guard',
  'seal-earlier-epochs',
  'wait-for-seal',
  'sealed-version',
  'tombstones-hide',
  'rows-files-match-base',
  'cleanup-keeps-seals-with-generations',
  'purge-waits-for-shards',
  'relist-sees-fence',
  'relist-sees-retirement',
  'retired-marker',
  'relist-on-vanished-seal',
  'read-newest-first',
  'recount-live-generations',
  'point-read-marker-check',
  'deleted-seq-records',
  'merge-base-commit-once',
  'own-rows-listed-only',
  'seal-lists-after-fence',
  'zombie-generations-invisible',
  'gen-marker-sent-once',
  'give-up-failed-names',
  'put-sent-once',
  'purge-relists-before-drop',
  'errors-after-layout-check',
  'projection-describes-base',
  'unique-marker-bodies',
  'retire-given-up-once-marker-seen',
  'seal-own-epoch-before-next',
  'claim-after-epoch-check',
  'merge-own-only-in-current-epoch',
  'superseded-epoch-seals-nothing',
  'cleanup-keeps-highest-seal',
  'maintainer-stops-when-overtaken',
  'sweep-only-ended-epochs',
  'recheck-record-after-slot',
  'repair-seals-below-held',
  'keep-leases-on-failed-switch',
]);

export const MUTANTS: readonly MutantSpec[] = GUARDS.map((guard) => ({ guard, finds: FINDS[guard], focus: focusOf(guard), proven: PROVEN.has(guard) }));
