/**
 * The deterministic scheduler of one simulated schedule. Every wrapped I/O call (object store,
 * lease store, Lance table and connection, clock sleep) registers a pending operation and waits;
 * the driver releases one operation at a time, only when the system is quiescent (the released
 * operation finished and its continuations ran up to their next wrapped call, or ended), and
 * the seed picks which one and what happens to it:
 *   ok          run it;
 *   failBefore  throw without doing it;
 *   failAfter   do it, then throw (it landed, the answer was lost);
 *   timeout     throw now; a mutating operation lands later, at a point the seed picks, or never.
 * Nothing but released operations runs native I/O, so the same seed gives the same interleaving.
 *
 * Attribution: the actor of an operation (writer `w1.2`, reader `r1`, ...) comes from an
 * AsyncLocalStorage context entered when the driver starts an action; background work (a
 * writer's merge) inherits the context of the action that started it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Rng } from './prng.ts';

export type Fault = 'ok' | 'failBefore' | 'failAfter' | 'timeout';
/** What a held late copy waits for: a landed request (and who sent it; `late` for a late copy). */
export type LandsWhen = (landed: OpSpec<unknown>, by: string) => boolean;

export interface SimContext {
  sched: Scheduler;
  actor: string;
}

export const simContext = new AsyncLocalStorage<SimContext>();

export interface OpSpec<T> {
  /** e.g. `obj.put`, `lease.acquire`, `lance.add`. */
  kind: string;
  /** What it acts on (a key, a table name), for the trace. */
  target: string;
  /** Whether it changes stored state (only those can land late). */
  mutating: boolean;
  /** Faults apply (sleep is a pure scheduling point). */
  faultable: boolean;
  run: () => Promise<T>;
  /** The error the real store throws for an injected failure. */
  error: (message: string) => Error;
  /** Prepares, when the call times out, how it lands later (default: `run`). */
  late?: () => Promise<() => Promise<unknown>>;
  /**
   * The real store's SDK may send it again (every request but the ones sent once): a copy that
   * timed out may land after the copy that answered (SchedulerOptions.resends).
   */
  resendable?: boolean;
  /** May be released only once this holds (a timer: its clock has reached its time). */
  notBefore?: () => boolean;
  /** A cancelled operation is dropped unreleased (a timer cleared). */
  token?: { cancelled: boolean };
  /** A timed-out call that can never land later (an in-process SQLite transaction). */
  neverLate?: boolean;
}

export interface Op {
  id: number;
  actor: string;
  spec: OpSpec<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/**
 * A steered wait (test/sim/steer.ts): `actor`'s requests (`*`: every actor's; those `ops`
 * accepts, all without it) are not released until `until()` holds, at most until step `untilStep`. Where a random pause
 * waits a number of steps, a hold waits for a protocol step of another actor (a seal, a
 * retirement's deletion, a reader's base read), so the interleaving a guard is about comes often.
 */
export interface Hold {
  actor: string;
  ops?: (op: Op) => boolean;
  until: () => boolean;
  untilStep: number;
  why: string;
}

export interface SchedulerOptions {
  /** Probability that a released faultable operation gets a fault. */
  faultRate: number;
  /** Relative weights of the fault kinds. */
  faultWeights?: Partial<Record<Exclude<Fault, 'ok'>, number>>;
  /** Probability that a timed-out mutating operation lands later at all. */
  lateLandProbability?: number;
  /**
   * Probability that a release follows actor priorities instead of a uniform pick (PCT style:
   * each actor gets a random priority, reshuffled now and then, so one actor can run far ahead
   * of another, e.g. a reader through a whole merge, or a paused zombie until after a takeover).
   */
  priorityBias?: number;
  /**
   * SDK resends: a resendable mutating operation released without a fault is, with this
   * probability, answered by a second copy while the first (timed out on the client) lands
   * later, at a point the seed picks, or never. Drawn from its own stream (`rng`), so that a
   * schedule without resends replays what it did before they existed.
   */
  resends?: { rng: Rng; probability: number };
  /**
   * Fault bursts: now and then, for a stretch of releases, one fault kind at a high rate (a
   * store that keeps timing out, a lease table that drops answers), instead of uniform noise.
   * Drawn from its own stream (`rng`), so a schedule without bursts replays what it did before.
   */
  bursts?: { rng: Rng; chance: number; length: number; rate: number; targets?: readonly string[]; kinds?: ReadonlyArray<Exclude<Fault, 'ok'>> };
  /**
   * Windows: right after a write of a protocol step lands (a marker, a commit, a fence, a seal,
   * a deletion...), its actor is paused for a few steps with this probability, so that the next
   * step of the protocol comes late and other actors run in between, where the guards matter.
   */
  windows?: { rng: Rng; probability: number };
  /** Readers stall between the requests of one read with this probability (a read spanning other actors' steps). */
  readerStalls?: { rng: Rng; probability: number };
  /** Requests of these kinds are followed by a pause of their actor (a protocol's slow step: a sealer reading versions). */
  slowSteps?: { rng: Rng; kinds: RegExp; probability: number };
  /** Share of a crashed actor's operations in flight that land later anyway (default 0). */
  crashLanding?: { rng: Rng; probability: number };
  /**
   * The stream of lib's random ids (log ids, nonces, lease tokens; test/sim/lance.ts routes
   * node:crypto's randomUUID and randomBytes to it): a stream of its own, so the other streams
   * draw what they drew before it existed.
   */
  ids?: Rng;
}

/** Releases a late copy waits at least before it may land. */
const LATE_STEPS = [0, 0, 0, 5, 20, 60, 200] as const;
/** Releases a late copy held for its window (`lateHold`) waits at most after it was due. */
const LATE_HOLD_CAP = 1_500;

/** What a fault burst hits: requests whose kind starts with one of these ('' : all). */
const BURST_TARGETS = ['', 'obj.', 'obj.put', 'obj.list', 'obj.delete', 'lance.add', 'lance.', 'lease.', 'coord.', 'sqlite.', 'fs.sync'] as const;

/** Time spent per operation kind in this process (for tuning the harness's speed). */
export const profile = new Map<string, { n: number; ms: number }>();

export class Scheduler {
  readonly pending: Op[] = [];
  readonly trace: string[] = [];
  /**
   * Late copies held for a window (config.ts `lateMarkers`): for a request about to land late,
   * what a later landed request must match before the copy may land (null: nothing), so that it
   * lands after a protocol step instead of at a point the seed picks (capped: `LATE_HOLD_CAP`).
   * `resent`: the copy is one the SDK resent after the request landed (else it timed out);
   * `actor`: who sent the request. The predicate is told each landed request and who sent it
   * (`late` for a late copy).
   */
  lateHold: ((spec: OpSpec<unknown>, resent: boolean, actor: string) => LandsWhen | null) | null = null;
  /** A fault for a request, steered toward a window (null: drawn as any other). */
  steerFault: ((spec: OpSpec<unknown>, actor: string) => Exclude<Fault, 'ok'> | null) | null = null;
  /** Whether the SDK resends a resendable write that landed, steered toward a window (null: drawn as any other). */
  steerResend: ((spec: OpSpec<unknown>) => boolean | null) | null = null;
  private lateWaits: Array<{ until: LandsWhen; seen: boolean }> = [];
  readonly crashed = new Set<string>();
  private readonly pausedUntil = new Map<string, number>();
  private readonly holds: Hold[] = [];
  private nextId = 1;
  private inFlight = 0;
  step = 0;
  /** Run operations at once, unscheduled and unfaulted (the final phase, with one actor left). */
  direct = false;
  faultsOn = true;
  readonly libRandom: Rng;
  readonly idRandom: Rng | null;
  /** Told of every request released without a fault before it (the schedule reacts to protocol steps). */
  onLanded: ((op: Op) => void) | null = null;

  constructor(
    private readonly rng: Rng,
    private readonly o: SchedulerOptions,
  ) {
    this.libRandom = rng.fork();
    this.idRandom = o.ids ?? null;
  }

  /** Register a wrapped call; it runs when the driver releases it. */
  op<T>(spec: OpSpec<T>): Promise<T> {
    if (this.direct) return spec.run();
    const actor = simContext.getStore()?.actor ?? 'bg';
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ id: this.nextId++, actor, spec: spec as OpSpec<unknown>, resolve: resolve as (v: unknown) => void, reject });
    });
  }

  /** Run `fn` as `actor` (its wrapped calls are attributed to it). */
  run<T>(actor: string, fn: () => Promise<T>): Promise<T> {
    return simContext.run({ sched: this, actor }, fn);
  }

  /**
   * `actor` stops for good. Its operations in flight (registered, not answered) never answer; a
   * mutating one lands later anyway with probability `crashLanding` (it was already sent).
   */
  crash(actor: string): void {
    this.crashed.add(actor);
    this.trace.push(`${this.step} crash ${actor}`);
    const cl = this.o.crashLanding;
    if (!cl) return;
    for (const op of this.pending.filter((o) => o.actor === actor && o.spec.mutating && !o.spec.neverLate)) {
      if (!cl.rng.chance(cl.probability)) continue;
      this.trace.push(`${this.step} ${actor} ${op.spec.kind} ${maskRandom(op.spec.target)} (in flight at the crash: lands later)`);
      this.landLater(op.spec, op.spec.run, false, actor);
    }
  }

  pause(actor: string, steps: number): void {
    this.pausedUntil.set(actor, this.step + steps);
    this.trace.push(`${this.step} pause ${actor} for ${steps}`);
  }

  /**
   * End the pauses; if none was running, the holds (the driver calls this when nothing else can
   * run: a hold outlasts a pause, whose end may let its protocol step come).
   */
  unpauseAll(): void {
    const paused = [...this.pausedUntil.values()].some((s) => s > this.step);
    this.pausedUntil.clear();
    if (paused) return;
    for (const h of this.holds.splice(0)) this.trace.push(`${this.step} hold of ${h.actor} (${h.why}) ends: nothing else can run`);
  }

  /** `actor`'s requests (those `ops` accepts; `*`: every actor's) wait until `until()` holds, at most `steps` releases. */
  hold(actor: string, why: string, steps: number, until: () => boolean, ops?: (op: Op) => boolean): void {
    this.holds.push({ actor, why, untilStep: this.step + steps, until, ...(ops ? { ops } : {}) });
    this.trace.push(`${this.step} hold ${actor} until ${why} (at most ${steps} steps)`);
  }

  /** Drop the holds that are over (their step came, or what they wait for happened). */
  private settleHolds(): void {
    for (let i = this.holds.length - 1; i >= 0; i--) {
      const h = this.holds[i]!;
      const done = h.until();
      if (!done && h.untilStep > this.step) continue;
      this.holds.splice(i, 1);
      this.trace.push(`${this.step} hold of ${h.actor} ends: ${done ? h.why : 'waited long enough'}`);
    }
  }

  private held(op: Op): boolean {
    return this.holds.some((h) => (h.actor === op.actor || h.actor === '*') && (!h.ops || h.ops(op)));
  }

  note(s: string): void {
    this.trace.push(`${this.step} ${s}`);
  }

  /** Pending operations the driver may release now (not crashed, not paused). */
  eligible(): Op[] {
    if (this.pending.some((op) => op.spec.token?.cancelled)) this.pending.splice(0, this.pending.length, ...this.pending.filter((op) => !op.spec.token?.cancelled));
    if (this.holds.length > 0) this.settleHolds();
    return this.pending.filter(
      (op) => !this.crashed.has(op.actor) && (this.pausedUntil.get(op.actor) ?? -1) <= this.step && (op.spec.notBefore?.() ?? true) && !(this.holds.length > 0 && this.held(op)),
    );
  }

  hasPaused(): boolean {
    return this.holds.length > 0 || [...this.pausedUntil.values()].some((s) => s > this.step);
  }

  /** Release one operation the seed picks among `ops`, with a fault the seed picks. */
  async releaseRandom(ops: readonly Op[]): Promise<void> {
    if (this.rng.chance(0.05) && this.priorities.size > 0) this.priorities.set(this.rng.pick([...this.priorities.keys()]), this.rng.next());
    let op: Op;
    if (this.rng.chance(this.o.priorityBias ?? 0)) {
      op = ops[0]!;
      for (const o of ops) if (this.priority(o.actor) > this.priority(op.actor)) op = o;
    } else op = this.rng.pick(ops);
    await this.release(op, this.pickFault(op));
  }

  private readonly priorities = new Map<string, number>();
  private priority(actor: string): number {
    let p = this.priorities.get(actor);
    if (p === undefined) this.priorities.set(actor, (p = this.rng.next()));
    return p;
  }

  private burst: { left: number; kind: Exclude<Fault, 'ok'>; target: string } | null = null;
  /** Faults set for an actor's next request of some kinds (a reaction at a protocol point), by actor and kinds. */
  private readonly nextFaults = new Map<string, { actor: string; kinds: RegExp; fault: Exclude<Fault, 'ok'>; lands?: LandsWhen }>();
  /** The landing of the request being released, if its fault was steered with one (`failNext`). */
  private steeredLanding: LandsWhen | null = null;

  /**
   * The next request of `actor` whose kind matches `kinds` gets `fault` (faults on: drawing
   * nothing). A mutating request that times out so then lands later (unless the run ends
   * first), once a landed request matches `lands` (capped as any held copy), if given.
   */
  failNext(actor: string, kinds: RegExp, fault: Exclude<Fault, 'ok'>, lands?: LandsWhen): void {
    this.nextFaults.set(`${actor} ${kinds.source}`, { actor, kinds, fault, ...(lands ? { lands } : {}) });
    this.trace.push(`${this.step} ${actor}: its next ${kinds.source} request gets ${fault}${lands ? ' (it lands later, held for its window)' : ''}`);
  }

  /** Drop the faults `failNext` set for `actor` that no request took yet; whether there were any. */
  cancelNext(actor: string): boolean {
    const mine = [...this.nextFaults].filter(([, f]) => f.actor === actor).map(([k]) => k);
    for (const k of mine) this.nextFaults.delete(k);
    return mine.length > 0;
  }

  private pickFault(op: Op): Fault {
    if (!this.faultsOn || !op.spec.faultable) return 'ok';
    const next = this.nextFaults.size === 0 ? undefined : [...this.nextFaults].find(([, f]) => f.actor === op.actor && f.kinds.test(op.spec.kind));
    if (next) {
      this.nextFaults.delete(next[0]);
      const [, f] = next;
      this.steeredLanding = f.lands ?? null;
      return f.fault;
    }
    const steered = this.steerFault?.(op.spec, op.actor);
    if (steered) return steered;
    const b = this.o.bursts;
    if (b && this.burst === null && b.rng.chance(b.chance)) {
      // One fault kind on one kind of request (a store, a table, a lease table that misbehaves).
      const target = b.rng.pick(b.targets ?? BURST_TARGETS);
      this.burst = { left: b.length, kind: b.rng.pick(b.kinds ?? (['failBefore', 'failAfter', 'timeout'] as const)), target };
      this.trace.push(`${this.step} fault burst: ${this.burst.kind} on ${target || 'everything'} x${b.length}`);
    }
    if (b && this.burst !== null && op.spec.kind.startsWith(this.burst.target)) {
      const kind = this.burst.kind;
      if (--this.burst.left <= 0) this.burst = null;
      if (b.rng.chance(b.rate)) return kind === 'timeout' && op.spec.neverLate ? 'failBefore' : kind;
    }
    if (!this.rng.chance(this.o.faultRate)) return 'ok';
    const w = { failBefore: 1, failAfter: 1, timeout: 1, ...this.o.faultWeights };
    const total = w.failBefore + w.failAfter + w.timeout;
    let x = this.rng.next() * total;
    if ((x -= w.failBefore) < 0) return 'failBefore';
    if ((x -= w.failAfter) < 0) return 'failAfter';
    return 'timeout';
  }

  async release(op: Op, fault: Fault): Promise<void> {
    const lands = this.steeredLanding;
    this.steeredLanding = null;
    this.pending.splice(this.pending.indexOf(op), 1);
    this.step++;
    this.trace.push(`${this.step} ${op.actor} ${op.spec.kind} ${maskRandom(op.spec.target)}${fault === 'ok' ? '' : ` !${fault}`}`);
    this.inFlight++;
    const t0 = performance.now();
    try {
      const { spec } = op;
      switch (fault) {
        case 'ok':
          try {
            op.resolve(await spec.run());
            this.sawLanded(spec, op.actor);
          } catch (e) {
            op.reject(e);
          }
          // A window after a step of a protocol: a write landed, or a read answered (less often).
          const w = this.o.windows;
          if (w && this.faultsOn && op.actor !== 'late' && spec.kind !== 'timer' && spec.kind !== 'sleep' && w.rng.chance(spec.mutating ? w.probability : w.probability / 3)) {
            this.pause(op.actor, w.rng.between(3, 30));
          }
          const ss = this.o.slowSteps;
          if (ss && this.faultsOn && ss.kinds.test(spec.kind) && ss.rng.chance(ss.probability)) this.pause(op.actor, ss.rng.between(5, 40));
          const rs = this.o.readerStalls;
          if (rs && this.faultsOn && !spec.mutating && /^r\d|:read$/.test(op.actor) && rs.rng.chance(rs.probability)) this.pause(op.actor, rs.rng.between(5, 40));
          if (this.faultsOn) this.onLanded?.(op);
          const resends = this.o.resends;
          if (spec.mutating && spec.resendable && resends && (this.steerResend?.(spec) ?? resends.rng.chance(resends.probability))) {
            this.trace.push(`${this.step} ${op.actor} ${op.spec.kind} ${maskRandom(op.spec.target)} (resent: an earlier copy may land later)`);
            if (resends.rng.chance(this.o.lateLandProbability ?? 0.7)) this.landLater(spec, spec.run, true, op.actor);
          }
          break;
        case 'failBefore':
          op.reject(spec.error(`injected: ${spec.kind} ${spec.target} failed (not done)`));
          break;
        case 'failAfter':
          try {
            await spec.run();
            this.sawLanded(spec, op.actor);
          } catch {
            // it failed by itself; the caller gets the injected error either way
          }
          op.reject(spec.error(`injected: ${spec.kind} ${spec.target} done, answer lost`));
          break;
        case 'timeout':
          op.reject(spec.error(`injected: ${spec.kind} ${spec.target} timed out`));
          if (spec.mutating && !spec.neverLate && (lands !== null || this.rng.chance(this.o.lateLandProbability ?? 0.7))) this.landLater(spec, spec.late ? await spec.late() : spec.run, false, op.actor, lands);
          break;
      }
    } finally {
      this.inFlight--;
      const k = op.spec.kind;
      const p = profile.get(k) ?? { n: 0, ms: 0 };
      p.n++;
      p.ms += performance.now() - t0;
      profile.set(k, p);
    }
  }

  /** A request landed: late copies held for it may land now. */
  private sawLanded(spec: OpSpec<unknown>, by: string): void {
    if (this.lateWaits.length === 0) return;
    for (const w of this.lateWaits) if (w.until(spec, by)) w.seen = true;
    this.lateWaits = this.lateWaits.filter((w) => !w.seen);
  }

  /** Queue `run` as a copy of `spec` that lands when the seed picks it (a late actor's operation). */
  landLater(spec: OpSpec<unknown>, run: () => Promise<unknown>, resent: boolean, actor: string, lands: LandsWhen | null = null): void {
    // Mostly soon after, sometimes long after (a request stuck in a server or a connection).
    const due = this.step + this.rng.pick(LATE_STEPS);
    const until = lands ?? this.lateHold?.(spec, resent, actor) ?? null;
    const wait = until ? { until, seen: false } : null;
    if (wait) {
      this.lateWaits.push(wait);
      this.trace.push(`${this.step} late copy of ${spec.kind} ${maskRandom(spec.target)} held for its window`);
    }
    const ready = () => this.step >= due && (!wait || wait.seen || this.step >= due + LATE_HOLD_CAP);
    this.pending.push({
      id: this.nextId++,
      actor: 'late',
      spec: { ...spec, kind: `late:${spec.kind}`, faultable: false, run, late: undefined, resendable: false, notBefore: ready },
      resolve: () => undefined,
      reject: () => undefined,
    });
  }

  /**
   * Wait until the system is quiescent: nothing released is running and every continuation
   * has reached its next wrapped call (continuations are microtasks and immediates; all native
   * I/O is a wrapped call, so a few turns of the event loop drain them).
   */
  async drain(): Promise<void> {
    for (let i = 0; i < 3 || this.inFlight > 0; i++) await new Promise<void>((r) => setImmediate(r));
  }
}

/** Lance names data and transaction files randomly: mask that part so traces of a replay match. */
function maskRandom(s: string): string {
  return s.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '*').replace(/\/data\/[0-9a-f]{40,}\.lance$/, '/data/*.lance');
}
