/**
 * The swept focus's `swept` window (test/sim/config.ts `steer`), on the steering's core
 * (steer-core.ts): a maintenance pass sweeps a generation whose marker is still in flight, while
 * its epoch is fenced by a takeover that has not sealed it yet (lib/log/maintain/maintain.ts
 * `sweepUnlisted`: only epochs that are over; lib/log/write-seal.ts: the seal lists the epoch's
 * generations after its fence).
 */
import { fenceKey, META_DIR, sealKey, SHARDS_DIR, shardPrefix } from '../../lib/log/layout.ts';
import { simContext, type Op } from './scheduler.ts';
import { byMaintainer, GEN_MARKER, passEnded, PASS_WAIT, WAIT, type SteerCore } from './steer-core.ts';

/** The steerings with a `swept` window running: one at a time. */
const sweeping = new WeakSet<SteerCore>();

/**
 * Window `swept`: the writer about to make its epoch's first generation is taken over; its
 * marker PUT waits until the takeover's fence of its epoch landed and a maintenance pass
 * (started then) listed the log and the dataset folders after it: the folder is there, the
 * marker not. The takeover waits after its fence until the marker landed, so its seal lists the
 * generation (empty: the zombie's commit waits too). The pass's deletion of the folder, if it
 * decides on one, waits until that seal landed: a sealed, visible generation without data if the
 * sweep took a fenced epoch for an ended one. A read of the whole log follows the pass's deletion
 * (or its end).
 */
export function swept(core: SteerCore, proc: string, epoch: string): void {
  const me = simContext.getStore()?.actor;
  const { sched } = core.h;
  if (!me || sweeping.has(core) || !core.take()) return;
  core.expire(`the lease of ${proc} runs out as it makes a generation`);
  if (!core.h.deliverVia([proc])) return core.untake(); // nobody to take the slot over now
  sweeping.add(core);
  const until = sched.step + PASS_WAIT + 2 * WAIT;
  let over = false;
  const open = () => !over && sched.faultsOn && sched.step < until;
  const end = () => {
    over = true;
    sweeping.delete(core);
  };
  core.watch(() => !open(), end);

  // The generation's name, from its making (the writer's own: nothing else makes one of its epoch).
  let gen = '';
  core.watch(
    (op) => op.actor === me && op.spec.kind === 'lance.createEmptyTable',
    (op) => (gen = op.spec.target),
  );
  const isMarker = (op: Op) => op.actor === me && /putIfAbsent$/.test(op.spec.kind) && op.spec.target.startsWith(GEN_MARKER);
  const fence = fenceKey(epoch);
  const sealed = core.watch((op) => (/putIfAbsent$/.test(op.spec.kind) && op.spec.target === sealKey(epoch)) || !open());
  // The sweep's deletion of the folder, and what the zombie does after its marker, wait until the
  // sweep is over (the seal then names the empty table).
  const deletes = (op: Op) => byMaintainer(op) && gen !== '' && op.spec.kind.startsWith('obj.deletePrefix') && op.spec.target.startsWith(shardPrefix(gen));
  let sweeper = '';
  const sweepOver = core.watch((op) => (deletes(op) && op.spec.kind === 'obj.deletePrefix.prune') || (passEnded(op) && op.actor === sweeper) || !open());
  const marked = core.watch(
    (op) => isMarker(op) || !open(),
    () => open() && sched.hold(me, `the sweep of ${proc}'s generation`, PASS_WAIT, () => sweepOver.seen),
  );

  // A maintainer's listing of the dataset folders after it listed the log after the fence: the
  // sweep's two listings (a sweep whose log listing came before the fence finds the epoch live).
  const afterFence = new Set<string>();
  let fenced = false;
  const listed = core.watch(
    (op) => {
      if (!fenced || !byMaintainer(op) || op.spec.kind !== 'obj.list') return !open();
      if (op.spec.target === META_DIR) afterFence.add(op.actor);
      return (op.spec.target === SHARDS_DIR && afterFence.has(op.actor)) || !open();
    },
    (op) => (sweeper = op.actor),
  );
  sched.hold(me, `a sweep listed the folders after the fence of ${epoch}`, PASS_WAIT, () => listed.seen, isMarker);

  core.watch(
    (op) => (op.actor !== me && /putIfAbsent$/.test(op.spec.kind) && op.spec.target === fence) || !open(),
    (op) => {
      if (!open()) return;
      fenced = true;
      const taker = op.actor;
      // The takeover waits after its fence until the marker landed (its listing then shows it),
      // and so does any other sealer of the epoch (a reader that found the fence) at its fence.
      sched.hold(taker, `the marker of ${proc}'s generation`, PASS_WAIT, () => marked.seen);
      sched.hold('*', `the marker of ${proc}'s generation`, PASS_WAIT, () => marked.seen, (o) => o.actor !== taker && o.spec.target === fence);
      core.h.maintain();
    },
  );
  sched.hold('*', `the seal of ${epoch}`, PASS_WAIT + WAIT, () => sealed.seen, deletes);
  core.watch(
    () => sweepOver.seen,
    () => {
      if (open()) core.readThen({}, () => undefined);
      end();
    },
  );
}
