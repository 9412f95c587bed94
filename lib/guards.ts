/**
 * The guards that keep the log's invariants, by name: the catalogue is in
 * docs/design/invariants.md ("Guards"), each with the invariant it keeps and the tests that fail
 * without it. A test run may switch one guard off (a mutant) to prove that the simulation notices
 * (`npm run test:mutants`); nothing in the library ever does, and the package's entry points do
 * not export the switch. Production code only asks `guard(name)`, which is true unless a test
 * switched that guard off.
 */
export const GUARDS = [
  // write path (lib/log/write/: writer.ts, plan.ts, markers.ts, own-memory.ts, own-merges.ts, generations.ts, delete-item.ts)
  'epoch-check',
  'end-epoch-on-unknown-outcome',
  'seal-own-epoch-before-next',
  'cached-track-marker-check',
  'unique-marker-bodies',
  'marker-before-commit',
  'landing-mark',
  'claims',
  'claim-after-epoch-check',
  'own-rows-listed-only',
  'merge-own-only-in-current-epoch',
  'merge-base-commit-once',
  'give-up-failed-names',
  'retire-given-up-once-marker-seen',
  'blob-copied-at-validation',
  'deleted-seq-records',
  'delete-guard',
  // seals and takeovers (lib/log/write-seal.ts, lib/log/maintain/seal.ts)
  'fence-before-seal',
  'seal-lists-after-fence',
  'superseded-epoch-seals-nothing',
  'seal-earlier-epochs',
  // reads (lib/log/read/reader.ts, visibility.ts)
  'relist-sees-retirement',
  'relist-sees-fence',
  'retired-marker',
  'wait-for-seal',
  'zombie-generations-invisible',
  'sealed-version',
  'relist-on-vanished-seal',
  'errors-after-layout-check',
  'read-newest-first',
  'recount-live-generations',
  'point-read-marker-check',
  'tombstones-hide',
  'projection-describes-base',
  'rows-files-match-base',
  // maintenance (lib/log/maintain/maintain.ts, purge.ts)
  'maintainer-stops-when-overtaken',
  'sweep-only-ended-epochs',
  'cleanup-keeps-highest-seal',
  'cleanup-keeps-seals-with-generations',
  'purge-waits-for-shards',
  'purge-relists-before-drop',
  // storage (lib/storage/s3.ts, lib/coord/dynamo.ts, lib/log/tables.ts)
  'put-sent-once',
  'gen-marker-sent-once',
  // repair and adoption (lib/log/write/slot.ts, lib/log/maintain/maintain.ts, lib/log/admin/rehome.ts, old-scope.ts)
  'recheck-record-after-slot',
  'repair-seals-below-held',
  'keep-leases-on-failed-switch',
] as const;

export type Guard = (typeof GUARDS)[number];

const off = new Set<Guard>();

/** Whether `name` is on: always, but in a test run that switched it off. */
export function guard(name: Guard): boolean {
  return off.size === 0 || !off.has(name);
}

/** Test runs only: switch `name` off (null: every guard on again). */
export function switchOffGuard(name: Guard | null): void {
  off.clear();
  if (name !== null) off.add(name);
}
