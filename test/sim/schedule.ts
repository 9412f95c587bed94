/**
 * One seeded schedule: 2-4 writers (own LanceCheckpointLog and owner each, 1-3 slots between
 * them), one or two maintainers, two readers and a deleter on one local root, real Lance, wrapped
 * stores, simulated clocks. The seed picks the configuration (test/sim/config.ts: which
 * coordination and lease stores, clock skew, crashes, fault bursts, ...), the workload
 * (test/sim/workload.ts) and, through the scheduler, the interleaving and the faults. Then:
 * quiesce, close some writers, read once with nothing running (a live log must be readable),
 * let every lease expire, maintain twice, read everything with a fresh log object, and check
 * I1-I5 and D1 on every read.
 *
 * Processes: each actor is a process with its own clock (true time plus its skew; a jump moves
 * it), timers on that clock (lease renewals, idle merges) and stores. A crashed process never
 * runs again (its requests in flight may land later); a new one takes its place.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { existsSync } from 'node:fs';
import { inspect, isDeepStrictEqual } from 'node:util';
import { CHOICE_KEY, SENTINEL_KEY } from '../../lib/coord/choose.ts';
import { SqliteCoordStore } from '../../lib/coord/sqlite.ts';
import { DgclError, LogNotFoundError, NotFoundError } from '../../lib/errors.ts';
import { summarize } from '../../lib/fold.ts';
import { LocalLeaseStore } from '../../lib/lease/local.ts';
import { genKey, ITEMS_DIR, retiredKey, shardPrefix } from '../../lib/log/layout.ts';
import { SWITCH_HOLD_MS, SwitchOutcomeUnknownError } from '../../lib/log/admin/old-scope.ts';
import { LanceCheckpointLog } from '../../lib/log/log.ts';
import type { WriterHooks } from '../../lib/log/write/writer.ts';
import { LocalObjectStore } from '../../lib/storage/local.ts';
import type { ObjectStore } from '../../lib/storage/objects.ts';
import { lanceStorageOptions, logLocation, logUri, parseRoot } from '../../lib/storage/location.ts';
import { History, trajectoryObservation, type ItemObservation } from '../support/invariants.ts';
import { SimClock, SimTime } from './clock.ts';
import { pickConfig, type Focus, type SimConfig } from './config.ts';
import { MemCoordRecords, SimCoordWrapper, SimTableLeaseStore } from './coord.ts';
import { installLancePatches, installRandomPatch, simTableWrapper } from './lance.ts';
import { MemLeaseRecords, SimLeaseStore } from './leases.ts';
import { SimObjectStore } from './objects.ts';
import { Rng } from './prng.ts';
import { isWholeLog, observe, READ_KINDS, type ReadKind } from './reads.ts';
import { Scheduler, simContext, type Op } from './scheduler.ts';
import { repairLost, switchLate } from './steer-repair.ts';
import { Steering, type SteerRead } from './steer.ts';
import { WAIT } from './steer-core.ts';
import { deliveryCopy, newItem, reuseBuffers, startOver, Workload, type ItemModel } from './workload.ts';
import { readsOf } from '../../lib/log/reads.ts';

export type { SimConfig } from './config.ts';

export interface ScheduleResult {
  seed: number;
  config: SimConfig;
  violations: string[];
  trace: string[];
  counts: ReturnType<History['counts']> & { steps: number };
  ms: number;
}

interface Proc {
  /** The machine's name (w1, r2, m1, d1): its clock. */
  name: string;
  inc: number;
  actor: string;
  log: LanceCheckpointLog;
}

interface WriterActor extends Proc {
  closing: boolean;
}

interface Delivery {
  item: ItemModel;
  actor: string;
  settled: boolean;
  /** The batch's chain index and the incarnation it was sent in (none for a delete attempt). */
  batch?: { idx: number; base: number };
}

/** Violations of the schedules running now (an unhandled rejection is reported to each). */
const running = new Set<string[]>();
let unhandledInstalled = false;
function installUnhandled(): void {
  if (unhandledInstalled) return;
  unhandledInstalled = true;
  // A rejection nobody handles would crash a real process (Node's default): a bug to report.
  process.on('unhandledRejection', (e) => {
    const msg = `CRASH: unhandled rejection (would end the process; with --parallel it is reported to every schedule then running, replay the seed alone): ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`;
    for (const v of running) v.push(msg);
    if (running.size === 0) console.error(msg);
  });
}

function tmpBase(): string {
  return existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
}

export async function runSchedule(seed: number, opts: { keep?: boolean; focus?: Focus } = {}): Promise<ScheduleResult> {
  installLancePatches();
  installRandomPatch();
  installUnhandled();
  const t0 = performance.now();
  const cfg = pickConfig(seed, opts.focus);
  const rng = new Rng(seed);
  const schedRng = rng.fork();
  const wl = rng.fork(); // workload choices, apart from the scheduler's
  const dl = rng.fork(); // deletes
  const mt = rng.fork(); // maintainers
  const ck = rng.fork(); // clocks
  const cr = rng.fork(); // crashes
  const sched = new Scheduler(schedRng, {
    faultRate: cfg.faultRate,
    priorityBias: cfg.priorityBias,
    ...(cfg.resends > 0 ? { resends: { rng: rng.fork(), probability: cfg.resends } } : {}),
    ...(cfg.burstChance > 0 ? { bursts: { rng: rng.fork(), chance: cfg.burstChance, length: 12, rate: 0.6, ...(cfg.burstTargets ? { targets: cfg.burstTargets } : {}) } } : {}),
    ...(cfg.crashLanding > 0 ? { crashLanding: { rng: rng.fork(), probability: cfg.crashLanding } } : {}),
    ...(cfg.windows > 0 ? { windows: { rng: rng.fork(), probability: cfg.windows } } : {}),
    ...(cfg.readerStalls > 0 ? { readerStalls: { rng: rng.fork(), probability: cfg.readerStalls } } : {}),
    ...(cfg.slowSteps ? { slowSteps: { rng: rng.fork(), kinds: new RegExp(cfg.slowSteps.kinds), probability: cfg.slowSteps.probability } } : {}),
    ids: new Rng(seed * 104_729 + 7),
  });
  const reactRng = rng.fork();
  const time = new SimTime();
  const clocks = new Map<string, SimClock>();
  const clockOf = (name: string): SimClock => {
    let c = clocks.get(name);
    if (!c) {
      c = new SimClock(time, cfg.skewMs > 0 ? Math.round((ck.next() * 2 - 1) * cfg.skewMs) : 0);
      c.sched = sched;
      clocks.set(name, c);
    }
    return c;
  };
  const root = await mkdtemp(path.join(tmpBase(), 'dgcl-sim-'));
  const loc = parseRoot(root);
  const uri = logUri(loc, 'p', 'e');
  const logLoc = logLocation(loc, 'p', 'e');
  if (logLoc.kind !== 'file') throw new Error('the simulation needs a local root');
  const inner = new LocalObjectStore(logLoc.dir);
  if (cfg.coord === 'sqlite') {
    // As a local log's first writer makes it: the database, then the record naming it.
    (await SqliteCoordStore.open(logLoc.dir, { create: true })).close();
    await inner.putIfAbsent(CHOICE_KEY, 'sqlite');
  }
  const written = new Map<string, number>();
  const leaseRecords = new MemLeaseRecords();
  const coordRecords = new MemCoordRecords(time);
  const leaseDir = path.join(root, 'leases');
  const storageOptions = lanceStorageOptions(loc, {});
  const renewalsLost = cfg.renewalsLost > 0 ? { rng: rng.fork(), probability: cfg.renewalsLost } : null;
  // The steering of the incarnations and repair generators (config.ts), on a stream of its own
  // forked last: the other generators' schedules draw what they drew before it existed.
  const steerRng = rng.fork();
  const relistRng = cfg.steer ? rng.fork() : null; // the relist focus's steering (steer.ts), after it: seeds without it replay as before
  const lostRng = cfg.repairLoses > 0 || cfg.switchLate > 0 ? rng.fork() : null; // the repair-lost and switch-late foci's (steer-repair.ts), likewise
  if (cfg.lateMarkers > 0) {
    // After those too. Generations' markers time out, and their late copies land once the generation is gone.
    const lateRng = rng.fork();
    const genOf = (spec: { kind: string; target: string }) => {
      const gen = /putIfAbsent$/.test(spec.kind) ? /^_dgcl\/meta\/gen\.(.+)$/.exec(spec.target)?.[1] : undefined;
      return gen !== undefined && spec.target === genKey(gen) ? gen : undefined;
    };
    sched.steerFault = (spec) => (genOf(spec) !== undefined && lateRng.chance(cfg.lateMarkers) ? 'timeout' : null);
    // A marker the SDK may resend (only if it is not sent once) is resent as often as one times out.
    sched.steerResend = (spec) => (genOf(spec) !== undefined ? lateRng.chance(cfg.lateMarkers) : null);
    sched.lateHold = (spec) => {
      const gen = genOf(spec);
      if (gen === undefined) return null;
      const dataset = shardPrefix(gen);
      // A retirement (its retired marker first) prunes the dataset before it deletes the marker:
      // the copy waits for that delete. A sweep of a given-up name prunes only.
      let retiring = false;
      return (l) => {
        if (/putIfAbsent$/.test(l.kind) && l.target === retiredKey(gen)) retiring = true;
        return (/delete$/.test(l.kind) && l.target === spec.target) || (!retiring && /prune$/.test(l.kind) && l.target === dataset);
      };
    };
  }
  if (cfg.focus === 'faults' || cfg.focus === 'markers') {
    // After those too. An item marker's PUT, if the SDK may resend it (only if it is not sent
    // once), is resent often; the earlier copy of one resent, and of half of those that time
    // out, lands only after the next PUT of that marker (its writer's retry, or another
    // writer's): a writer's old marker back in place, the windows of markers sent once and of
    // bodies of their own. In the markers focus more of them time out, and the copy of each
    // waits for another process's PUT (its writer's retry may have sent it again meanwhile).
    const resendRng = rng.fork();
    const marker = (spec: { kind: string; target: string }) => /^(obj|coord)\.put$/.test(spec.kind) && spec.target.startsWith(`${ITEMS_DIR}/`);
    sched.steerResend = (spec) => (marker(spec) ? resendRng.chance(0.5) : null);
    if (cfg.focus === 'markers') sched.steerFault = (spec) => (marker(spec) && resendRng.chance(0.3) ? 'timeout' : null);
    sched.lateHold = (spec, resent, sender) => {
      if (!marker(spec)) return null;
      // Another process: w1.2, the same writer started again after a close or a crash, is one too.
      if (cfg.focus === 'markers' && !resent) return (l, by) => marker(l) && l.target === spec.target && by !== sender;
      if (!(resent || resendRng.chance(0.5))) return null;
      return (l) => marker(l) && l.target === spec.target;
    };
  }
  /** The reactions to a process's protocol points (set below, once the workload exists). */
  let hooksFor: (proc: string) => WriterHooks = () => ({});
  // A log with object markers that repairs move into the lease table (the repair-objects
  // generator: config.ts); the table also holds the records then.
  const objectsInTable = cfg.coord === 'objects' && cfg.repairs > 0 && cfg.leases === 'table';
  const makeLog = (name: string, owner: string, objects: ObjectStore = new SimObjectStore(inner, sched, written, () => time.ms)) => {
    const clock = clockOf(name);
    const tableView = leaseRecords.store(clock);
    // A repair run from a host whose lease store answers (config.ts `repairRenews`); the final one
    // always is: it must go through, and its confirmation is a renewal of every lease it holds.
    const lost = (cfg.repairRenews && /^(final-)?f/.test(name)) || name === 'final-f' ? null : renewalsLost;
    const leases =
      cfg.coord === 'table' || objectsInTable
        ? new SimTableLeaseStore(tableView, sched, coordRecords, clock, lost)
        : new SimLeaseStore(cfg.leases === 'local' ? new LocalLeaseStore({ dir: leaseDir, clock }) : tableView, sched, lost);
    return new LanceCheckpointLog({
      pipeline: 'p',
      experiment: 'e',
      uri,
      objects,
      storageOptions,
      leases,
      owner,
      clock,
      slots: cfg.slots,
      leaseTtlMs: cfg.leaseTtlMs,
      mergeEveryCommits: cfg.mergeEveryCommits,
      mergeEveryBytes: cfg.mergeEveryBytes,
      mergeIdleMs: cfg.mergeIdleMs,
      maxBatchesPerCommit: cfg.maxBatchesPerCommit,
      cachedItems: cfg.cachedItems,
      versionRetentionMs: 3_600_000,
      claimRetentionMs: cfg.claimRetentionMs,
      deletionRetentionMs: cfg.deletionRetentionMs,
      wrapTable: simTableWrapper(sched),
      // An fsync is a scheduling point that can fail (before or after it ran).
      wrapSync: (n, run) => sched.op({ kind: 'fs.sync', target: n, mutating: false, faultable: true, run, error: (m) => new Error(m) }),
      ...(cfg.coord === 'sqlite' ? { wrapCoord: (s) => new SimCoordWrapper(s, sched) } : {}),
      ...(objectsInTable ? { coordination: 'objects' as const } : {}),
      ...(cfg.repairLeaseHoldMs !== undefined ? { repairLeaseHoldMs: cfg.repairLeaseHoldMs } : {}),
      hooks: {
        beforeCommit: (ids, shard, epoch) => hooksFor(name).beforeCommit?.(ids, shard, epoch),
        afterCommit: (shard, version) => hooksFor(name).afterCommit?.(shard, version),
        beforeMergeStep: (step, shard) => hooksFor(name).beforeMergeStep?.(step, shard),
      },
    });
  };

  // Claims may be deleted a retention after their writer's clock said (objects: the maintainer's
  // clock against true time; the table: the writer's stamp against true time): with skewed
  // clocks the window of a second first ack opens earlier by up to twice the largest skew.
  const history = new History({ nowMs: () => time.ms, claimRetentionMs: cfg.claimRetentionMs });
  const violations: string[] = [];
  running.add(violations);
  const proc = <P extends Proc>(name: string, extra: Omit<P, keyof Proc>): P => ({ name, inc: 1, actor: `${name}.1`, log: makeLog(name, `${name}.1`), ...extra }) as P;
  const renew = (p: Proc) => {
    p.inc++;
    p.actor = `${p.name}.${p.inc}`;
    p.log = makeLog(p.name, p.actor);
  };
  const writers: WriterActor[] = Array.from({ length: cfg.writers }, (_, i) => proc<WriterActor>(`w${i + 1}`, { closing: false }));
  const readers = [1, 2].map((i) => proc<Proc & { busy: number }>(`r${i}`, { busy: 0 }));
  const maints = Array.from({ length: cfg.maintainers }, (_, i) => proc<Proc & { busy: boolean }>(`m${i + 1}`, { busy: false }));
  const deleter = proc<Proc & { busy: boolean }>('d1', { busy: false });
  const repairer = proc<Proc & { busy: boolean }>('f1', { busy: false });
  /** Until when a repair whose switch failed holds the old scope's leases (0: none did). */
  let switchHeldUntil = 0;
  const work = new Workload(wl, cfg.failures, cfg.blobs);
  const items: ItemModel[] = [];
  const deliveries: Delivery[] = [];
  let outstanding = 0;
  let pointReads = 0;

  const restart = (w: WriterActor) => {
    renew(w);
    w.closing = false;
  };

  const track = (desc: string, actor: string, p: Promise<unknown>) => {
    outstanding++;
    sched.note(`start ${actor} ${desc}`);
    p.then(
      () => sched.note(`end ${actor} ${desc}`),
      (e: unknown) => sched.note(`end ${actor} ${desc}: ${e instanceof Error ? `${e.name}: ${e.message.slice(0, 160)}` : 'error'}`),
    ).finally(() => outstanding--);
  };

  const liveWriters = () => writers.filter((w) => !sched.crashed.has(w.actor));

  /** Writer `w` merges its own shard (`desc` names it in the trace). */
  const mergeOwn = (w: WriterActor, desc: string): Promise<unknown> => {
    const log = w.log;
    const p = sched.run(w.actor, () => log.mergeOwnShard());
    track(desc, w.actor, p);
    return p;
  };

  const settleWith = (d: Delivery) => () => {
    if (!d.settled) {
      d.settled = true;
      d.item.inflight--;
      if (d.batch && d.item.base === d.batch.base) {
        const at = d.item.flying.indexOf(d.batch.idx);
        if (at >= 0) d.item.flying.splice(at, 1);
      }
    }
  };

  /** A delivery whose outcome its client cannot know (it may land later): only it is retried. */
  const leaveInDoubt = (d: Delivery) => {
    const it = d.item;
    if (!d.batch || it.base !== d.batch.base || it.acked.includes(d.batch.idx)) return;
    if (d.batch.idx === it.cur) it.curInDoubt = true;
    else it.oldInDoubt = d.batch.idx;
  };

  const deliver = (w: WriterActor, it: ItemModel, batch: Record<string, unknown>, label: string) => {
    const idx = it.chain.indexOf(batch);
    const d: Delivery = { item: it, actor: w.actor, settled: false, batch: { idx, base: it.base } };
    deliveries.push(d);
    it.inflight++;
    it.flying.push(idx);
    const rec = history.beginAppend(w.actor, [batch]);
    const log = w.log;
    const incarnation = it.base;
    const sent = deliveryCopy(batch);
    const p = sched.run(w.actor, () => log.append([sent]));
    track(`${label} ${it.id}#${idx}`, w.actor, p);
    p.then(
      (acks) => {
        history.endAppend(rec, { acks });
        if (cfg.reuseBuffers) reuseBuffers(sent);
        if (it.base !== incarnation) return;
        if (!d.settled && idx === it.cur) it.curAcked = true;
        if (!it.acked.includes(idx)) it.acked.push(idx);
        if (it.oldInDoubt === idx) it.oldInDoubt = null;
        if (batch.terminal !== undefined) it.terminal = true;
        for (const a of acks) it.seen = Math.max(it.seen, a.lastSeq);
      },
      (e: unknown) => {
        history.endAppend(rec, { error: e });
        if (!(e instanceof DgclError)) violations.push(`ERROR: append of ${it.id}#${idx} by ${w.actor} failed with an untyped error (no code a caller can act on): ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
        // Every batch the workload sends is valid input, retries and redeliveries included: a
        // refusal as invalid would lose a step's output for good. (Item-state refusals can be
        // right: a creation given up for another attempt may have landed.)
        else if (e.code === 'INVALID_INPUT') violations.push(`ERROR: append of ${it.id}#${idx} by ${w.actor} refused as invalid input: ${e.message}`);
        // A timed-out request may land later (a client cannot know): a careful client retries
        // the same batch instead of sending a different one for the same step.
        if (/timed out/.test(String((e as Error)?.message))) leaveInDoubt(d);
      },
    ).finally(settleWith(d));
  };

  /** Who runs a delete: the deleter process (no slot), or a writer. */
  const deleterFor = (): Proc | null => {
    const ws = liveWriters().filter((w) => !w.closing);
    if (!deleter.busy && dl.chance(0.5)) return deleter;
    return ws.length > 0 ? dl.pick(ws) : null;
  };

  /**
   * One attempt of the item's delete through `by`; the item starts over once one returns. An
   * attempt counts as in flight like a delivery (nothing else of the item meanwhile; a crash of
   * its process settles it).
   */
  const deleteVia = (by: Proc, it: ItemModel, steered = false) => {
    const guarded = (seed + items.indexOf(it) + it.base) % 2 === 0;
    it.deleting ??= history.beginDelete(it.id);
    const rec = it.deleting;
    const d: Delivery = { item: it, actor: by.actor, settled: false };
    deliveries.push(d);
    it.inflight++;
    if (by === deleter) deleter.busy = true;
    const log = by.log;
    let through: number | null = null;
    const p = sched.run(by.actor, async () => {
      if (!guarded) return log.deleteItem(it.id);
      if (it.reread || it.seen === 0) {
        // A careful client after a CONFLICT: read the item, then delete what it now saw (and
        // keep that seq for later attempts: this one may delete and lose its answer).
        const s = await log.fold(it.id);
        it.seen = s.lastSeq;
        it.reread = false;
      }
      through = it.seen;
      return log.deleteItem(it.id, { throughSeq: it.seen });
    });
    track(`${guarded ? 'guarded delete' : 'delete'} ${it.id}`, by.actor, p);
    return p
      .then(
        (r) => {
          if (it.deleting !== rec) return false;
          history.endDelete(rec, r.throughSeq, r.deleted);
          startOver(it, r.throughSeq, through);
          if (r.deleted) afterDelete(it, steered);
          return r.deleted;
        },
        (e: unknown) => {
          if (!(e instanceof DgclError)) violations.push(`ERROR: delete of ${it.id} by ${by.actor} failed with an untyped error: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
          // still `deleting`: a later attempt retries
          const code = (e as { code?: string } | null)?.code;
          if (it.deleting === rec && code === 'CONFLICT') it.reread = true;
          // The seq came from an ack or a read of the item: never one it did not have (I4).
          if (through !== null && code === 'INVALID_INPUT') violations.push(`I4 guarded delete of ${it.id} through seq ${through} refused: ${(e as Error).message}`);
          return false;
        },
      )
      .finally(() => {
        settleWith(d)();
        if (by === deleter) deleter.busy = false;
      });
  };

  /** An old guarded delete of the item delivered again, after the item was created again: it must delete nothing. */
  const redeliverDelete = (it: ItemModel) => {
    const by = deleterFor();
    if (!by || it.oldDeletes.length === 0) return false;
    const seq = dl.pick(it.oldDeletes);
    const rec = history.beginDelete(it.id, seq);
    const incarnation = it.base;
    const log = by.log;
    const p = sched.run(by.actor, () => log.deleteItem(it.id, { throughSeq: seq }));
    track(`delete ${it.id} through ${seq} again`, by.actor, p);
    p.then(
      (r) => {
        history.endDelete(rec, r.throughSeq, r.deleted);
        // A delete that went through anyway ended this incarnation (the checker reports it).
        if (r.deleted && it.base === incarnation) it.broken = true;
      },
      () => undefined, // CONFLICT (the item has later events) or a fault: nothing deleted, or unknown
    );
    return true;
  };

  /** With chance `hot`: the item of the latest delivery (contention and reads where writes are). */
  const hotItem = (): ItemModel | null => (cfg.hot > 0 && deliveries.length > 0 && wl.chance(cfg.hot) ? deliveries.at(-1)!.item : null);

  /** A process that reads once, made for a steered read (none while its last read runs). */
  let once: (Proc & { busy: number }) | null = null;
  const oneOff = (): (Proc & { busy: number }) | null => {
    if (once?.busy) return null;
    if (once) renew(once);
    else once = proc<Proc & { busy: number }>('r3', { busy: 0 });
    return once;
  };

  /**
   * A read by a reader (of `item`, or of one the workload picks). Steered (test/sim/steer.ts): an
   * idle reader, in a new process if `fresh`, reads `kind` of `item` (none: the whole log).
   * `landing`: a point read of `item` right after its writer's commit landed, then the same read
   * through that writer (`landing.writer`), told when both ended.
   */
  const readAction = (item?: ItemModel, steered?: SteerRead, landing?: { writer: string; ended: (p: Promise<unknown>) => void }): boolean => {
    // Steered: an idle reader, else a new process.
    const r = steered?.fresh ? oneOff() : steered ? (readers.find((x) => x.busy === 0) ?? oneOff()) : wl.pick(readers);
    if (!r || items.length === 0 || r.busy >= 2) return false;
    const kind: ReadKind = steered?.kind ?? (landing ? wl.pick(['fold', 'trajectory', 'latest'] as const) : wl.pick(READ_KINDS));
    const x = (item ?? hotItem() ?? wl.pick(items)).id;
    if (kind === 'loadBlob' && work.blobEvents.length === 0) return false;
    const blobId = kind === 'loadBlob' ? wl.pick(work.blobEvents) : '';
    const what = isWholeLog(kind) || kind === 'failures' ? kind : kind === 'loadBlob' ? `loadBlob ${blobId.slice(0, 8)}` : `${kind} ${x}`;
    // Most point reads go through a live writer's log too (a writer reads its own generations
    // from what it keeps of its commits): the one taking a delivery of the item now, or the last
    // one that took one, else one picked by the read's number. It starts once the reader's read of the same
    // item ended, so that a writer's read showing less than a read that ended before it (I3: its
    // commit landed, visible to the reader, and not yet kept) can be caught.
    const writersNow = kind === 'fold' || kind === 'trajectory' || kind === 'latest' ? liveWriters().filter((w) => !w.closing) : [];
    // The writer with a delivery of the item in flight (its commit may be landing), else the last one to take one.
    const by = [...deliveries].reverse().filter((d) => d.item.id === x);
    const lastBy = (by.find((d) => !d.settled) ?? by[0])?.actor;
    const via = landing ? (writersNow.find((w) => w.actor === landing.writer) ?? null) : writersNow.length > 0 && wl.chance(0.7) ? (writersNow.find((w) => w.actor === lastBy) ?? writersNow[pointReads++ % writersNow.length]!) : null;
    const readVia = (actor: string, log: LanceCheckpointLog): Promise<unknown> => {
      const id = history.beginRead(actor, what);
      const p = sched.run(actor, () => observe(log, kind, x, blobId, work.blobs));
      track(what, actor, p);
      return p.then(
        (res) => history.endRead(id, res),
        (e: unknown) => history.endRead(id, { error: e }),
      );
    };
    r.busy++;
    const reader = r.actor;
    // A read of a reader that crashes never ends: it does not hold the reader's place.
    const first = readVia(r.actor, r.log).finally(() => r.actor === reader && r.busy--);
    steered?.started?.(reader, first);
    // Unless the writer is closing by then (its reads are refused) or crashed. Its read is an
    // actor of its own (the process's reading side): a pause of the writer's commits (at its
    // epoch check, say) does not hold the read, as in a real process.
    const both = via ? first.then(() => (via.closing || sched.crashed.has(via.actor) ? undefined : readVia(`${via.actor}:read`, via.log))) : first;
    landing?.ended(both);
    return true;
  };

  /** Nothing of item `it` is in flight or in doubt, and it is not being deleted. */
  const quiet = (it: ItemModel) => it.inflight === 0 && it.oldInDoubt === null && it.deleting === null && !it.broken;
  /** The items a steered delivery may take now: quiet, and not held back. */
  const freeItems = () => items.filter((it) => quiet(it) && !held.has(it));
  /** Writer `w` takes the next batch of item `it` (steered); false if it has none now. */
  const deliverNext = (w: WriterActor, it: ItemModel): boolean => {
    const next = work.nextFor(it, true);
    if (!next) return false;
    deliver(w, it, next.batch, 'append (steered)');
    return true;
  };

  // The steered windows of the relist, listings, sealing and own-merges foci (config.ts `steer`).
  const steering =
    relistRng &&
    new Steering({
      sched,
      rng: relistRng,
      cfg,
      time,
      inFlight: (proc) => deliveries.filter((d) => !d.settled && d.actor.startsWith(`${proc}.`)).map((d) => d.item),
      deliverVia: (not) => {
        const other = liveWriters().filter((w) => !not.includes(w.name) && !w.closing);
        return other.length > 0 && actions.deliver!.run(relistRng.pick(other));
      },
      read: (o) => readAction(o.item, o),
      deliverItem: (proc, itemId) => {
        const w = liveWriters().find((x) => x.name === proc && !x.closing);
        const it = items.find((x) => x.id === itemId);
        return !!w && !!it && actions.deliver!.run(w, it);
      },
      deliverBatch: (proc, itemId, which) => {
        const w = liveWriters().find((x) => x.name === proc && !x.closing);
        const it = items.find((x) => x.id === itemId);
        if (!w || !it || !quiet(it)) return false;
        if (which === 'next') return deliverNext(w, it);
        if (it.curInDoubt || which >= it.cur || !it.chain[which]) return false;
        deliver(w, it, it.chain[which]!, 'redeliver-old (steered)');
        return true;
      },
      writers: () => liveWriters().filter((w) => !w.closing).map((w) => w.name),
      maintain: () => {
        if (startPass() === null) afterPass.push(() => void (sched.faultsOn ? startPass() : null));
      },
      deleteItem: (itemId) => {
        const it = items.find((x) => x.id === itemId);
        if (!it || deleter.busy || !deletable(it)) return null;
        sched.note(`delete ${it.id} (steered)`);
        return deleteVia(deleter, it, true);
      },
      mergeWriters: (only) =>
        Promise.all(
          liveWriters()
            .filter((w) => !w.closing && (!only || only.includes(w.name)))
            .map((w) => mergeOwn(w, 'mergeOwnShard (steered)').catch(() => undefined)),
        ),
      setHeld: (itemId, on) => {
        const it = items.find((x) => x.id === itemId);
        if (it && on) held.add(it);
        else if (it) held.delete(it);
      },
      holdItem: (itemId, until) => {
        const it = items.find((x) => x.id === itemId);
        if (!it || held.has(it)) return;
        held.add(it);
        void until.finally(() => held.delete(it));
      },
    });

  // A read right after a step of a protocol lands (a commit, a marker, a fence, a seal, a merge,
  // a deletion): where a read that overlaps the next steps is most likely to meet their windows.
  let reactive = cfg.reactiveReads;
  // The repair-lost and switch-late foci's windows (steer-repair.ts), on a stream of their own forked last.
  const repairWindow = cfg.repairLoses > 0 ? repairLost : cfg.switchLate > 0 ? switchLate : null;
  const repairSteered =
    repairWindow !== null
      ? repairWindow({
          sched,
          time,
          cfg,
          rng: lostRng!,
          deliverToAll: () => {
            let n = 0;
            for (const w of liveWriters().filter((x) => !x.closing)) {
              const free = freeItems();
              if (free.length > 0 && deliverNext(w, lostRng!.pick(free))) n++;
            }
            return n;
          },
          answered: (actor) => deliveries.filter((d) => d.actor === actor && d.settled).length,
          readAll: (ended) => readAction(undefined, { kind: 'all', started: (_, p) => ended(p) }),
          running: (actor) => repairer.actor === actor && repairer.busy,
          slotsOf: (actor) => leaseRecords.slotsOf(actor),
          freshWriter: (not) => {
            const w = liveWriters().filter((x) => x.actor !== not && !x.closing);
            const free = freeItems();
            if (w.length === 0 || free.length === 0) return false;
            const x = lostRng!.pick(w);
            crashWriter(x);
            return deliverNext(x, lostRng!.pick(free));
          },
        })
      : null;

  sched.onLanded = (op) => {
    steering?.landed(op);
    repairSteered?.(op);
    if (cfg.deliverOnRepair > 0) deliverOnRepair(op);
    if (reactive <= 0 || !op.spec.mutating || op.actor === 'late' || !reactRng.chance(cfg.reactiveChance)) return;
    // After a commit: an item of it (a delivery its writer has in flight).
    const mine = op.spec.kind === 'lance.add' ? deliveries.filter((d) => d.actor === op.actor && !d.settled).map((d) => d.item) : [];
    if (readAction(mine.length > 0 ? reactRng.pick(mine) : undefined)) reactive--;
  };

  // Deliveries to every writer as a repair's last rebuilt record or its switch lands (config.ts
  // `deliverOnRepair`): writers that read the old records just before the switch and take a slot
  // just after it.
  const deliverOnRepair = (op: Op) => {
    if (!op.actor.startsWith('f1.') || !(op.spec.kind === 'coord.put' && op.spec.target === SENTINEL_KEY) && !(op.spec.kind === 'obj.put' && op.spec.target === CHOICE_KEY)) return;
    if (!steerRng.chance(cfg.deliverOnRepair)) return;
    sched.note(`deliveries to every writer as the repair's ${op.spec.target} lands`);
    for (const w of liveWriters()) if (!w.closing) actions.deliver!.run(w);
  };

  // Reactions at the points the log reports to its test hooks (config.ts `reactions`).
  let reactions = cfg.reactions;
  const itemsOf = (ids: readonly string[]) => items.filter((it) => ids.includes(it.id));
  hooksFor = (proc) => steering?.hooks(proc) ?? {
    beforeCommit: (ids) => {
      committing.set(proc, ids);
      if (reactions <= 0 || !sched.faultsOn || !reactRng.chance(cfg.takeoverOnCommit)) return;
      reactions--;
      // Its lease runs out as it commits: another writer takes a delivery (and the slot), a reader reads its items.
      time.ms += cfg.leaseTtlMs + 1;
      sched.note(`clock +${cfg.leaseTtlMs + 1} (the lease of ${proc} runs out as it commits)`);
      const me = simContext.getStore()?.actor;
      if (me) sched.pause(me, reactRng.between(5, 50));
      const other = liveWriters().filter((w) => w.name !== proc && !w.closing);
      if (other.length > 0) actions.deliver!.run(reactRng.pick(other));
      const mine = itemsOf(ids);
      if (mine.length > 0) readAction(reactRng.pick(mine));
    },
    afterCommit: (shard) => {
      for (const id of committing.get(proc) ?? []) lastGen.set(id, shard);
      if (reactions <= 0 || !sched.faultsOn || !reactRng.chance(cfg.readOnLanding)) return;
      const mine = deliveries.filter((d) => !d.settled && d.actor.startsWith(`${proc}.`)).map((d) => d.item);
      const me = simContext.getStore()?.actor;
      // The confirmation (its epoch check first) waits for both reads, so they fall in the window.
      const landing =
        me && cfg.holdOnLanding > 0 && steerRng.chance(cfg.holdOnLanding)
          ? {
              writer: me,
              ended: (p: Promise<unknown>) => {
                let done = false;
                void p.finally(() => (done = true));
                sched.hold(me, 'the reads of its landed commit', WAIT, () => done || !sched.faultsOn);
              },
            }
          : undefined;
      if (mine.length > 0 && readAction(reactRng.pick(mine), undefined, landing)) reactions--;
    },
    beforeMergeStep: (step, shard) => {
      if (step === 'delete-data' && /^w\d/.test(proc)) onRetire(shard);
      if (reactions <= 0 || !sched.faultsOn || (step !== 'base-commit' && step !== 'delete-data') || !reactRng.chance(cfg.readOnMerge)) return;
      if (readAction()) reactions--;
    },
  };

  // ---- steering of the incarnations generator (config.ts) ----------------------------------
  /** The generation each item's latest commit went to, and the items of each writer's commit under way. */
  const lastGen = new Map<string, string>();
  const committing = new Map<string, readonly string[]>();
  /** Deleted items held back until a maintenance pass after their delete ended (`holdRecreate`). */
  const held = new Set<ItemModel>();
  /** Called when the running pass ends (a pass asked for while the maintainer was busy). */
  const afterPass: Array<() => void> = [];

  /** An item with acked batches and nothing in flight, in doubt, deleting or held back: a delete of it now is a clean one. */
  const deletable = (x: ItemModel) => x.inflight === 0 && !x.curInDoubt && x.oldInDoubt === null && !x.broken && x.acked.length > 0 && x.deleting === null && !held.has(x);

  /** The writer process that took the item's latest delivery (an append, not a delete). */
  const lastAppendBy = (it: ItemModel): string | undefined => {
    for (let i = deliveries.length - 1; i >= 0; i--) if (deliveries[i]!.item === it && deliveries[i]!.batch !== undefined) return deliveries[i]!.actor;
    return undefined;
  };

  /** The live writer that took the item's latest delivery, with chance `sticky` (a queue partitioned by item). */
  const stickyWriter = (it: ItemModel, live: WriterActor[]): WriterActor | null => {
    const last = lastAppendBy(it);
    const w = live.find((x) => x.actor === last);
    return w && steerRng.chance(cfg.sticky) ? w : null;
  };

  /** A pass now, or once the running one ended; it settles when that pass ends. */
  const passSoon = (): Promise<unknown> => {
    if (!sched.faultsOn) return Promise.resolve();
    return startPass() ?? new Promise<void>((r) => afterPass.push(r)).then(passSoon);
  };

  /**
   * A writer's merge retires a generation (its retired marker landed, its files are next): its
   * deletion fails (`retireFaults`: the merge stays queued, its base commit done), and an item
   * whose latest rows it holds is deleted (`deleteOnRetire`).
   */
  const onRetire = (shard: string) => {
    if (!sched.faultsOn) return;
    const me = simContext.getStore()?.actor;
    if (me && cfg.retireFaults > 0 && steerRng.chance(cfg.retireFaults)) sched.failNext(me, /^obj\.delete/, steerRng.pick(['failBefore', 'failAfter'] as const));
    if (cfg.deleteOnRetire <= 0 || !steerRng.chance(cfg.deleteOnRetire)) return;
    const ready = items.filter((x) => lastGen.get(x.id) === shard && deletable(x));
    const by = deleter.busy ? null : deleter;
    if (ready.length === 0 || !by) return;
    sched.note(`delete as ${shard} is retired`);
    void deleteVia(by, steerRng.pick(ready), true);
  };

  /**
   * After a delete returned: maintenance (`passAfterDelete`), after the writer that last took the
   * item merged its shard (`mergeBeforePass`; not after a delete as a retirement failed: the merge
   * would be tried again), the item held back until the pass ended (`holdRecreate`) and then
   * created again through that writer.
   */
  const afterDelete = (it: ItemModel, onRetire: boolean) => {
    if (!sched.faultsOn || cfg.passAfterDelete <= 0 || !steerRng.chance(cfg.passAfterDelete)) return;
    const last = lastAppendBy(it);
    const w = liveWriters().find((x) => x.actor === last && !x.closing);
    const hold = steerRng.chance(cfg.holdRecreate);
    if (hold) held.add(it);
    let before: Promise<unknown> = Promise.resolve();
    if (w && !onRetire && steerRng.chance(cfg.mergeBeforePass)) {
      before = mergeOwn(w, 'mergeOwnShard (after a delete)');
    }
    void before
      .catch(() => undefined)
      .then(passSoon)
      .finally(() => {
        if (!held.delete(it) || !sched.faultsOn) return;
        const to = w && !w.closing && !sched.crashed.has(w.actor) ? w : undefined;
        if (to) actions.deliver!.run(to, it);
      });
  };

  const crashAction = (): boolean => {
    const kind = cr.pick(['writer', 'writer', 'writer', 'maintainer', 'reader', 'deleter'] as const);
    // A crashed process's merge or pass never ends: items held for one go free (no redelivery).
    held.clear();
    if (kind === 'maintainer') {
      const m = cr.pick(maints);
      sched.crash(m.actor);
      renew(m);
      m.busy = false;
      return true;
    }
    if (kind === 'reader') {
      const r = cr.pick(readers);
      sched.crash(r.actor);
      renew(r);
      r.busy = 0;
      return true;
    }
    if (kind === 'deleter') {
      sched.crash(deleter.actor);
      for (const d of deliveries) if (d.actor === deleter.actor) settleWith(d)();
      renew(deleter);
      deleter.busy = false;
      return true;
    }
    const live = liveWriters();
    if (live.length === 0) return false;
    const busy = live.filter((w) => sched.pending.some((op) => op.actor === w.actor));
    crashWriter(cr.pick(busy.length > 0 ? busy : live));
    return true;
  };
  /** Writer `w`'s process crashes; a new one takes its place. */
  const crashWriter = (w: WriterActor) => {
    sched.crash(w.actor);
    // Its client saw no answer (as after a timeout): a request may still land.
    for (const d of deliveries) {
      if (d.actor !== w.actor || d.settled) continue;
      leaveInDoubt(d);
      settleWith(d)();
    }
    restart(w);
  };

  const actions: Record<string, { budget: number; run: (to?: WriterActor, only?: ItemModel) => boolean }> = {
    deliver: {
      budget: cfg.deliveries,
      run: (to?: WriterActor, only?: ItemModel) => {
        // A closing writer refuses appends: the queue delivers to the others.
        const live = liveWriters().filter((w) => !w.closing);
        if (live.length === 0) return false;
        let w = to ?? wl.pick(live);
        let it: ItemModel;
        if (only) {
          if (only.inflight > 0) return false;
          it = only;
        } else if (items.length < cfg.items && (items.length === 0 || wl.chance(0.3))) {
          it = newItem(`x${items.length}`);
          items.push(it);
        } else it = hotItem() ?? wl.pick(items);
        // Mostly the next batch of an item with nothing in flight: a copy of a batch in flight
        // (another writer's concurrent duplicate) now and then, so that items move on.
        if (it.inflight > 0 && to === undefined && !wl.chance(0.1)) {
          const free = items.find((x) => x.inflight === 0 && x.deleting === null && !x.broken && !x.terminal && !held.has(x));
          if (!free) return false; // nothing but copies to send now: wait for answers
          it = free;
        }
        if (it.deleting !== null || it.broken || held.has(it)) return false;
        if (to === undefined && cfg.sticky > 0) w = stickyWriter(it, live) ?? w;
        if (it.oldInDoubt !== null) {
          if (it.inflight > 0) return false;
          deliver(w, it, it.chain[it.oldInDoubt]!, 'retry-old');
          return true;
        }
        // An at-least-once queue delivers an old message again: a batch that was acked, or one
        // the client gave up for another attempt (only while nothing of the item is in flight
        // or in doubt: written now it is the item's latest batch, never beside another).
        const old = it.chain.map((_, i) => i).filter((i) => i < it.cur && (it.acked.includes(i) || (it.inflight === 0 && !it.curInDoubt)));
        if (old.length > 0 && wl.chance(0.15)) {
          deliver(w, it, it.chain[wl.pick(old)]!, 'redeliver-old');
          return true;
        }
        const next = work.nextFor(it);
        if (!next) return false;
        deliver(w, it, next.batch, next.fresh ? 'append' : it.inflight > 0 ? 'duplicate' : 'retry');
        return true;
      },
    },
    delete: {
      budget: cfg.deletions,
      run: () => {
        // Only items with nothing in flight or in doubt (a timed-out delivery may land later).
        const ready = items.filter((x) => x.inflight === 0 && !x.curInDoubt && x.oldInDoubt === null && !x.broken && (x.acked.length > 0 || x.deleting !== null));
        const by = deleterFor();
        if (ready.length === 0 || !by) return false;
        const blocked = ready.filter((x) => x.deleting !== null);
        deleteVia(by, dl.pick(blocked.length > 0 ? blocked : ready));
        return true;
      },
    },
    redeliverDelete: {
      budget: cfg.redeliverDeletes ? cfg.deletions : 0,
      run: () => {
        const ready = items.filter((x) => x.oldDeletes.length > 0 && x.deleting === null && x.acked.length > 0);
        return ready.length > 0 && redeliverDelete(dl.pick(ready));
      },
    },
    read: { budget: cfg.reads, run: () => readAction() },
    maintain: { budget: cfg.maintains, run: () => startPass() !== null },
    merge: {
      budget: cfg.merges,
      run: () => {
        const live = liveWriters();
        if (live.length === 0) return false;
        mergeOwn(wl.pick(live), 'mergeOwnShard').catch(() => undefined);
        return true;
      },
    },
    close: {
      budget: cfg.closes,
      run: () => {
        const live = liveWriters();
        if (live.length === 0) return false;
        const w = wl.pick(live);
        if (w.closing) return false;
        w.closing = true;
        const log = w.log;
        const actor = w.actor;
        const p = sched.run(actor, () => log.close());
        track('close', actor, p);
        p.catch(() => undefined).finally(() => {
          if (w.actor === actor) restart(w); // the process ends; a new one takes its place
        });
        return true;
      },
    },
    crash: { budget: cfg.crashes, run: crashAction },
    repair: {
      budget: cfg.repairs,
      run: () => {
        if (repairer.busy) return false;
        // The repair generator repairs a log that has data (one not made yet is refused).
        if (cfg.deliverOnRepair > 0 && history.counts().acked === 0) return false;
        repairer.busy = true;
        const actor = repairer.actor;
        const log = repairer.log;
        const p = sched.run(actor, () => log.repair());
        track('repair', actor, p);
        // The old scope's leases the repair keeps held run out (config.ts `clockAfterRepair`).
        p.then(() => {
          if (cfg.repairLeaseHoldMs === undefined || !sched.faultsOn || !steerRng.chance(cfg.clockAfterRepair)) return;
          time.ms += cfg.repairLeaseHoldMs + 1;
          sched.note(`clock +${cfg.repairLeaseHoldMs + 1} (the old scope's leases held by the repair run out)`);
        }, () => undefined);
        // A process per repair: the next one opens the log again.
        p.catch((e: unknown) => {
          if (!(e instanceof DgclError)) violations.push(`ERROR: repair by ${actor} failed with an untyped error: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
          // Its switch failed: the old scope's leases stay held for the switch hold.
          if (e instanceof SwitchOutcomeUnknownError) switchHeldUntil = time.ms + SWITCH_HOLD_MS;
        }).finally(() => {
          if (repairer.actor === actor) {
            renew(repairer);
            repairer.busy = false;
          }
        });
        return true;
      },
    },
    clock: {
      budget: cfg.clockMoves,
      run: () => {
        const ms = wl.chance(0.5) ? cfg.leaseTtlMs + 1 + wl.int(cfg.leaseTtlMs) : 100 + wl.int(3000);
        time.ms += ms;
        sched.note(`clock +${ms}`);
        return true;
      },
    },
    jump: {
      budget: cfg.jumps,
      run: () => {
        const name = ck.pick([...clocks.keys()]);
        const ms = (ck.chance(0.5) ? 1 : -1) * (ck.chance(0.5) ? cfg.leaseTtlMs + 1 + ck.int(cfg.leaseTtlMs) : 100 + ck.int(3000));
        clockOf(name).jump(ms);
        sched.note(`clock of ${name} ${ms > 0 ? '+' : ''}${ms} (now ${clockOf(name).offsetMs} from true time)`);
        return true;
      },
    },
    pause: {
      budget: cfg.pauses,
      run: () => {
        const actors = [...new Set(sched.eligible().map((op) => op.actor))].filter((a) => a !== 'late');
        if (actors.length === 0) return false;
        sched.pause(wl.pick(actors), wl.between(5, 40));
        return true;
      },
    },
  };

  /** A maintenance pass by an idle maintainer (null: none idle); it settles when the pass ends. */
  function startPass(): Promise<unknown> | null {
    const idle = maints.filter((m) => !m.busy);
    if (idle.length === 0) return null;
    const maint = idle.length === 1 ? idle[0]! : mt.pick(idle);
    const other = maints.find((m) => m.busy);
    if (other && mt.chance(0.5)) {
      time.ms += cfg.leaseTtlMs + 1;
      sched.note(`clock +${cfg.leaseTtlMs + 1} (${other.actor}'s pass paused past its lease)`);
    }
    maint.busy = true;
    const actor = maint.actor;
    const p = sched.run(actor, () => maint.log.maintain());
    track('maintain', actor, p);
    return p
      .catch(() => undefined)
      .finally(() => {
        if (maint.actor === actor) maint.busy = false;
        for (const f of afterPass.splice(0)) f();
      });
  }

  /** Start an action the budgets draw; one that could not run now keeps its budget while something else can run. */
  const startAction = (othersCanRun: boolean): boolean => {
    const kinds = Object.keys(actions).filter((k) => actions[k]!.budget > 0);
    const total = kinds.reduce((s, k) => s + actions[k]!.budget, 0);
    let x = wl.int(total);
    const k = kinds.find((kk) => (x -= actions[kk]!.budget) < 0)!;
    actions[k]!.budget--;
    if (actions[k]!.run()) return true;
    sched.note(`action ${k} could not run now${othersCanRun ? '' : ' (its budget is spent)'}`);
    if (othersCanRun) actions[k]!.budget++;
    return false;
  };
  const budgetLeft = () => Object.values(actions).some((a) => a.budget > 0);

  // ---- the schedule -------------------------------------------------------------------

  let guard = 0;
  for (;;) {
    await sched.drain();
    if (++guard > 20_000) {
      violations.push('LIVENESS: the schedule did not end within 20,000 steps');
      break;
    }
    const el = sched.eligible();
    const canAct = budgetLeft();
    // Only paused actors could run: a new action starts while they stay paused (their window
    // stays open), or, if none can run now, their pauses end (without spending its budget).
    if (el.length === 0 && sched.hasPaused()) {
      if (!(canAct && startAction(true))) sched.unpauseAll();
    } else if (canAct && (el.length === 0 || wl.chance(0.12))) startAction(el.length > 0);
    else if (el.length > 0) await sched.releaseRandom(el);
    else break;
  }

  // ---- quiesce, close some writers, read with nothing running, expire every lease --------
  sched.faultsOn = false;
  sched.unpauseAll();
  const runDry = async (what: string) => {
    for (let n = 0; ; n++) {
      await sched.drain();
      const el = sched.eligible();
      if (el.length === 0 && sched.hasPaused()) {
        sched.unpauseAll();
        continue;
      }
      if (el.length === 0) break;
      if (n > 20_000) {
        violations.push(`LIVENESS: ${what} did not end within 20,000 steps`);
        break;
      }
      await sched.releaseRandom(el);
    }
  };
  await runDry('quiescing');
  // Deletes whose every attempt failed: retry until one returns (faults are off now).
  for (const it of items) {
    for (let n = 0; it.deleting !== null && n < 5; n++) {
      const by = deleterFor() ?? deleter;
      void deleteVia(by, it);
      await runDry('deleting');
    }
    if (it.deleting !== null) violations.push(`LIVENESS: the delete of ${it.id} never returned`);
  }
  for (const w of liveWriters()) {
    if (!w.closing && wl.chance(0.5)) {
      w.closing = true;
      const p = sched.run(w.actor, () => w.log.close());
      track('close', w.actor, p);
      p.catch(() => undefined);
    }
  }
  await runDry('closing');
  if (outstanding > 0) {
    const stuck = deliveries.filter((d) => !d.settled && !sched.crashed.has(d.actor)).length;
    if (stuck > 0) violations.push(`LIVENESS: ${stuck} append(s) of live writers never settled`);
  }
  /** A log no append ever made (none acked, none landed): "no log" is the right answer. */
  const neverMade = (e: unknown) => e instanceof LogNotFoundError && history.counts().acked === 0;
  // Nothing runs, no fault: a read must answer (a live epoch's generations included).
  sched.direct = true;
  await sched.run('quiet', async () => {
    const q = makeLog('q1', 'quiet-r');
    try {
      await q.allStates();
    } catch (e) {
      if (neverMade(e)) return;
      violations.push(`AVAIL: a read with nothing running and no faults failed: ${(e as Error).name}: ${(e as Error).message}`);
    }
  });
  sched.direct = false;
  // Past every lease: a writer's, and the old scope's held by a repair whose switch failed.
  const finalMs = Math.max(cfg.leaseTtlMs, switchHeldUntil - time.ms) + 1 + 2 * time.maxSkewMs;
  time.ms += finalMs;
  sched.note(`clock +${finalMs} (final)`);

  // ---- final maintenance and read, unscheduled --------------------------------------------
  sched.direct = true;
  await sched.run('final', async () => {
    // Every lease ran out and nothing runs: a repair must go through, and everything read after it
    // (maintenance in the new records' scope included) must be what it was.
    if (cfg.repairs > 0) {
      try {
        const r = await makeLog('final-f', 'final-f').repair();
        sched.note(`final repair: ${r.markers} markers, ${r.claims} claims, sealed ${r.sealedEpochs.join(' ') || 'nothing'}`);
      } catch (e) {
        // A log no append made: the repair says so (LOG_NOT_FOUND), as reads do.
        if (!neverMade(e)) violations.push(`FINAL: repair() threw ${(e as Error).name}: ${(e as Error).message}`);
      }
    }
    const fm = makeLog('final-m', 'final-m');
    for (let i = 0; i < 2; i++) {
      try {
        const rep = await fm.maintain();
        sched.note(`final maintain ${i + 1}: merged ${rep.mergedShards.length} shards, ${rep.mergedRows} rows`);
      } catch (e) {
        // A log no append made: maintenance says so too.
        if (!neverMade(e)) violations.push(`FINAL: maintain() #${i + 1} threw ${(e as Error).name}: ${(e as Error).message}`);
      }
    }
    // Counts its ranged reads: after the final maintenance, folds read the rows files.
    let rowsReads = 0;
    const frObjects = new SimObjectStore(inner, sched, written, () => time.ms);
    const getBytes = frObjects.getBytes.bind(frObjects);
    frObjects.getBytes = (key, range) => (rowsReads++, getBytes(key, range));
    const fr = makeLog('final-r', 'final-r', frObjects);
    const id = history.beginRead('final', 'final read (allStates + every trajectory)');
    try {
      const states = await fr.allStates();
      const obs: ItemObservation[] = states.map((s) => ({ itemId: s.itemId, state: s }));
      // The listing (through the projection the final maintenance built) equals the folds.
      const listed = JSON.stringify((await fr.items()).items);
      const folded = JSON.stringify(states.map(summarize));
      if (listed !== folded) violations.push(`FINAL: items() ${listed} differs from the folds' summaries ${folded}`);
      if (states.length > 0 && (await readsOf(fr).projected()) === null) violations.push('FINAL: no projection after the final maintenance');
      // Each item's fold (through the fold projection) equals its state from the scan.
      for (const st of states) {
        const one = await fr.fold(st.itemId);
        if (!isDeepStrictEqual(one, st)) violations.push(`FINAL: fold(${st.itemId}) differs from allStates(): ${inspect(one)} vs ${inspect(st)}`);
      }
      if (states.length > 0 && rowsReads === 0) violations.push('FINAL: no fold read the rows files after the final maintenance');
      for (const x of history.itemIds()) {
        try {
          obs.push(trajectoryObservation(x, await fr.trajectory(x)));
        } catch (e) {
          if (!(e instanceof NotFoundError)) throw e;
          obs.push({ itemId: x, absent: true });
        }
      }
      history.endRead(id, { items: obs, allItems: true });
    } catch (e) {
      history.endRead(id, { error: e });
      if (!neverMade(e)) violations.push(`FINAL: the final read threw ${(e as Error).name}: ${(e as Error).message}`);
    }
  });

  await sched.drain();
  running.delete(violations);
  for (const v of history.check({ claimWindowSlackMs: 2 * time.maxSkewMs })) violations.push(v.message);
  // A read may fail only as UNAVAILABLE (storage faults; "not found" is an observation above):
  // anything else (CORRUPT, INVALID_INPUT, a raw Lance error) is a bug, even if the invariants held.
  for (const r of history.data().reads) {
    if (r.reader !== 'final' && r.error !== null && !r.error.startsWith('UnavailableError:')) violations.push(`READ: ${r.what} by ${r.reader} failed with ${r.error}`);
  }
  const result: ScheduleResult = {
    seed,
    config: cfg,
    violations,
    trace: sched.trace,
    counts: { ...history.counts(), steps: sched.step },
    ms: performance.now() - t0,
  };
  if (!opts.keep) await rm(root, { recursive: true, force: true }).catch(() => undefined);
  else sched.trace.push(`root kept at ${root}`);
  return result;
}
