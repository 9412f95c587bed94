/**
 * The sealing focus's `zombie` window and the zombie-seals focus's `superseded` window, which
 * carries it on (test/sim/steer-late.ts), on the steering's core (steer-core.ts): a zombie
 * writer whose epoch's seal was cleaned up makes a generation.
 */
import { META_DIR, sealKey } from '../../lib/log/layout.ts';
import { simContext, type Op } from './scheduler.ts';
import { byMaintainer, PASS_WAIT, steerFaults, WAIT, type SteerCore } from './steer-core.ts';
import { lateItem, superseded } from './steer-late.ts';

/**
 * Window `zombie`: the writer about to make a generation is taken over, and makes it only once
 * its epoch's seal was cleaned up. As that seal lands the clock runs past the new holder's
 * lease and a third writer takes a delivery (and the slot); as that takeover's seal lands a
 * maintenance pass starts (now, or after the one running). The window is over once the
 * zombie's read ended, or after its steps; nothing of it acts after that, and no other
 * `zombie` window opens before.
 */
export function zombie(core: SteerCore, proc: string, ids: readonly string[], epoch: string): void {
  const me = simContext.getStore()?.actor;
  const { sched } = core.h;
  if (!me || sched.step < core.zombieUntil) return;
  // `superseded`: an item of this commit, held back from the start (no copy of its batch acked meanwhile).
  const late = core.h.cfg.steer?.window === 'superseded' ? lateItem(core, proc, ids) : undefined;
  if (late === null || !core.take()) return;
  if (late) core.h.setHeld(late.id, true);
  core.expire(`the lease of ${proc} runs out as it makes a generation`);
  const mine = core.h.inFlight(proc).filter((it) => ids.includes(it.id));
  if (!core.h.deliverVia([proc])) {
    if (late) core.h.setHeld(late.id, false);
    return; // nobody to take the slot over now
  }
  const until = sched.step + PASS_WAIT + WAIT;
  core.zombieUntil = until;
  const open = () => sched.faultsOn && core.zombieUntil === until && sched.step < until;
  let handedOver = false;
  const close = () => {
    if (core.zombieUntil === until) core.zombieUntil = 0;
  };
  if (late) core.watch(() => handedOver || !open(), () => handedOver || core.h.setHeld(late.id, false));
  const sealPut = (op: Op) => op.actor !== me && /putIfAbsent$/.test(op.spec.kind) && op.spec.target.startsWith(`${META_DIR}/seal.`);
  const cleaned = core.watch((op) => /obj\.delete$/.test(op.spec.kind) && op.spec.target === sealKey(epoch));
  // `superseded`: until the window is handed over, passes fail their Lance writes (merges: a
  // storage fault), so the epochs taken over keep their generations, and with them their seals.
  let unsteer = () => {};
  if (late) {
    unsteer = steerFaults(sched, (spec, actor) => (open() && byMaintainer({ actor }) && spec.mutating && spec.kind.startsWith('lance.') ? 'failBefore' : null));
    core.watch(() => !open(), unsteer);
  }
  core.watch(
    (op) => sealPut(op) && op.spec.target === sealKey(epoch),
    (sealed) => {
      if (!open()) return;
      const holder = sealed.actor.split('.')[0]!;
      core.expire(`the lease of ${holder}, which took ${proc}'s slot, runs out`);
      core.h.deliverVia([proc, holder]);
      core.watch(
        (op) => sealPut(op) && op.spec.target !== sealKey(epoch),
        () => {
          if (open()) core.h.maintain();
        },
      );
    },
  );
  sched.hold(me, `the seal of ${epoch} cleaned up`, PASS_WAIT, () => cleaned.seen || !open());
  // Then a read of its commit, and one after it. Half the time its epoch check times out: it
  // seals its own epoch itself (below a sealed one: a seal of nothing).
  core.watch(
    (op) => op.actor === me && /lance\.add$/.test(op.spec.kind),
    () => {
      if (!open()) return;
      // Only a zombie whose generation no seal lists (its epoch's was cleaned up).
      if (late) {
        if (!cleaned.seen) return close();
        handedOver = true;
        unsteer();
        core.zombieUntil = Infinity; // no other zombie window until this one is over
        return superseded(core, me, proc, epoch, late, () => (core.zombieUntil = 0));
      }
      if (core.h.rng.chance(0.5)) sched.failNext(me, /^lease\.assertCurrent$/, 'timeout');
      const started = core.readThen(mine.length > 0 ? { item: core.h.rng.pick(mine) } : {}, (_reader, _ended, done) => void done.finally(close));
      if (!started) close();
    },
  );
}
