/**
 * The late focus's steered windows (test/sim/config.ts `steer`), on the steering's core
 * (steer-core.ts): a commit of an epoch that ended lands after its client moved on, so that it
 * differs from what the client's later deliveries made visible.
 *  - ended:  a writer's add times out (it lands later). The writer ends its epoch; the client
 *            retries the batch through the other writer and, once that is acked, deletes the item;
 *            the writers merge their shards and a maintenance pass purges the item and drops its
 *            tombstone (deletion retention 0). Only then does the add land, into the generation of
 *            the ended epoch, and a read of the item follows: the writer must have sealed that
 *            epoch before it went on (`seal-own-epoch-before-next`), else the deleted batch shows
 *            again (D1).
 *  - fenced: a writer about to commit loses its lease and waits until another writer took its
 *            slot and sealed its epoch; its commit lands above the seal and its epoch check finds
 *            it fenced. The client gives the batch up for another attempt, which is acked at the
 *            same seqs, and the given-up batch is then delivered again (an old message of an
 *            at-least-once queue): it is written after the other, and its ack must say so. A claim
 *            the zombie left would answer it as a duplicate at the seqs of the other attempt
 *            (`claim-after-epoch-check`: I4).
 * While a window runs the item's other deliveries wait (the steering is its client).
 */
import { itemHash, parseShardName, sealKey } from '../../lib/log/layout.ts';
import { simContext } from './scheduler.ts';
import { ITEM_KINDS, PASS_WAIT, RETIRED, TOMB, WAIT, type SteerCore } from './steer-core.ts';
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
  const until = sched.step + 2 * PASS_WAIT;
  let over = false;
  const open = () => !over && sched.faultsOn && sched.step < until;
  const close = () => {
    over = true;
    core.h.setHeld(it.id, false);
  };
  const tomb = `${TOMB}${itemHash(it.id)}.`;
  sched.failNext(me, /^lance\.add$/, 'timeout', (l) => /delete$/.test(l.kind) && l.target.startsWith(tomb));
  // The writer takes no new slot while the window runs: a takeover of its old one would seal
  // the ended epoch before the add lands (which only the guard should do).
  sched.hold(me, 'the window of its timed-out add is over', 2 * PASS_WAIT, () => !open(), (op) => op.spec.kind === 'lease.acquire');
  core.h.setHeld(it.id, true);
  core.watch(() => !open(), close);
  // The append answered: the client retries the batch through the other writer.
  core.watch(
    () => it.inflight === 0 || !open(),
    () => {
      if (!open() || !it.curInDoubt || !core.h.deliverBatch(to, it.id, 'next')) return close();
      // Acked: the timed-out append returned long ago and a copy of the batch is visible, so
      // the client deletes the item (nothing of it is in flight any more).
      core.watch(
        () => it.inflight === 0 || !open(),
        () => {
          if (!open() || !it.curAcked) return close();
          it.curInDoubt = false;
          core.h.setHeld(it.id, false);
          const deleted = core.h.deleteItem(it.id);
          if (!deleted) return close();
          core.h.setHeld(it.id, true);
          void deleted.then((yes) => {
            if (!yes || !open()) return close();
            // Its rows in the other writer's generation go to the base: the purge finds them all there.
            void core.h.mergeWriters([to]).then(() => (open() ? core.h.maintain() : close()));
          });
        },
      );
    },
  );
  // The add landed (after the tombstone's drop): a read of the item.
  core.watch(
    (op) => op.actor === 'late' && op.spec.kind === 'late:lance.add',
    () => {
      if (!open() || !core.readThen({ item: it, kind: rng.pick(ITEM_KINDS) }, (_r, _e, done) => void done.finally(close))) close();
    },
  );
}

/** Window `fenced`: a zombie's commit above its seal, its batch given up for another and delivered again later. */
export function fenced(core: SteerCore, proc: string, ids: readonly string[], epoch: string): void {
  const me = simContext.getStore()?.actor;
  if (!me) return;
  const { sched, rng } = core.h;
  // Not a creation: a creation given up for another is refused when delivered again (the item exists).
  const candidates = core.h.inFlight(proc).filter((it) => ids.includes(it.id) && it.inflight === 1 && it.acked.length > 0);
  if (candidates.length === 0 || !core.take()) return;
  core.expire(`the lease of ${proc} runs out as it commits`);
  if (!core.h.deliverVia([proc])) return core.untake(); // nobody to take the slot over now
  const it = rng.pick(candidates);
  const given = it.cur;
  const until = sched.step + PASS_WAIT;
  let over = false;
  const open = () => !over && sched.faultsOn && sched.step < until;
  const close = () => {
    over = true;
    core.h.setHeld(it.id, false);
  };
  const sealed = core.watch((op) => op.spec.target === sealKey(epoch) && /putIfAbsent$/.test(op.spec.kind) && op.actor !== me);
  sched.hold(me, `the seal of ${epoch}`, WAIT, () => sealed.seen || !open());
  core.h.setHeld(it.id, true);
  core.watch(() => !open(), close);
  const others = () => core.h.writers().filter((w) => w !== proc);
  const settled = (then: () => void) => core.watch(() => it.inflight === 0 || !open(), () => (open() ? then() : close()));
  // Fenced (not acked, not in doubt): another attempt of the step, through another writer (a
  // few times: one that cannot get the slot now fails it, as a writer before the takeover may).
  const attempt = (left: number) => {
    if (it.curInDoubt || others().length === 0 || !core.h.deliverBatch(rng.pick(others()), it.id, 'next')) return close();
    settled(() => {
      if (!it.curAcked) return left > 1 ? attempt(left - 1) : close();
      // Acked: the given-up batch is delivered again, then the item is read.
      if (others().length === 0 || !core.h.deliverBatch(rng.pick(others()), it.id, given)) return close();
      settled(() => {
        if (!core.readThen({ item: it, kind: rng.pick(ITEM_KINDS) }, (_r, _e, done) => void done.finally(close))) close();
      });
    });
  };
  settled(() => (it.curAcked ? close() : attempt(3)));
}

/**
 * Window `frozen`: a writer's commit fills its generation (it freezes it next, and merges it in
 * the background). The writer stalls right there while its lease runs out; an item only that
 * generation holds is deleted, and a maintenance pass takes the slot, seals the epoch, merges the
 * generation, purges the item and drops its tombstone. The writer then goes on: its merge of the
 * frozen generation (from the copy it keeps of its commits) must find the epoch sealed
 * (`merge-own-only-in-current-epoch`), else the deleted rows go back into the base (D1).
 */
export function frozen(core: SteerCore, proc: string, shard: string): void {
  const me = simContext.getStore()?.actor;
  if (!me || core.commits.get(shard) !== core.h.cfg.mergeEveryCommits) return;
  const { sched, rng } = core.h;
  // An item this generation holds, and no other not merged yet (the purge would wait for that one).
  const elsewhere = new Set([...core.genItems].filter(([gen]) => gen !== shard && !core.retired.has(gen)).flatMap(([, its]) => its));
  const busy = new Set(core.h.writers().flatMap((w) => core.h.inFlight(w)));
  const only = (core.genItems.get(shard) ?? []).filter((it) => !elsewhere.has(it) && !busy.has(it) && it.acked.length > 0 && !it.curInDoubt && it.deleting === null);
  if (only.length === 0 || !core.take()) return;
  const it = rng.pick(only);
  core.h.setHeld(it.id, true); // nothing more of it in the meantime
  // Once the commit is confirmed (its epoch check landed): the writer freezes the generation next.
  core.watch(
    (op) => op.actor === me && op.spec.kind === 'lease.assertCurrent',
    () => stall(core, me, proc, shard, it),
  );
}

function stall(core: SteerCore, me: string, proc: string, shard: string, it: ItemModel): void {
  const { sched, rng } = core.h;
  core.h.setHeld(it.id, false);
  const deleted = sched.faultsOn ? core.h.deleteItem(it.id) : null;
  if (!deleted) return; // the deleter is busy
  const until = sched.step + 2 * PASS_WAIT;
  let over = false;
  const open = () => !over && sched.faultsOn && sched.step < until;
  const close = () => {
    over = true;
    core.h.setHeld(it.id, false);
  };
  const tomb = `${TOMB}${itemHash(it.id)}.`;
  const dropped = core.watch((op) => /delete$/.test(op.spec.kind) && op.spec.target.startsWith(tomb));
  sched.hold(me, `the tombstone of ${it.id} dropped`, 2 * PASS_WAIT, () => dropped.seen || !open());
  core.expire(`${proc} stalls as its generation ${shard} fills`);
  core.watch(() => !open(), close);
  void deleted.then((yes) => {
    if (!yes || !open()) return close();
    core.h.setHeld(it.id, true); // not created again before the window is over
    core.h.maintain();
  });
  // The writer's merge of the generation ended (retired it, or found it sealed): a read of the item.
  core.watch(
    (op) => dropped.seen && op.actor === me && (op.spec.target === `${RETIRED}${shard}` || op.spec.target === sealKey(parseShardName(shard)?.writerEpoch ?? '')),
    () => {
      if (!open() || !core.readThen({ item: it, kind: rng.pick(ITEM_KINDS) }, (_r, _e, done) => void done.finally(close))) close();
    },
  );
}
