/**
 * The windows of the repair-lost and switch-late foci (test/sim/config.ts).
 *
 * repair-lost: a repair that took every lease of the old scope loses them as it is about to seal (lib/log/admin/rehome.ts `sealAll`): the clock runs past
 * their ttl while the repair waits, writers take the slots, and the repair lists the log only once
 * one of them marked its epoch's first generation. That writer's commit waits until the repair
 * sealed its epoch or ended, and no other writer takes its slot. Once the writer answered, a read
 * of the whole log starts, and the writer waits (it merges nothing) until the read ended: a repair
 * that sealed a live epoch hides a commit the writer acked under a lease it holds
 * (`repair-seals-below-held`).
 *
 * switch-late: a repair's switch (its PUT of the log's record) times out, so the repair fails and
 * gives the old scope's leases back; the PUT lands once a writer took a slot of the old scope and
 * read the record again (still the old one). A writer process opened after that takes the slot in
 * the new scope and seals the slot's earlier epochs, the old-scope writer's among them, whose
 * commit waits for that seal; no other writer takes a slot of the old scope meanwhile, and a read
 * of the whole log follows its answer. A failed switch must keep the old scope's leases held
 * (`keep-leases-on-failed-switch`): then no writer takes a slot before the switch lands.
 */
import { CHOICE_KEY } from '../../lib/coord/choose.ts';
import { formatWriterEpoch } from '../../lib/lease/slots.ts';
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
  /** How many deliveries writer process `actor` answered (acked or failed). */
  answered(actor: string): number;
  /** Start a read of the whole log by an idle reader; `ended` told when it ends. False if none could start. */
  readAll(ended: (done: Promise<unknown>) => void): boolean;
  /** Whether repair process `actor` still runs. */
  running(actor: string): boolean;
  /** The writer slot leases writer process `actor` holds (key, slot, epoch). */
  slotsOf(actor: string): Array<{ key: string; slot: number; epoch: number }>;
  /** A writer other than `not` crashes and a new process takes its place and a delivery; false if none could. */
  freshWriter(not: string): boolean;
}

/** The repair's last lease of the old scope, the maintainer's, was taken (its sealing comes next). */
const tookMaintainer = (op: Op) => /^f\d/.test(op.actor) && op.spec.kind === 'lease.acquire' && /\/maintainer by /.test(op.spec.target);
const genMarkerOf = (op: Op) => (/^w\d/.test(op.actor) && /putIfAbsent$/.test(op.spec.kind) && op.spec.target.startsWith(GEN_MARKER) ? op.spec.target.slice(GEN_MARKER.length) : null);

/**
 * A read of the whole log once a held writer answered a delivery (so the read starts after the
 * answer), the writer waiting until it ended (it merges nothing meanwhile).
 */
class ReadAfterAnswer {
  private writer = '';
  private answered = 0;
  /** Whether the read started, and whether it still runs. */
  started = false;
  running = false;
  constructor(private readonly h: RepairHost) {}

  /** Watch `writer` from now on. */
  arm(writer: string): void {
    this.writer = writer;
    this.answered = this.h.answered(writer);
    this.started = this.running = false;
  }

  get ended(): boolean {
    return this.started && !this.running;
  }

  /** Told every landed request once armed. */
  step(): void {
    if (this.started || this.h.answered(this.writer) === this.answered) return;
    this.started = this.running = true;
    const done = () => void (this.running = false);
    if (!this.h.readAll((p) => void p.finally(done))) return done();
    this.h.sched.hold(this.writer, 'the read of the log after its answer ended', PASS_WAIT + WAIT, () => !this.running);
  }
}

/** The window, told every landed request (scheduler.ts `onLanded`); one runs at a time. */
export function repairLost(h: RepairHost): (op: Op) => void {
  const { sched } = h;
  let repair: string | null = null;
  /** The epoch of the writer's generation marked meanwhile, and whether the repair sealed it. */
  let epoch: string | null = null;
  let sealed = false;
  const after = new ReadAfterAnswer(h);
  const over = () => repair === null || !h.running(repair);
  return (op) => {
    if (repair !== null && !h.running(repair) && !after.running) repair = null;
    if (repair === null) {
      if (!tookMaintainer(op) || !h.running(op.actor) || !h.rng.chance(h.cfg.repairLoses)) return;
      repair = op.actor;
      epoch = null;
      sealed = false;
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
      if (name === null || !h.slotsOf(op.actor).some((l) => l.slot === name.slot && l.epoch === name.epoch)) return;
      const w = op.actor;
      epoch = name.writerEpoch;
      after.arm(w);
      sched.hold(w, `the repair sealed ${epoch} or ended`, PASS_WAIT, () => sealed || over(), (o) => o.spec.kind === 'lance.add');
      // No other writer takes its slot meanwhile (its renewals may be lost; its lease stays current until taken).
      sched.hold('*', `the read after ${w}'s answer ended, or the repair`, 2 * PASS_WAIT, () => after.ended || over(), (o) => o.spec.kind === 'lease.acquire' && /^w\d/.test(o.actor) && o.actor !== w);
      return;
    }
    if (!sealed && /putIfAbsent$/.test(op.spec.kind) && op.spec.target === sealKey(epoch)) sealed = true;
    after.step();
  };
}

/**
 * The switch-late window, told every landed request; one runs at a time. The old-scope writer's
 * hold, the seal it waits for and the read after its answer are as in `repairLost`.
 */
export function switchLate(h: RepairHost): (op: Op) => void {
  const { sched } = h;
  let repair: string | null = null;
  let writer = '';
  let epoch: string | null = null;
  let sealed = false;
  let landed = false;
  const after = new ReadAfterAnswer(h);
  const open = () => repair !== null && (!landed || !after.ended) && sched.faultsOn;
  return (op) => {
    // Over: its read ended, or the repair ended before its switch was sent (it failed earlier).
    if (repair !== null && !h.running(repair) && (!open() || (!landed && sched.cancelNext(repair)))) repair = null;
    if (repair === null) {
      if (!tookMaintainer(op) || !h.running(op.actor) || !h.rng.chance(h.cfg.switchLate)) return;
      const r = (repair = op.actor);
      writer = '';
      epoch = null;
      sealed = landed = false;
      after.arm('');
      // The record's PUT times out; the copy lands once a writer holding a slot taken after the
      // repair ended (it held them all) read the record again.
      sched.failNext(r, /^obj\.put$/, 'timeout', (spec, by) => {
        if (writer !== '' || spec.kind !== 'obj.get' || spec.target !== CHOICE_KEY || !/^w\d/.test(by) || h.running(r) || h.slotsOf(by).length === 0) return false;
        writer = by;
        return true;
      });
      // No other repair runs meanwhile (its switch would land before this one's late copy).
      sched.hold('*', `${r}'s window`, 4 * PASS_WAIT, () => !open(), (o) => /^f\d/.test(o.actor) && o.actor !== r);
      return;
    }
    if (!landed) {
      if (op.actor !== 'late' || op.spec.target !== CHOICE_KEY || writer === '') return;
      landed = true;
      const held = h.slotsOf(writer)[0];
      if (held === undefined) return;
      const w = writer;
      const e = (epoch = formatWriterEpoch(held.slot, held.epoch));
      after.arm(w);
      const oldScope = held.key.slice(0, held.key.lastIndexOf('/slot/') + 1);
      sched.hold(w, `a writer of the new records sealed ${e}`, PASS_WAIT, () => sealed || !open(), (o) => o.spec.kind === 'lance.add');
      sched.hold('*', `the read after ${w}'s answer ended`, 2 * PASS_WAIT, () => !open(), (o) => o.spec.kind === 'lease.acquire' && o.actor !== w && o.spec.target.startsWith(oldScope));
      if (!h.freshWriter(w)) sched.note('no writer could start again now');
      h.deliverToAll();
      return;
    }
    if (epoch === null) return;
    if (!sealed && op.actor !== writer && /putIfAbsent$/.test(op.spec.kind) && op.spec.target === sealKey(epoch)) sealed = true;
    after.step();
  };
}
