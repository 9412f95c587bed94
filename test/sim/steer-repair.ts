/**
 * The repair-lost focus's window (test/sim/config.ts): a repair that took every lease of the old
 * scope loses them as it is about to seal (lib/log/admin/rehome.ts `sealAll`): the clock runs past
 * their ttl while the repair waits, writers take the slots, and the repair lists the log only once
 * one of them marked its epoch's first generation. That writer's commit waits until the repair
 * sealed its epoch or ended, and no other writer takes its slot. Once the writer answered, a read
 * of the whole log starts, and the writer waits (it merges nothing) until the read ended: a repair
 * that sealed a live epoch hides a commit the writer acked under a lease it holds
 * (`repair-seals-below-held`).
 */
import { parseShardName, sealKey } from '../../lib/log/layout.ts';
import type { SimTime } from './clock.ts';
import type { SimConfig } from './config-types.ts';
import type { Rng } from './prng.ts';
import type { Op, Scheduler } from './scheduler.ts';
import { GEN_MARKER, PASS_WAIT, WAIT } from './steer-core.ts';

export interface RepairHost {
  sched: Scheduler;
  time: SimTime;
  cfg: SimConfig;
  rng: Rng;
  /** Every live writer takes the next batch of an item with nothing in flight (one each); how many did. */
  deliverToAll(): number;
  /** Whether writer process `actor` holds writer slot `slot` at `epoch` (it took it: the repair held every slot). */
  holdsSlot(actor: string, slot: number, epoch: number): boolean;
  /** How many deliveries writer process `actor` answered (acked or failed). */
  answered(actor: string): number;
  /** Start a read of the whole log by an idle reader; `ended` told when it ends. False if none could start. */
  readAll(ended: (done: Promise<unknown>) => void): boolean;
  /** Whether repair process `actor` still runs. */
  running(actor: string): boolean;
}

/** The repair's last lease of the old scope, the maintainer's, was taken (its sealing comes next). */
const tookMaintainer = (op: Op) => /^f\d/.test(op.actor) && op.spec.kind === 'lease.acquire' && /\/maintainer by /.test(op.spec.target);
const genMarkerOf = (op: Op) => (/^w\d/.test(op.actor) && /putIfAbsent$/.test(op.spec.kind) && op.spec.target.startsWith(GEN_MARKER) ? op.spec.target.slice(GEN_MARKER.length) : null);

/** The window, told every landed request (scheduler.ts `onLanded`); one runs at a time. */
export function repairLost(h: RepairHost): (op: Op) => void {
  const { sched } = h;
  let repair: string | null = null;
  /** The writer that marked a generation meanwhile, its epoch, and what it had answered then. */
  let writer = '';
  let epoch: string | null = null;
  let answered = 0;
  let sealed = false;
  let reading = false;
  let read = false;
  const over = () => repair === null || !h.running(repair);
  return (op) => {
    if (repair !== null && !h.running(repair) && !reading) repair = null;
    if (repair === null) {
      if (!tookMaintainer(op) || !h.running(op.actor) || !h.rng.chance(h.cfg.repairLoses)) return;
      repair = op.actor;
      epoch = null;
      sealed = reading = read = false;
      h.time.ms += h.cfg.leaseTtlMs + 1;
      sched.note(`clock +${h.cfg.leaseTtlMs + 1} (the leases of ${repair} run out as it is about to seal)`);
      sched.hold(repair, 'a writer took a slot the repair lost and marked a generation', PASS_WAIT, () => epoch !== null || over());
      if (h.deliverToAll() === 0) sched.note('no writer could take a delivery now');
      return;
    }
    if (epoch === null) {
      const gen = genMarkerOf(op);
      const name = gen === null ? null : parseShardName(gen);
      // A writer's that took a slot from the repair (not a frozen holder's, whose lease the repair took).
      if (name === null || !h.holdsSlot(op.actor, name.slot, name.epoch)) return;
      writer = op.actor;
      epoch = name.writerEpoch;
      answered = h.answered(writer);
      sched.hold(writer, `the repair sealed ${epoch} or ended`, PASS_WAIT, () => sealed || over(), (o) => o.spec.kind === 'lance.add');
      // No other writer takes its slot meanwhile (its renewals may be lost; its lease stays current until taken).
      const w = writer;
      sched.hold('*', `the read after ${w}'s answer ended, or the repair`, 2 * PASS_WAIT, () => (read && !reading) || over(), (o) => o.spec.kind === 'lease.acquire' && /^w\d/.test(o.actor) && o.actor !== w);
      return;
    }
    if (!sealed && /putIfAbsent$/.test(op.spec.kind) && op.spec.target === sealKey(epoch)) sealed = true;
    if (read || h.answered(writer) === answered) return;
    // The writer answered a delivery: a read starts now, after the answer, and the writer waits for it.
    reading = read = true;
    const done = { seen: false };
    const ended = () => {
      done.seen = true;
      reading = false;
    };
    if (!h.readAll((p) => void p.finally(ended))) return ended();
    sched.hold(writer, 'the read of the log after its answer ended', PASS_WAIT + WAIT, () => done.seen);
  };
}
