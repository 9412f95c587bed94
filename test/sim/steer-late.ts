/**
 * The late and zombie-seals foci's steered windows (test/sim/config.ts `steer`), on the steering's core
 * (steer-core.ts): a commit of an epoch that ended lands after its client moved on, so that it
 * differs from what the client's later deliveries made visible.
 *  - ended:  a writer's add times out (it lands later). The writer ends its epoch; the client
 *            retries the batch through the other writer and, once that is acked, deletes the item;
 *            the other writer merges its shard and a maintenance pass purges the item and drops
 *            its tombstone (deletion retention 0). Only then does the add land, into the
 *            generation of the ended epoch, and a read of the item follows: the writer must have
 *            sealed that epoch before it went on (`seal-own-epoch-before-next`), else the deleted
 *            batch shows again (D1).
 *  - fenced: a writer about to commit loses its lease and waits until its epoch's seal lands (a
 *            capped wait); its commit lands above the seal and its epoch check finds it fenced.
 *            The client gives the batch up for another attempt through another writer, and once
 *            that is acked the given-up batch is delivered again (an old message of an
 *            at-least-once queue): it is written after the other, and its ack must say so. A
 *            claim the zombie left would answer it as a duplicate at the other attempt's seqs
 *            (`claim-after-epoch-check`: I4).
 *  - frozen: a writer stalls right after the commit that fills its generation was confirmed (it
 *            freezes the generation next, and merges it in the background), while its lease runs
 *            out; an item only that generation holds is deleted, and a maintenance pass takes the
 *            slot, seals the epoch, merges the generation, purges the item and drops its
 *            tombstone. The writer then goes on: its merge of the frozen generation (from the copy
 *            it keeps of its commits) must find the epoch sealed
 *            (`merge-own-only-in-current-epoch`), else the deleted rows go back into the base (D1).
 *  - superseded: the `zombie` window of steer-zombie.ts, carried on once the zombie's add landed: its
 *            epoch check times out and its own seal's first write fails, so it seals before its
 *            next commit instead. The client retries the batch through another writer and, once
 *            that is acked, deletes the item; a pass purges it and drops its tombstone while the
 *            pass's removal of the zombie's generation fails (until the delete, the passes'
 *            merges fail: the epochs taken over keep their generations and seals). Then the
 *            zombie takes the item's next delivery, sealing first, and the item is read: that
 *            seal, below the slot's sealed epochs, must list nothing
 *            (`superseded-epoch-seals-nothing`), and the purging pass must keep the slot's
 *            highest seal (`cleanup-keeps-highest-seal`), else the deleted batch shows again (D1).
 * While a window runs the item's other deliveries wait (the steering is its client).
 */
import { parseShardName, sealKey, SHARDS_DIR } from '../../lib/log/layout.ts';
import { simContext } from './scheduler.ts';
import { byMaintainer, ITEM_KINDS, PASS_WAIT, steerFaults, tombstoneDropped, WAIT, type SteerCore } from './steer-core.ts';
import type { ItemModel } from './workload.ts';

/** Window `ended`: a timed-out add of a writer's ended epoch, landing after its item was deleted and purged. */
export function ended(core: SteerCore, proc: string, ids: readonly string[], epoch: string): void {
  const me = simContext.getStore()?.actor;
  if (!me) return;
  const { sched, rng } = core.h;
  // An item of this commit with no rows in a generation of this epoch the base does not hold
  // yet (the purge would wait for those), and another writer to retry it.
  const inEpoch = new Set([...core.genItems].filter(([gen]) => parseShardName(gen)?.writerEpoch === epoch && !core.retired.has(gen)).flatMap(([, its]) => its));
  const candidates = core.h.inFlight(proc).filter((it) => ids.includes(it.id) && !inEpoch.has(it) && it.inflight === 1);
  const others = core.h.writers().filter((w) => w !== proc);
  if (others.length === 0 || candidates.length === 0 || !core.take()) return;
  const it = rng.pick(candidates);
  const to = rng.pick(others);
  const w = itemWindow(core, it, 2 * PASS_WAIT);
  sched.failNext(me, /^lance\.add$/, 'timeout', tombstoneDropped(it));
  // The writer takes no new slot while the window runs: a takeover of its old one would seal
  // the ended epoch before the add lands (which only the guard should do).
  sched.hold(me, 'the window of its timed-out add is over', 2 * PASS_WAIT, () => !w.open(), (op) => op.spec.kind === 'lease.acquire');
  // The append answered (timed out): the client retries the batch through the other writer.
  w.settled(() => {
    if (!it.curInDoubt || !core.h.deliverBatch(to, it.id, 'next')) return w.close();
    // Acked: the retry answers the timed-out append (I5), which returned long ago, so the
    // client deletes the item.
    w.settled(() => {
      if (!it.curAcked) return w.close();
      it.curInDoubt = false;
      w.deleteThen(() => void core.h.mergeWriters([to]).then(() => (w.open() ? core.h.maintain() : w.close())));
    });
  });
  // The add landed (after the tombstone's drop): a read of the item.
  core.watch(
    (op) => op.actor === 'late' && op.spec.kind === 'late:lance.add',
    () => (w.open() ? w.readThen() : undefined),
  );
}

/** Window `fenced`: a zombie's commit above its seal, its batch given up for another and delivered again later. */
export function fenced(core: SteerCore, proc: string, ids: readonly string[], epoch: string): void {
  const me = simContext.getStore()?.actor;
  if (!me) return;
  const { sched, rng } = core.h;
  // Not a creation (a creation given up for another is refused when delivered again: the item
  // exists), and the commit's copy of the item's current batch (not an old one delivered again).
  const candidates = core.h.inFlight(proc).filter((it) => ids.includes(it.id) && it.inflight === 1 && it.flying[0] === it.cur && it.acked.length > 0);
  if (candidates.length === 0 || !core.take()) return;
  core.expire(`the lease of ${proc} runs out as it commits`);
  if (!core.h.deliverVia([proc])) return core.untake(); // nobody to take the slot over now
  const it = rng.pick(candidates);
  const given = it.cur;
  const w = itemWindow(core, it, PASS_WAIT);
  const sealed = core.watch((op) => op.spec.target === sealKey(epoch) && /putIfAbsent$/.test(op.spec.kind) && op.actor !== me);
  sched.hold(me, `the seal of ${epoch}`, WAIT, () => sealed.seen || !w.open());
  const others = () => core.h.writers().filter((x) => x !== proc);
  // Fenced (not acked, not in doubt): another attempt of the step, through another writer (a
  // few times: one that cannot get the slot now fails it, as a writer before the takeover may).
  const attempt = (left: number) => {
    if (it.curInDoubt || others().length === 0 || !core.h.deliverBatch(rng.pick(others()), it.id, 'next')) return w.close();
    w.settled(() => {
      if (!it.curAcked) return left > 1 ? attempt(left - 1) : w.close();
      // Acked: the given-up batch is delivered again, then the item is read.
      if (others().length === 0 || !core.h.deliverBatch(rng.pick(others()), it.id, given)) return w.close();
      w.settled(() => w.readThen());
    });
  };
  w.settled(() => (it.curAcked ? w.close() : attempt(3)));
}

/** Window `frozen`: a writer's merge of its frozen generation after a pass sealed, merged and purged it. */
export function frozen(core: SteerCore, proc: string, shard: string): void {
  const me = simContext.getStore()?.actor;
  if (!me || core.commits.get(shard) !== core.h.cfg.mergeEveryCommits) return;
  const { sched, rng } = core.h;
  // An item this generation holds, and no other not merged yet (the purge would wait for that one).
  const elsewhere = new Set([...core.genItems].filter(([gen]) => gen !== shard && !core.retired.has(gen)).flatMap(([, its]) => its));
  const busy = new Set(core.h.writers().flatMap((x) => core.h.inFlight(x)));
  const only = (core.genItems.get(shard) ?? []).filter((it) => !elsewhere.has(it) && !busy.has(it) && it.acked.length > 0 && !it.curInDoubt && it.deleting === null);
  if (only.length === 0 || !core.take()) return;
  const it = rng.pick(only);
  const w = itemWindow(core, it, 2 * PASS_WAIT);
  // Once the commit is confirmed (its epoch check landed): the writer freezes the generation next.
  const confirmed = core.watch((op) => op.actor === me && op.spec.kind === 'lease.assertCurrent');
  core.watch(
    () => confirmed.seen || !w.open(),
    () => {
      if (!w.open()) return;
      const dropped = core.watch((op) => tombstoneDropped(it)(op.spec));
      sched.hold(me, `the tombstone of ${it.id} dropped`, 2 * PASS_WAIT, () => dropped.seen || !w.open());
      core.expire(`${proc} stalls as its generation ${shard} fills`);
      w.deleteThen(() => core.h.maintain());
      // Dropped: once the writer's merges ended (it merges its shard again: that waits for the
      // background merge), a read of the item.
      core.watch(
        () => dropped.seen || !w.open(),
        () => (w.open() ? void core.h.mergeWriters([proc]).then(() => (w.open() ? w.readThen() : w.close())) : undefined),
      );
    },
  );
}

/**
 * A window over item `it`, held back from the workload (the steering is its client) until the
 * window closes: when it is closed, or after `steps`, or when the scheduled phase ends; then
 * `onClose`, once.
 */
function itemWindow(core: SteerCore, it: ItemModel, steps: number, onClose?: () => void) {
  const { sched, rng } = core.h;
  const until = sched.step + steps;
  let over = false;
  const open = () => !over && sched.faultsOn && sched.step < until;
  const close = () => {
    const first = !over;
    over = true;
    core.h.setHeld(it.id, false);
    if (first) onClose?.();
  };
  core.h.setHeld(it.id, true);
  core.watch(() => !open(), close);
  return {
    open,
    close,
    /** Once nothing of the item is in flight: `then`, if the window is still open. */
    settled: (then: () => void) => core.watch(() => it.inflight === 0 || !open(), () => (open() ? then() : close())),
    /** Delete the item (the deleter's guarded delete), then `then` once it was deleted. */
    deleteThen: (then: () => void) => {
      core.h.setHeld(it.id, false);
      const deleted = core.h.deleteItem(it.id);
      if (!deleted) return close();
      core.h.setHeld(it.id, true); // not created again before the window is over
      void deleted.then((yes) => (yes && open() ? then() : close()));
    },
    /** The read of the item that ends the window (and a second one, after it). */
    readThen: () => {
      if (!core.readThen({ item: it, kind: rng.pick(ITEM_KINDS) }, (_r, _e, done) => void done.finally(close))) close();
    },
  };
}

/**
 * Window `superseded`, the end of a `zombie` window (steer-zombie.ts) whose zombie's add landed: its
 * epoch check times out, and so does the first write of the seal it then writes of its own
 * epoch, so it seals before its next commit instead. Meanwhile the client retries the batch
 * through another writer and, once that is acked, deletes the item; the other writers merge their shards
 * and a pass purges the item and drops its tombstone, while the pass's removal of the zombie's
 * generation fails. Then the zombie takes the item's next delivery (it seals first, below the
 * epochs sealed since: a seal of nothing) and the item is read.
 */
export function superseded(core: SteerCore, me: string, proc: string, epoch: string, it: ItemModel, done: () => void): void {
  const { sched, rng } = core.h;
  let unsteer = () => {};
  const w = itemWindow(core, it, 2 * PASS_WAIT, () => {
    unsteer();
    done();
  });
  if (it.inflight !== 1 || it.curAcked) return w.close();
  // Storage faults of the passes (which each reports and goes past): until the item is deleted
  // their Lance writes fail, so the epochs taken over keep their generations, and with them
  // their seals; then their removals of the zombie's generations fail, so the generation
  // outlives the purge.
  const zombieDir = `${SHARDS_DIR}/${epoch}-g`;
  let deleted = false;
  unsteer = steerFaults(sched, (spec, actor) => {
    if (w.open() && byMaintainer({ actor })) {
      if (!deleted && spec.mutating && spec.kind.startsWith('lance.')) return 'failBefore';
      if (spec.kind === 'obj.deletePrefix.list' && spec.target.startsWith(zombieDir)) return 'failBefore';
    }
    return null;
  });
  sched.failNext(me, /^lease\.assertCurrent$/, 'timeout');
  sched.failNext(me, /putIfAbsent$/, 'failBefore');
  const isDropped = tombstoneDropped(it);
  const dropped = core.watch((op) => isDropped(op.spec));
  // Once its append answered, the zombie writes nothing (its seal first) until the tombstone is dropped.
  let answered = false;
  sched.hold(me, `the tombstone of ${it.id} dropped`, 2 * PASS_WAIT, () => dropped.seen || !w.open(), (op) => answered && /putIfAbsent$/.test(op.spec.kind));
  const others = () => core.h.writers().filter((x) => x !== proc);
  const retry = (left: number) => {
    if (others().length === 0 || !core.h.deliverBatch(rng.pick(others()), it.id, 'next')) return w.close();
    w.settled(() => {
      if (!it.curAcked) return left > 1 && it.curInDoubt ? retry(left - 1) : w.close();
      it.curInDoubt = false; // acked: the client deletes the item (see `ended`)
      w.deleteThen(() => {
        deleted = true;
        void core.h.mergeWriters(others()).then(() => (w.open() ? core.h.maintain() : w.close()));
      });
    });
  };
  w.settled(() => {
    answered = true;
    if (!it.curInDoubt) return w.close();
    retry(3);
  });
  // Dropped: the zombie takes the item's next delivery (it seals first), then the item is read.
  core.watch(
    () => dropped.seen || !w.open(),
    () => {
      if (!w.open() || !core.h.deliverBatch(proc, it.id, 'next')) return w.close();
      w.settled(() => w.readThen());
    },
  );
}

/** The item a `superseded` window steers: one of the commit's items whose batch is in flight only there, not acked. */
export function lateItem(core: SteerCore, proc: string, ids: readonly string[]): ItemModel | null {
  const candidates = core.h.inFlight(proc).filter((it) => ids.includes(it.id) && it.inflight === 1 && !it.curAcked);
  return candidates.length > 0 ? core.h.rng.pick(candidates) : null;
}
