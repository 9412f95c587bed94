/**
 * The own-merges focus's steered windows (test/sim/config.ts `steer`), on the steering's core
 * (steer-core.ts): a writer's own merge of a generation into the base, or a maintenance pass
 * counting the base for the listing projection, with a purge or a read steered into it.
 *  - purge:      a writer's merge is about to make the log's first base out of its oldest
 *                generation. An item only that generation holds is deleted, and a maintenance
 *                pass starts; the merger waits until the pass's purge listed the log (no base)
 *                and read the tombstone, and the purge's requests to the generation wait until
 *                the retirement deleted every manifest of it but the first (the empty table's),
 *                the merger then until the purge counted it: the purge finds the item's rows
 *                nowhere it listed, though the base it did not list holds them
 *                (`purge-relists-before-drop`).
 *  - vanish:     a writer's merge is about to commit a generation into the base. A point read
 *                in a new process of an item only that generation holds starts; the merger waits
 *                until the read has read the base (it waits for the generation now), the read's
 *                requests to the generation wait until the retirement deleted every manifest of
 *                it but the first, and the merger then waits until the read ended: the read
 *                finds the item nowhere, and only its layout check tells that the generation went
 *                (`errors-after-layout-check`).
 *  - overtaken:  a maintenance pass is about to count the base's new fragments for the listing
 *                projection (it listed the stored documents). Its requests wait until another
 *                maintainer's pass ended: an item the base holds is deleted, the writers merge
 *                their shards, the clock runs past every lease, and the other pass takes the
 *                maintainer's lease, purges the item and drops its tombstone. The first pass then
 *                writes a projection of the base before the purge, and a listing follows
 *                (`projection-describes-base`).
 * And the stale-merges focus's `stale` window (below).
 */
import { itemHash, parseShardName, shardPrefix } from '../../lib/log/layout.ts';
import type { MergeStep } from '../../lib/log/maintain/merge.ts';
import { simContext, type Op } from './scheduler.ts';
import { byMaintainer, ITEM_KINDS, passEnded, PASS_WAIT, PROJECTION_DIR, PROJECTION_KEY, secondManifestDeleted, steerFaults, TOMB, tombstoneDropped, WAIT, type SteerCore } from './steer-core.ts';
import type { ItemModel } from './workload.ts';

/** Window `purge`: a purge that listed the log before a writer's merge made the base out of a generation. */
export function purge(core: SteerCore, proc: string, step: MergeStep, shard: string): void {
  const me = simContext.getStore()?.actor;
  if (step !== 'base-commit' || core.baseMade || !me || !proc.startsWith('w')) return;
  const only = onlyIn(core, shard);
  if (only.length === 0 || !core.take(true)) return;
  const it = core.h.rng.pick(only);
  const deleted = core.h.deleteItem(it.id);
  if (!deleted) {
    core.untake(); // the deleter is busy, or the item has a batch in flight: the next merge may steer
    return;
  }
  const { sched } = core.h;
  let failed = false;
  const until = sched.step + PASS_WAIT + WAIT;
  const open = () => sched.faultsOn && !failed && sched.step < until;
  const over = new Promise<void>((resolve) => {
    // The tombstone of this item (another's, of an earlier delete, would start the window early).
    const tomb = `${TOMB}${itemHash(it.id)}.`;
    const tombRead = core.watch(
      (op) => byMaintainer(op) && op.spec.kind === 'obj.get' && op.spec.target.startsWith(tomb),
      () => {
        if (!open()) return;
        const counted = core.watch((op) => byMaintainer(op) && op.spec.kind === 'lance.countRows' && op.spec.target === shard, () => resolve());
        // The purge's requests to the generation wait until only its first manifest is left; the
        // merger then waits until the purge counted the generation (before that manifest goes).
        const firstLeft = core.watch(secondManifestDeleted(shard), () => open() && sched.hold(me, `the purge counted ${shard}`, WAIT, () => counted.seen || !open()));
        sched.hold('*', `the manifests of ${shard} deleted but its first`, PASS_WAIT, () => firstLeft.seen || !open(), (op) => byMaintainer(op) && op.spec.target === shard);
      },
    );
    sched.hold(me, 'a purge read the tombstone', PASS_WAIT, () => tombRead.seen || !open());
    void deleted.then((yes) => {
      if (yes && sched.faultsOn) return core.h.maintain();
      failed = true;
      resolve();
    });
    // Over at the latest once its steps ran out (the purge may not count the generation: a
    // takeover pending, or the generation gone by its listing).
    core.watch(() => !open(), () => resolve());
  });
  // Nothing more of the item until the window is over (its rows stay in this generation only).
  core.h.holdItem(it.id, over);
}

/** Window `vanish`: a point read of an item only one generation holds, as a writer's merge retires it. */
export function vanish(core: SteerCore, proc: string, step: MergeStep, shard: string): void {
  const me = simContext.getStore()?.actor;
  if (step !== 'base-commit' || !me || !proc.startsWith('w')) return;
  const only = onlyIn(core, shard);
  if (only.length === 0 || !core.take()) return;
  const { sched, rng } = core.h;
  const onShard = (op: Op) => op.spec.target === shard;
  const item = rng.pick(only);
  const started = core.readThen({ item, kind: rng.pick(ITEM_KINDS), fresh: true }, (reader, ended, done) => {
    core.h.holdItem(item.id, done);
    sched.hold(me, `${reader} read the base`, WAIT, () => {
      const p = core.pendingOf(reader);
      return ended.seen || (p.length > 0 && p.every(onShard));
    });
    // The read's requests to the generation wait until only its first manifest is left; the
    // merger then waits until the read ended.
    const gone = core.watch(secondManifestDeleted(shard), () => sched.hold(me, `${reader}'s read ended`, WAIT, () => ended.seen));
    sched.hold(reader, `the manifests of ${shard} deleted but its first`, PASS_WAIT, () => gone.seen || ended.seen, onShard);
  });
  if (!started) core.untake(); // no reader free: the next merge may steer
}

/** The items whose commits (as far as this process saw) all went to `shard`, none in flight. */
function onlyIn(core: SteerCore, shard: string): ItemModel[] {
  const elsewhere = new Set([...core.genItems].filter(([gen]) => gen !== shard).flatMap(([, its]) => its));
  const busy = new Set(core.h.writers().flatMap((w) => core.h.inFlight(w)));
  return (core.genItems.get(shard) ?? []).filter((it) => !elsewhere.has(it) && !busy.has(it));
}

/** Window `overtaken`: a pass counting the base for the projection, paused while another purges an item of it. */
export function overtaken(core: SteerCore, op: Op, prev: Op | undefined): void {
  const first = op.actor;
  if (!byMaintainer(op) || op.spec.kind !== 'obj.list' || op.spec.target !== PROJECTION_DIR || !core.h.sched.faultsOn) return;
  // The projection step lists the documents right after it read the index (a purge's clean-up
  // of stale documents lists them too, after other requests).
  if (prev?.spec.kind !== 'obj.get' || prev.spec.target !== PROJECTION_KEY) return;
  const inBase = [...new Set([...core.genItems].filter(([gen]) => core.retired.has(gen)).flatMap(([, its]) => its))];
  if (inBase.length === 0 || !core.take(true)) return;
  // The first of them (in a random order) that can be deleted now.
  let deleted: Promise<boolean> | null = null;
  for (const it of core.h.rng.shuffle(inBase)) if ((deleted = core.h.deleteItem(it.id))) break;
  if (!deleted) {
    core.untake(); // the deleter is busy, or each has a batch in flight: the next pass may steer
    return;
  }
  const { sched } = core.h;
  // Over once the first pass ended (its lease given back), or the delete failed.
  let over = false;
  core.watch(
    (o) => passEnded(o) && o.actor === first,
    () => (over = true),
  );
  const otherEnded = core.watch((o) => over || (passEnded(o) && o.actor !== first));
  sched.hold(first, `another maintainer's pass ended`, 2 * PASS_WAIT, () => over || otherEnded.seen);
  void deleted.then((yes) => {
    if (!yes || !sched.faultsOn) {
      over = true;
      return;
    }
    // Its rows in live generations go to the base too: the purge then finds them all there.
    void core.h.mergeWriters().then(() => {
      if (over || !sched.faultsOn) return;
      core.expire(`${first}'s pass paused past its lease`);
      core.h.maintain();
    });
  });
  // Once the first pass wrote its projection: a listing (the read that walks it).
  core.watch(
    (o) => over || (o.actor === first && o.spec.kind === 'obj.put' && o.spec.target === PROJECTION_KEY),
    () => {
      if (!over && sched.faultsOn) core.readThen({ kind: 'items' }, () => undefined);
    },
  );
}

/** The steerings with a `stale` window running: one at a time. */
const staling = new WeakSet<SteerCore>();

/**
 * Window `stale`: a maintenance pass about to commit a merge into the base waits while an item
 * with rows in another generation of a sealed epoch is deleted, the clock runs past every
 * lease, and another maintainer's passes take the lease, merge that generation (whose files they
 * then fail to delete: retired, still readable), purge the item and drop its tombstone. The pass then
 * goes on, with the listing it took before: it must stop once it finds its lease taken
 * (`maintainer-stops-when-overtaken`), else it merges that generation again and the item's rows
 * come back (D1). A read of the item follows the first pass.
 */
export function stale(core: SteerCore, _proc: string, step: MergeStep, shard: string): void {
  const first = simContext.getStore()?.actor;
  const { sched, rng } = core.h;
  if (!first || step !== 'base-commit' || !byMaintainer({ actor: first }) || !sched.faultsOn) return;
  // A generation of a sealed epoch, not merged yet (if the pass listed it as sealed, it merges
  // it later; if not, the window finds nothing), and an item with rows in it
  // and none in flight (the clock run past every lease, the other passes merge all its rows).
  // None in the generation this pass is merging: the step it is in finishes anyway (a merger
  // stalled past the deletion retention, which this focus sets to 0, puts rows back).
  const busy = new Set([...core.h.writers().flatMap((w) => core.h.inFlight(w)), ...(core.genItems.get(shard) ?? [])]);
  const itemsOf = (g: string) => (core.genItems.get(g) ?? []).filter((it) => !busy.has(it));
  const others = [...core.genItems.keys()].filter((g) => g !== shard && !core.retired.has(g) && core.sealed.has(parseShardName(g)?.writerEpoch ?? '') && itemsOf(g).length > 0);
  if (others.length === 0 || staling.has(core) || !core.take()) return;
  const gen = rng.pick(others);
  const it = rng.pick(itemsOf(gen));
  const deleted = core.h.deleteItem(it.id);
  if (!deleted) return core.untake(); // the deleter is busy: the next merge may steer
  // Over once the first pass ended, or the delete failed.
  let over = false;
  const end = () => {
    over = true;
    staling.delete(core);
  };
  staling.add(core);
  core.watch((o) => passEnded(o) && o.actor === first, end);
  const isDropped = tombstoneDropped(it);
  const dropped = core.watch((o) => isDropped(o.spec));
  sched.hold(first, `the tombstone of ${it.id} dropped`, 3 * PASS_WAIT, () => over || dropped.seen || !sched.faultsOn);
  // The generation's files cannot be deleted while the window runs (an S3 error, every time).
  const files = shardPrefix(gen);
  const unsteer = steerFaults(sched, (spec) => (!over && spec.kind === 'obj.deletePrefix.list' && spec.target === files ? 'failBefore' : null));
  core.watch(() => over || !sched.faultsOn, unsteer);
  void deleted.then((yes) => {
    if (!yes || over || !sched.faultsOn) return end();
    core.expire(`${first}'s pass paused past its lease`);
    // Passes of the other maintainer until one dropped the tombstone (at most two).
    const pass = (left: number) => {
      core.h.maintain();
      core.watch(
        (o) => over || (passEnded(o) && o.actor !== first),
        () => !over && !dropped.seen && left > 1 && pass(left - 1),
      );
    };
    pass(2);
  });
  core.watch(
    (o) => passEnded(o) && o.actor === first,
    () => sched.faultsOn && core.readThen({ item: it, kind: rng.pick(ITEM_KINDS) }, () => undefined),
  );
}
