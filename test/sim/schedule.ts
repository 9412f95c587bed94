/**
 * One seeded schedule: 2-4 writers (own LanceCheckpointLog and owner each, 2 slots between
 * them), one or two maintainers and two readers on one local root, real Lance, wrapped stores, a
 * simulated clock. The seed picks the configuration, the workload and, through the scheduler,
 * the interleaving and the faults. Then: quiesce, close some writers, let every lease expire,
 * maintain twice, read everything with a fresh log object, and check I1-I5 on every read.
 *
 * Workload rules (so that I5 holds for a correct log):
 *  - at any moment the deliveries of one item in flight are copies of its current batch (a
 *    concurrent duplicate delivery to another writer is fine: identical batches), plus copies
 *    of its already-acked batches (old redeliveries);
 *  - its next batch is created only when none of its deliveries is in flight (acked, failed,
 *    or its writer crashed); a failed current batch is retried (same batch, any writer) or
 *    abandoned for a different one (next attempt), unless a delivery of it timed out (it may
 *    still land): then it is only retried.
 *  - deletions (in a share of the seeds, from a stream of their own so that other seeds run
 *    exactly as before): an item is deleted only when none of its deliveries is in flight or in
 *    doubt; a failed delete blocks the item until a retry returns (done unscheduled at the end if
 *    needed); then the item starts over (created again, its old batches never redelivered).
 *    Every other delete (by seed and delete number, no random draw: even seeds begin guarded)
 *    passes the highest seq acked in the item's current incarnation as `throughSeq`, every
 *    attempt the same seq (a retry must answer "already deleted"); a CONFLICT (events it never
 *    saw acked, e.g. an append that failed after its commit) makes the next attempt read the
 *    item first and delete through its last seq.
 *
 * Faults (scheduler.ts): failures before and after landing, timeouts that land later or never,
 * and in half the seeds SDK resends (a write the real store lets its SDK resend answered by a
 * second copy while the first lands later).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { existsSync } from 'node:fs';
import { inspect, isDeepStrictEqual } from 'node:util';
import { parseBatch } from '../../lib/batch.ts';
import { NotFoundError } from '../../lib/errors.ts';
import { summarize } from '../../lib/fold.ts';
import { MAX_LATEST_EVENTS } from '../../lib/log/item-reads.ts';
import { incarnate } from '../../lib/log/sequence.ts';
import { LanceCheckpointLog } from '../../lib/log/log.ts';
import { LocalObjectStore } from '../../lib/storage/local.ts';
import type { ObjectStore } from '../../lib/storage/objects.ts';
import { lanceStorageOptions, logLocation, logUri, parseRoot } from '../../lib/storage/location.ts';
import { History, trajectoryObservation, type ItemObservation } from '../support/invariants.ts';
import { SimClock } from './clock.ts';
import { installLancePatches, installRandomPatch, simTableWrapper } from './lance.ts';
import { MemLeaseStore, SimLeaseStore } from './leases.ts';
import { SimObjectStore } from './objects.ts';
import { MemCoordRecords, SimTableLeaseStore } from './coord.ts';
import { Rng } from './prng.ts';
import { REGRESSION_SEEDS } from './regressions.ts';
import { Scheduler } from './scheduler.ts';

export interface SimConfig {
  writers: number;
  slots: number;
  leaseTtlMs: number;
  mergeEveryCommits: number;
  /** Small ones rotate generations by size too (a commit of 10 small rows is ~7 KB). */
  mergeEveryBytes: number;
  cachedItems: number;
  maxBatchesPerCommit: number;
  claimRetentionMs: number;
  faultRate: number;
  priorityBias: number;
  deliveries: number;
  reads: number;
  items: number;
  /** Set in seeds with deletions (drawn apart from the rest, see runSchedule). */
  deletions?: number;
  deletionRetentionMs?: number;
  /** Set in seeds whose markers and claims live in the simulated lease table (see runSchedule). */
  coord?: 'table';
}

export interface ScheduleResult {
  seed: number;
  config: SimConfig;
  violations: string[];
  trace: string[];
  counts: ReturnType<History['counts']> & { steps: number };
  ms: number;
}

function pickConfig(rng: Rng): SimConfig {
  return {
    writers: rng.between(2, 4),
    slots: 2,
    leaseTtlMs: 10_000,
    mergeEveryCommits: rng.between(2, 3),
    cachedItems: rng.pick([1, 2, 100]),
    maxBatchesPerCommit: rng.pick([1, 512]),
    claimRetentionMs: rng.pick([20_000, 3_600_000]),
    faultRate: rng.pick([0, 0.02, 0.05, 0.1]),
    priorityBias: rng.pick([0, 0.5, 0.9]),
    deliveries: rng.between(10, 25),
    reads: rng.between(6, 14),
    mergeEveryBytes: rng.pick([2 ** 30, 8_000, 20_000]),
    items: rng.between(2, 5),
  };
}

interface WriterActor {
  name: string;
  inc: number;
  actor: string;
  log: LanceCheckpointLog;
  closing: boolean;
}

interface ItemModel {
  id: string;
  chain: Array<Record<string, unknown>>;
  cur: number;
  curAcked: boolean;
  /** A delivery of the current batch timed out: it may still land, so only retry it. */
  curInDoubt: boolean;
  acked: number[];
  inflight: number;
  step: number;
  attempt: number;
  terminal: boolean;
  /** The seq the current incarnation's creation follows (0 until the item is deleted). */
  base: number;
  /** History id of a delete that has not returned yet: no delivery until it does. */
  deleting: number | null;
  /** Highest seq acked in the current incarnation (what a guarded delete passes). */
  seen: number;
  /** A guarded attempt of the current delete met CONFLICT: read the item before the next. */
  reread: boolean;
}

interface Delivery {
  item: ItemModel;
  actor: string;
  settled: boolean;
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

export async function runSchedule(seed: number, opts: { keep?: boolean } = {}): Promise<ScheduleResult> {
  installLancePatches();
  installRandomPatch();
  installUnhandled();
  const t0 = performance.now();
  const rng = new Rng(seed);
  const cfg = pickConfig(rng);
  // Half the seeds (never a regression seed) get SDK resends: a write answered by a second copy
  // while the first lands later. From their own stream: the other seeds replay as before.
  const rs = new Rng(seed + 0x7273);
  const resends = !REGRESSION_SEEDS.some((r) => r.seed === seed) && rs.chance(0.5) ? { rng: rs, probability: rs.pick([0.05, 0.2]) } : undefined;
  const sched = new Scheduler(rng.fork(), { faultRate: cfg.faultRate, priorityBias: cfg.priorityBias, resends });
  const wl = rng.fork(); // workload choices, apart from the scheduler's
  // Deletions draw from their own stream, and only some seeds (never a regression seed) get
  // them, so every other seed runs exactly the schedule it ran before deletions existed.
  const dl = rng.fork();
  const deletions = !REGRESSION_SEEDS.some((r) => r.seed === seed) && dl.chance(0.4) ? dl.between(1, 3) : 0;
  // Retention 0: maintenance purges while writers, readers and faults run.
  const deletionRetentionMs = deletions > 0 ? dl.pick([0, 3_600_000]) : 3_600_000;
  // Half the seeds keep item markers and claims in the (simulated) lease table, as logs on S3
  // with DynamoDB leases do; the rest as objects. Drawn apart from every other stream, and never
  // for a regression seed, so those replay the schedules they were found with.
  const coordInTable = !REGRESSION_SEEDS.some((r) => r.seed === seed) && new Rng(seed + 0x5eed).chance(0.5);
  // Half the seeds (never a regression seed) run a second maintainer: when one's pass runs and
  // the other starts, half the time the clock first jumps past the lease, so the new pass takes
  // it over and the paused one must stop (shards.md, "Maintenance"). Its choices draw from their
  // own stream: every other seed runs the schedule it ran before.
  const mt = new Rng(seed + 0x6d61);
  const twoMaintainers = !REGRESSION_SEEDS.some((r) => r.seed === seed) && mt.chance(0.5);
  const clock = new SimClock();
  clock.sched = sched;
  const root = await mkdtemp(path.join(tmpBase(), 'dgcl-sim-'));
  const loc = parseRoot(root);
  const uri = logUri(loc, 'p', 'e');
  const logLoc = logLocation(loc, 'p', 'e');
  if (logLoc.kind !== 'file') throw new Error('the simulation needs a local root');
  const inner = new LocalObjectStore(logLoc.dir);
  const written = new Map<string, number>();
  const leases = new MemLeaseStore(() => clock.nowMs());
  const coordRecords = new MemCoordRecords(() => clock.nowMs());
  const storageOptions = lanceStorageOptions(loc, {});
  const makeLog = (owner: string, objects: ObjectStore = new SimObjectStore(inner, sched, written, () => clock.nowMs())) =>
    new LanceCheckpointLog({
      pipeline: 'p',
      experiment: 'e',
      uri,
      objects,
      storageOptions,
      leases: coordInTable ? new SimTableLeaseStore(leases, sched, coordRecords) : new SimLeaseStore(leases, sched),
      owner,
      clock,
      slots: cfg.slots,
      leaseTtlMs: cfg.leaseTtlMs,
      mergeEveryCommits: cfg.mergeEveryCommits,
      mergeEveryBytes: cfg.mergeEveryBytes,
      // Off: its timer runs on real time, which the schedule does not control. What it runs is
      // mergeOwnShard, which the schedule calls.
      mergeIdleMs: 0,
      maxBatchesPerCommit: cfg.maxBatchesPerCommit,
      cachedItems: cfg.cachedItems,
      versionRetentionMs: 3_600_000,
      claimRetentionMs: cfg.claimRetentionMs,
      deletionRetentionMs,
      wrapTable: simTableWrapper(sched),
      // An fsync is a scheduling point that can fail (before or after it ran).
      wrapSync: (name, run) => sched.op({ kind: 'fs.sync', target: name, mutating: false, faultable: true, run, error: (m) => new Error(m) }),
    });

  const history = new History({ nowMs: () => clock.nowMs(), claimRetentionMs: cfg.claimRetentionMs });
  const violations: string[] = [];
  running.add(violations);
  const writers: WriterActor[] = [];
  for (let i = 1; i <= cfg.writers; i++) writers.push({ name: `w${i}`, inc: 1, actor: `w${i}.1`, log: makeLog(`w${i}.1`), closing: false });
  const readers = [1, 2].map((i) => ({ actor: `r${i}`, log: makeLog(`r${i}`), busy: 0 }));
  let itemReads = 0;
  let listReads = 0;
  let pointReads = 0;
  const maints = (twoMaintainers ? ['m', 'm2'] : ['m']).map((actor) => ({ actor, log: makeLog(actor), busy: false }));
  const items: ItemModel[] = [];
  const deliveries: Delivery[] = [];
  const blobEvents: string[] = [];
  let outstanding = 0;

  const restart = (w: WriterActor) => {
    w.inc++;
    w.actor = `${w.name}.${w.inc}`;
    w.log = makeLog(w.actor);
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

  // ---- the workload -------------------------------------------------------------------

  const newBatch = (it: ItemModel): Record<string, unknown> => {
    const base = { itemId: it.id, runId: 'r', ...(it.attempt > 1 ? { attempt: it.attempt } : {}) };
    // Until a creation is acked, a new batch creates the item (a failed creation may be
    // abandoned for another attempt; if the failed one landed, the new one is rejected).
    if (it.acked.length === 0) return { ...base, create: {}, step: { name: 's0', index: 0 }, set: { prompt: `p-${it.id}` } };
    if (it.step >= 3 && wl.chance(0.2)) return { ...base, terminal: 'completed' };
    const set: Record<string, unknown> = { [`f${it.step}`]: `v${it.step}.${it.attempt}` };
    if (wl.chance(0.3)) set.img = Uint8Array.from({ length: 8 + wl.int(24) }, () => wl.int(256));
    const b: Record<string, unknown> = { ...base, step: { name: `s${it.step}`, index: it.step }, set };
    if (wl.chance(0.2)) b.append = { log: [`l${it.step}`] };
    return b;
  };

  /** The batch to deliver for `it` now, or null if none may be sent. */
  const nextFor = (it: ItemModel): { batch: Record<string, unknown>; fresh: boolean } | null => {
    if (it.deleting !== null) return null;
    if (it.inflight > 0) return it.cur >= 0 ? { batch: it.chain[it.cur]!, fresh: false } : null;
    if (it.cur >= 0 && !it.curAcked && (it.curInDoubt || wl.chance(0.6))) return { batch: it.chain[it.cur]!, fresh: false }; // retry
    if (it.terminal) return null;
    if (it.cur >= 0) {
      if (it.curAcked) {
        it.step++;
        it.attempt = 1;
      } else {
        it.attempt++; // abandon the failed batch for a different one
      }
    }
    const b = newBatch(it);
    it.chain.push(b);
    it.cur = it.chain.length - 1;
    it.curAcked = false;
    it.curInDoubt = false;
    const prepared = incarnate(parseBatch(b), it.base);
    for (const e of prepared.events) if (e.value?.kind === 'blob') blobEvents.push(e.eventId);
    return { batch: b, fresh: true };
  };

  const deliver = (w: WriterActor, it: ItemModel, batch: Record<string, unknown>, label: string) => {
    const idx = it.chain.indexOf(batch);
    const d: Delivery = { item: it, actor: w.actor, settled: false };
    deliveries.push(d);
    it.inflight++;
    const rec = history.beginAppend(w.actor, [batch]);
    const log = w.log;
    const incarnation = it.base;
    const p = sched.run(w.actor, () => log.append([batch]));
    track(`${label} ${it.id}#${idx}`, w.actor, p);
    p.then(
      (acks) => {
        history.endAppend(rec, { acks });
        if (!d.settled && idx === it.cur) it.curAcked = true;
        if (!it.acked.includes(idx)) it.acked.push(idx);
        if (batch.terminal !== undefined) it.terminal = true;
        if (it.base === incarnation) for (const a of acks) it.seen = Math.max(it.seen, a.lastSeq);
      },
      (e: unknown) => {
        history.endAppend(rec, { error: e });
        // A timed-out request may land later (a client cannot know): a careful client retries
        // the same batch instead of sending a different one for the same step.
        if (idx === it.cur && /timed out/.test(String((e as Error)?.message))) it.curInDoubt = true;
      },
    ).finally(() => {
      if (!d.settled) {
        d.settled = true;
        it.inflight--;
      }
    });
  };

  const liveWriters = () => writers.filter((w) => !sched.crashed.has(w.actor));

  /**
   * One attempt of the item's delete through writer `w`; the item starts over once one returns.
   * An attempt counts as in flight like a delivery (nothing else of the item meanwhile; a crash
   * of its writer settles it).
   */
  const deleteVia = (w: WriterActor, it: ItemModel) => {
    it.deleting ??= history.beginDelete(it.id);
    const rec = it.deleting;
    const d: Delivery = { item: it, actor: w.actor, settled: false };
    deliveries.push(d);
    it.inflight++;
    const log = w.log;
    const guarded = (seed + rec) % 2 === 0;
    const p = sched.run(w.actor, async () => {
      if (!guarded) return log.deleteItem(it.id);
      if (it.reread || it.seen === 0) {
        // A careful client after a CONFLICT: read the item, then delete what it now saw (and
        // keep that seq for later attempts: this one may delete and lose its answer).
        const s = await log.fold(it.id);
        it.seen = s.lastSeq;
        it.reread = false;
      }
      return log.deleteItem(it.id, { throughSeq: it.seen });
    });
    track(`${guarded ? 'guarded delete' : 'delete'} ${it.id}`, w.actor, p);
    return p
      .then(
        (r) => {
          if (it.deleting !== rec) return;
          history.endDelete(rec, r.throughSeq);
          Object.assign(it, { chain: [], cur: -1, curAcked: false, curInDoubt: false, acked: [], step: 0, attempt: 1, terminal: false, base: r.throughSeq, deleting: null, seen: 0, reread: false });
        },
        (e: unknown) => {
          // still `deleting`: a later attempt retries
          const code = (e as { code?: string } | null)?.code;
          if (it.deleting === rec && code === 'CONFLICT') it.reread = true;
          // The seq came from an ack or a read of the item: never one it did not have (I4).
          if (guarded && code === 'INVALID_INPUT') violations.push(`guarded delete of ${it.id} through seq ${it.seen} refused: ${(e as Error).message}`);
        },
      )
      .finally(() => {
        if (!d.settled) {
          d.settled = true;
          it.inflight--;
        }
      });
  };

  const actions: Record<string, { budget: number; run: () => boolean }> = {
    deliver: {
      budget: cfg.deliveries,
      run: () => {
        const w = wl.pick(liveWriters());
        let it: ItemModel;
        if (items.length < cfg.items && (items.length === 0 || wl.chance(0.3))) {
          it = { id: `x${items.length}`, chain: [], cur: -1, curAcked: false, curInDoubt: false, acked: [], inflight: 0, step: 0, attempt: 1, terminal: false, base: 0, deleting: null, seen: 0, reread: false };
          items.push(it);
        } else it = wl.pick(items);
        if (it.deleting !== null) return false;
        if (it.acked.length > 0 && wl.chance(0.15)) {
          deliver(w, it, it.chain[wl.pick(it.acked)]!, 'redeliver-old');
          return true;
        }
        const next = nextFor(it);
        if (!next) return false;
        deliver(w, it, next.batch, next.fresh ? 'append' : it.inflight > 0 ? 'duplicate' : 'retry');
        return true;
      },
    },
    delete: {
      budget: deletions,
      run: () => {
        // Only items with nothing in flight or in doubt (a timed-out delivery may land later).
        const ready = items.filter((x) => x.inflight === 0 && !x.curInDoubt && (x.acked.length > 0 || x.deleting !== null));
        if (ready.length === 0 || liveWriters().length === 0) return false;
        const blocked = ready.filter((x) => x.deleting !== null);
        deleteVia(dl.pick(liveWriters()), dl.pick(blocked.length > 0 ? blocked : ready));
        return true;
      },
    },
    read: {
      budget: cfg.reads,
      run: () => {
        const r = wl.pick(readers);
        if (items.length === 0 || r.busy >= 2) return false;
        const kind = wl.pick(['fold', 'fold', 'trajectory', 'trajectory', 'all', 'blob'] as const);
        const x = wl.pick(items).id;
        // Item reads through the item API too (fields, latest events: they decide "not found"
        // inside the read), chosen by the read's number so the schedule's random stream is kept.
        // Whole-log reads alternate between folds (allStates) and the listing (items(), through
        // the projection once maintenance built one), by the read's number too.
        const variant =
          kind === 'trajectory' ? (['trajectory', 'latest', 'fields'] as const)[itemReads++ % 3]! : kind === 'all' ? (['items', 'all', 'items'] as const)[listReads++ % 3]! : kind;
        const what = variant === 'all' ? 'allStates' : variant === 'items' ? 'items()' : kind === 'blob' ? 'loadBlob' : `${variant} ${x}`;
        if (kind === 'blob' && blobEvents.length === 0) return false;
        const blobId = kind === 'blob' ? wl.pick(blobEvents) : '';
        // Every other point read goes through a live writer's log too (a writer reads its own
        // generations from what it keeps of its commits): the one that last took a delivery of
        // the item, else one picked by the read's number. It starts once the reader's read of the
        // same item ended, so that a writer's read showing less than a read that ended before it
        // (I3: its commit landed, visible to the reader, and not yet kept) can be caught.
        const writersNow = kind === 'fold' || kind === 'trajectory' ? liveWriters().filter((w) => !w.closing) : [];
        const lastBy = [...deliveries].reverse().find((d) => d.item.id === x)?.actor;
        const via = writersNow.length > 0 && pointReads++ % 2 === 1 ? (writersNow.find((w) => w.actor === lastBy) ?? writersNow[pointReads % writersNow.length]!) : null;
        const readVia = (reader: { actor: string; log: LanceCheckpointLog }): Promise<unknown> => {
          const id = history.beginRead(reader.actor, kind === 'blob' ? `loadBlob ${blobId.slice(0, 8)}` : what);
          const p = sched.run(reader.actor, async () => {
            try {
              const log = reader.log;
              if (kind === 'fold') return { items: [{ itemId: x, state: await log.fold(x) }] };
              if (variant === 'trajectory') return { items: [trajectoryObservation(x, await log.trajectory(x))] };
              // More than any simulated item holds: the whole trajectory.
              if (variant === 'latest') return { items: [trajectoryObservation(x, await log.latestEvents(x, { limit: MAX_LATEST_EVENTS }))] };
              // Only its existence is checked (an acked item must not read as missing).
              if (variant === 'fields') return (await log.fields(x, { names: [] })).itemId === x ? { items: [] } : { items: [{ itemId: x, absent: true }] };
              if (variant === 'all') return { items: (await log.allStates()).map((s) => ({ itemId: s.itemId, state: s })), allItems: true };
              if (variant === 'items') return { items: (await log.items()).items.map((s) => ({ itemId: s.itemId, listedSeq: s.lastSeq })), allItems: true };
              return { blobs: [{ eventId: blobId, bytes: await log.loadBlob(blobId) }] };
            } catch (e) {
              if (!(e instanceof NotFoundError)) throw e;
              if (kind === 'blob') return { blobs: [{ eventId: blobId, bytes: null }] };
              return { items: [{ itemId: x, absent: true }] };
            }
          });
          track(what, reader.actor, p);
          return p.then(
            (res) => history.endRead(id, res),
            (e: unknown) => history.endRead(id, { error: e }),
          );
        };
        r.busy++;
        // A read on a writer that crashes never ends: it does not hold the reader's place.
        const first = readVia(r).finally(() => r.busy--);
        // Unless the writer is closing by then (its reads are refused) or crashed. Its read is
        // an actor of its own (the process's reading side): a pause of the writer's commits (at
        // its epoch check, say) does not hold the read, as in a real process.
        if (via) void first.then(() => (via.closing || sched.crashed.has(via.actor) ? undefined : readVia({ actor: `${via.actor}:read`, log: via.log })));
        return true;
      },
    },
    maintain: {
      budget: wl.between(0, 3),
      run: () => {
        const idle = maints.filter((m) => !m.busy);
        if (idle.length === 0) return false;
        const maint = idle.length === 1 ? idle[0]! : mt.pick(idle);
        const other = maints.find((m) => m.busy);
        if (other && mt.chance(0.5)) {
          clock.advance(cfg.leaseTtlMs + 1);
          sched.note(`clock +${cfg.leaseTtlMs + 1} (${other.actor}'s pass paused past its lease)`);
        }
        maint.busy = true;
        const p = sched.run(maint.actor, () => maint.log.maintain());
        track('maintain', maint.actor, p);
        p.catch(() => undefined).finally(() => (maint.busy = false));
        return true;
      },
    },
    merge: {
      budget: wl.between(0, 3),
      run: () => {
        const w = wl.pick(liveWriters());
        const log = w.log;
        const p = sched.run(w.actor, () => log.mergeOwnShard());
        track('mergeOwnShard', w.actor, p);
        p.catch(() => undefined);
        return true;
      },
    },
    close: {
      budget: wl.between(0, 2),
      run: () => {
        const w = wl.pick(liveWriters());
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
    crash: {
      budget: wl.chance(0.4) ? 1 : 0,
      run: () => {
        const busy = liveWriters().filter((w) => sched.pending.some((op) => op.actor === w.actor));
        const w = wl.pick(busy.length > 0 ? busy : liveWriters());
        sched.crash(w.actor);
        for (const d of deliveries) {
          if (d.actor === w.actor && !d.settled) {
            d.settled = true;
            d.item.inflight--;
          }
        }
        restart(w);
        return true;
      },
    },
    clock: {
      budget: wl.between(0, 4),
      run: () => {
        const ms = wl.chance(0.5) ? cfg.leaseTtlMs + 1 + wl.int(cfg.leaseTtlMs) : 100 + wl.int(3000);
        clock.advance(ms);
        sched.note(`clock +${ms}`);
        return true;
      },
    },
    pause: {
      budget: wl.between(0, 4),
      run: () => {
        const actors = [...new Set(sched.eligible().map((op) => op.actor))].filter((a) => a !== 'late');
        if (actors.length === 0) return false;
        sched.pause(wl.pick(actors), wl.between(5, 40));
        return true;
      },
    },
  };

  const startAction = () => {
    const kinds = Object.keys(actions).filter((k) => actions[k]!.budget > 0);
    const total = kinds.reduce((s, k) => s + actions[k]!.budget, 0);
    let x = wl.int(total);
    const k = kinds.find((kk) => (x -= actions[kk]!.budget) < 0)!;
    actions[k]!.budget--;
    actions[k]!.run();
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
    if (canAct && (el.length === 0 || wl.chance(0.12))) startAction();
    else if (el.length > 0) await sched.releaseRandom(el);
    else if (sched.hasPaused()) sched.unpauseAll();
    else break;
  }

  // ---- quiesce, close some writers, expire every lease ----------------------------------
  sched.faultsOn = false;
  sched.unpauseAll();
  const runDry = async (what: string) => {
    for (let n = 0; ; n++) {
      await sched.drain();
      const el = sched.eligible();
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
      const w = liveWriters().find((x) => !x.closing);
      if (!w) break;
      void deleteVia(w, it);
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
  clock.advance(cfg.leaseTtlMs + 1);
  sched.note(`clock +${cfg.leaseTtlMs + 1} (final)`);

  // ---- final maintenance and read, unscheduled --------------------------------------------
  sched.direct = true;
  await sched.run('final', async () => {
    const fm = makeLog('final-m');
    for (let i = 0; i < 2; i++) {
      try {
        const rep = await fm.maintain();
        sched.note(`final maintain ${i + 1}: merged ${rep.mergedShards.length} shards, ${rep.mergedRows} rows`);
      } catch (e) {
        violations.push(`FINAL: maintain() #${i + 1} threw ${(e as Error).name}: ${(e as Error).message}`);
      }
    }
    // Counts its ranged reads: after the final maintenance, folds read the rows files.
    let rowsReads = 0;
    const frObjects = new SimObjectStore(inner, sched, written, () => clock.nowMs());
    const getBytes = frObjects.getBytes.bind(frObjects);
    frObjects.getBytes = (key, range) => (rowsReads++, getBytes(key, range));
    const fr = makeLog('final-r', frObjects);
    const id = history.beginRead('final', 'final read (allStates + every trajectory)');
    try {
      const states = await fr.allStates();
      const obs: ItemObservation[] = states.map((s) => ({ itemId: s.itemId, state: s }));
      // The listing (through the projection the final maintenance built) equals the folds.
      const listed = JSON.stringify((await fr.items()).items);
      const folded = JSON.stringify(states.map(summarize));
      if (listed !== folded) violations.push(`FINAL: items() ${listed} differs from the folds' summaries ${folded}`);
      if (states.length > 0 && (await fr.projected()) === null) violations.push('FINAL: no projection after the final maintenance');
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
      violations.push(`FINAL: the final read threw ${(e as Error).name}: ${(e as Error).message}`);
    }
  });

  await sched.drain();
  running.delete(violations);
  for (const v of history.check()) violations.push(v.message);
  // A read may fail only as UNAVAILABLE (storage faults; "not found" is an observation above):
  // anything else (CORRUPT, INVALID_INPUT, a raw Lance error) is a bug, even if the invariants held.
  for (const r of history.data().reads) {
    if (r.reader !== 'final' && r.error !== null && !r.error.startsWith('UnavailableError:')) violations.push(`READ: ${r.what} by ${r.reader} failed with ${r.error}`);
  }
  const result: ScheduleResult = {
    seed,
    config: { ...cfg, ...(deletions > 0 ? { deletions, deletionRetentionMs } : {}), ...(coordInTable ? { coord: 'table' as const } : {}), ...(twoMaintainers ? { maintainers: 2 } : {}), ...(resends ? { resends: resends.probability } : {}) },
    violations,
    trace: sched.trace,
    counts: { ...history.counts(), steps: sched.step },
    ms: performance.now() - t0,
  };
  if (!opts.keep) await rm(root, { recursive: true, force: true }).catch(() => undefined);
  else sched.trace.push(`root kept at ${root}`);
  return result;
}
