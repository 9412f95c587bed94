/**
 * Tools to force one interleaving of writers, maintainers and readers on a local root, with
 * real Lance and real stores: gates (a promise opened by the test), an ObjectStore and a
 * LeaseStore that call a tap before/after each request (to pause there, or to fail before it
 * or after it landed), a Lance table wrapper, and checks of what a fresh reader observes.
 * No sleeps: every pause is a promise some other step resolves.
 */
import { promises as fs, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, expect } from 'vitest';
import { ManualClock, type Clock } from '../../lib/clock.ts';
import { DEFAULTS } from '../../lib/index.ts';
import { LocalLeaseStore } from '../../lib/lease/local.ts';
import type { Lease, LeaseStore } from '../../lib/lease/types.ts';
import { META_DIR } from '../../lib/log/layout.ts';
import { LanceCheckpointLog, type LanceLogOptions } from '../../lib/log/log.ts';
import type { MergeHooks } from '../../lib/log/maintain/merge.ts';
import type { Table, TableWrapper } from '../../lib/log/tables.ts';
import type { WriterHooks } from '../../lib/log/write/writer.ts';
import { LocalObjectStore } from '../../lib/storage/local.ts';
import { logUri, parseRoot } from '../../lib/storage/location.ts';
import type { ByteRange, ObjectStore, PutOptions } from '../../lib/storage/objects.ts';
import type { Ack, ItemState } from '../../lib/types.ts';

export const PIPELINE = 'p';
export const EXPERIMENT = 'e';

/** A promise the test resolves by hand. */
export class Gate<T = void> {
  readonly promise: Promise<T>;
  resolve!: (v: T) => void;
  reject!: (e: unknown) => void;
  private done = false;
  constructor() {
    this.promise = new Promise<T>((res, rej) => {
      this.resolve = (v) => {
        this.done = true;
        res(v);
      };
      this.reject = (e) => {
        this.done = true;
        rej(e);
      };
    });
    this.promise.catch(() => undefined);
  }
  get settled(): boolean {
    return this.done;
  }
}

/** A paused step: `reached` resolves when the code arrives there, `release()` lets it go on. */
/** Pauses not yet released: raceFixture's afterEach releases them before it closes the logs. */
const heldPauses = new Set<Pause>();

export class Pause {
  readonly reached = new Gate();
  private readonly go = new Gate();
  constructor() {
    heldPauses.add(this);
  }
  /** Called by the paused code. */
  async hit(): Promise<void> {
    this.reached.resolve();
    await this.go.promise;
  }
  release(): void {
    heldPauses.delete(this);
    this.go.resolve();
  }
}

/**
 * Whether `waiting` (started while `pause` holds what it should wait for) resolves only once the
 * pause is released. The release comes from a timer, after `waiting` had every chance to resolve
 * without it: a wait that is missing resolves in the same turns, and says false.
 */
export function resolvesAfterRelease(waiting: Promise<unknown>, pause: Pause): Promise<boolean> {
  let released = false;
  const saw = waiting.then(() => released);
  setTimeout(() => {
    released = true;
    pause.release();
  }, 50);
  return saw;
}

export function tempRoot(): string {
  return mkdtempSync(path.join(tmpdir(), 'dgcl-race-'));
}

/** The lease store every process of a test shares; time only moves when the test says so. */
export function sharedLeases(root: string, clock: Clock): LocalLeaseStore {
  return new LocalLeaseStore({ dir: path.join(root, '.dgcl', 'leases'), clock });
}

/** A settled promise's outcome, to assert on without try/catch around awaits. */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };
export function settle<T>(p: Promise<T>): Promise<Outcome<T>> {
  return p.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

// ---- object store tap --------------------------------------------------------------------

export type ObjectOp = 'put' | 'putIfAbsent' | 'get' | 'list' | 'delete' | 'deletePrefix' | 'deleteOlderThan' | 'deleteKey';

export interface ObjectTap {
  /** Before the request is sent; throw to fail it (nothing happens), await to pause it. */
  before?(op: ObjectOp, key: string): void | Promise<void>;
  /** After it landed; throw to lose the answer, await to pause before the caller sees it. */
  after?(op: ObjectOp, key: string, result: unknown): void | Promise<void>;
}

/**
 * A local ObjectStore whose requests go through a tap. `deletePrefix` deletes key by key in
 * key order, as S3 batch deletes do, calling the tap (`deleteKey`) before each key.
 */
export class TapObjectStore implements ObjectStore {
  readonly baseUri: string;
  tap: ObjectTap = {};
  constructor(readonly inner: LocalObjectStore) {
    this.baseUri = inner.baseUri;
  }
  private async run<T>(op: ObjectOp, key: string, fn: () => Promise<T>): Promise<T> {
    await this.tap.before?.(op, key);
    const r = await fn();
    await this.tap.after?.(op, key, r);
    return r;
  }
  putIfAbsent(key: string, body: string | Uint8Array, o?: PutOptions) {
    return this.run('putIfAbsent', key, () => this.inner.putIfAbsent(key, body, o));
  }
  put(key: string, body: string) {
    return this.run('put', key, () => this.inner.put(key, body));
  }
  get(key: string) {
    return this.run('get', key, () => this.inner.get(key));
  }
  getBytes(key: string, range: ByteRange) {
    return this.run('get', key, () => this.inner.getBytes(key, range));
  }
  list(prefix: string) {
    return this.run('list', prefix, () => this.inner.list(prefix));
  }
  delete(key: string) {
    return this.run('delete', key, () => this.inner.delete(key));
  }
  deleteOlderThan(prefix: string, cutoffMs: number) {
    return this.run('deleteOlderThan', prefix, () => this.inner.deleteOlderThan(prefix, cutoffMs));
  }
  deletePrefix(prefix: string) {
    return this.run('deletePrefix', prefix, async () => {
      const keys = (await listFiles(path.join(this.inner.dir, ...prefix.split('/')))).map((k) => `${prefix}/${k}`).sort();
      for (const k of keys) {
        await this.tap.before?.('deleteKey', k);
        await fs.rm(path.join(this.inner.dir, ...k.split('/')), { force: true });
      }
      await this.inner.deletePrefix(prefix); // the emptied folders
      return keys.length;
    });
  }
}

async function listFiles(dir: string, rel = ''): Promise<string[]> {
  let ents;
  try {
    ents = await fs.readdir(path.join(dir, rel), { withFileTypes: true });
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const e of ents) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await listFiles(dir, r)));
    else out.push(r);
  }
  return out;
}

// ---- lease store tap ---------------------------------------------------------------------

export type LeaseOp = 'acquire' | 'renew' | 'release' | 'read' | 'assertCurrent' | 'raiseEpoch';
export interface LeaseTap {
  before?(op: LeaseOp, key: string): void | Promise<void>;
  after?(op: LeaseOp, key: string, result: unknown): void | Promise<void>;
  /** Called with the error a request failed with (e.g. LeaseHeldError of an acquire). */
  failed?(op: LeaseOp, key: string, error: unknown): void;
}

/** A LeaseStore whose requests go through a tap (the store itself is shared and real). */
export class TapLeaseStore implements LeaseStore {
  tap: LeaseTap = {};
  constructor(readonly inner: LeaseStore) {}
  private async run<T>(op: LeaseOp, key: string, fn: () => Promise<T>): Promise<T> {
    await this.tap.before?.(op, key);
    let r: T;
    try {
      r = await fn();
    } catch (e) {
      this.tap.failed?.(op, key, e);
      throw e;
    }
    await this.tap.after?.(op, key, r);
    return r;
  }
  acquire(key: string, owner: string, ttlMs: number) {
    return this.run('acquire', key, () => this.inner.acquire(key, owner, ttlMs));
  }
  renew(lease: Lease, ttlMs: number) {
    return this.run('renew', lease.key, () => this.inner.renew(lease, ttlMs));
  }
  release(lease: Lease) {
    return this.run('release', lease.key, () => this.inner.release(lease));
  }
  read(key: string) {
    return this.run('read', key, () => this.inner.read(key));
  }
  assertCurrent(lease: Lease) {
    return this.run('assertCurrent', lease.key, () => this.inner.assertCurrent(lease));
  }
  raiseEpoch(key: string, epoch: number) {
    return this.run('raiseEpoch', key, () => this.inner.raiseEpoch(key, epoch));
  }
  close() {
    return Promise.resolve(); // the shared store is closed by the test
  }
}

// ---- Lance table tap ---------------------------------------------------------------------

export interface TableTap {
  /** Wraps `table.add` of generation/base `name`: call `run()` to do the real commit (of `data`). */
  add?(name: string, run: () => Promise<unknown>, data: unknown): Promise<unknown>;
  /** Before a query's or an offset take's `toArrow` on `name` (reads); throw to fail the read. */
  beforeRead?(name: string): void | Promise<void>;
  /** An offset take on `name` is built, of `offsets` rows. */
  take?(name: string, offsets: number): void;
  /** Before a `countRows` of `name` (how a read learns which rows of a live generation it reads). */
  beforeCount?(name: string): void | Promise<void>;
  /** Before `optimize` / `createIndex` of the base. */
  beforeBaseOp?(op: 'optimize' | 'createIndex'): void | Promise<void>;
}

/** A TableWrapper that routes commits and reads of every handle through `tap` (mutable). */
export function tableTapper(tap: TableTap): TableWrapper {
  return (t: Table, name: string) =>
    new Proxy(t, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver) as unknown;
        if (typeof v !== 'function') return v;
        if (prop === 'add') {
          return (...args: unknown[]) => {
            const run = () => (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
            return tap.add ? tap.add(name, run, args[0]) : run();
          };
        }
        if (prop === 'countRows') {
          return async (...args: unknown[]) => {
            await tap.beforeCount?.(name);
            return (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          };
        }
        if (prop === 'optimize' || prop === 'createIndex') {
          return async (...args: unknown[]) => {
            await tap.beforeBaseOp?.(prop);
            return (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          };
        }
        if (prop === 'query' || prop === 'takeOffsets') {
          return (...args: unknown[]) => {
            if (prop === 'takeOffsets') tap.take?.(name, (args[0] as unknown[]).length);
            const q = (v as (...a: unknown[]) => { toArrow: (...a: unknown[]) => Promise<unknown> }).apply(target, args);
            const orig = q.toArrow.bind(q);
            q.toArrow = async (...a: unknown[]) => {
              await tap.beforeRead?.(name);
              return orig(...a);
            };
            return q;
          };
        }
        return (v as (...a: unknown[]) => unknown).bind(target);
      },
    });
}

// ---- logs ----------------------------------------------------------------------------------

export interface TestLogOptions {
  root: string;
  leases: LeaseStore;
  clock: Clock;
  owner?: string;
  slots?: number;
  slot?: number;
  leaseTtlMs?: number;
  mergeEveryCommits?: number;
  mergeEveryBytes?: number;
  mergeIdleMs?: number;
  cachedItems?: number;
  hooks?: WriterHooks & MergeHooks;
  tableTap?: TableTap;
}

export interface TestLog {
  log: LanceCheckpointLog;
  objects: TapObjectStore;
  leases: TapLeaseStore;
}

let owners = 0;

/**
 * One process's log on `root` (as openLog builds it), with its own tapped object store and
 * lease store around the shared ones. Options not given take openLog's defaults.
 */
export function testLog(o: TestLogOptions): TestLog {
  const root = parseRoot(o.root);
  const uri = logUri(root, PIPELINE, EXPERIMENT);
  const objects = new TapObjectStore(new LocalObjectStore(uri));
  const leases = new TapLeaseStore(o.leases);
  const log = new LanceCheckpointLog({
    ...DEFAULTS,
    pipeline: PIPELINE,
    experiment: EXPERIMENT,
    uri,
    objects,
    storageOptions: undefined,
    leases,
    owner: o.owner ?? `test-owner-${++owners}`,
    clock: o.clock,
    slots: o.slots ?? 2,
    ...(o.slot !== undefined ? { slot: o.slot } : {}),
    leaseTtlMs: o.leaseTtlMs ?? DEFAULTS.leaseTtlMs,
    mergeEveryCommits: o.mergeEveryCommits ?? DEFAULTS.mergeEveryCommits,
    mergeEveryBytes: o.mergeEveryBytes ?? DEFAULTS.mergeEveryBytes,
    mergeIdleMs: o.mergeIdleMs ?? DEFAULTS.mergeIdleMs,
    cachedItems: o.cachedItems ?? DEFAULTS.cachedItems,
    ...(o.hooks ? { hooks: o.hooks } : {}),
    ...(o.tableTap ? { wrapTable: tableTapper(o.tableTap) } : {}),
  });
  return { log, objects, leases };
}

/** A new clock at the real current time (so version retention behaves as in production). */
export function manualClock(): ManualClock {
  return new ManualClock(Date.now());
}

// ---- what a reader observes ----------------------------------------------------------------

/** A reader process that never wrote, opened for one look and closed. */
export async function withFreshReader<T>(root: string, leases: LeaseStore, clock: Clock, fn: (log: LanceCheckpointLog) => Promise<T>): Promise<T> {
  const { log } = testLog({ root, leases, clock });
  try {
    return await fn(log);
  } finally {
    await log.close();
  }
}

/** Event ids a fold/trajectory shows for `itemId`, with their seqs (empty if the item is absent). */
export async function eventsOf(log: LanceCheckpointLog, itemId: string): Promise<Map<string, number>> {
  let traj;
  try {
    traj = await log.trajectory(itemId);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'NOT_FOUND' || code === 'LOG_NOT_FOUND') return new Map();
    throw e;
  }
  return new Map(traj.map((t) => [t.eventId, t.itemSeq]));
}

/** I1: every event of `ack` is visible at its acked seq (and the item has no violations). */
export async function expectAcksVisible(log: LanceCheckpointLog, acks: readonly Ack[], label: string): Promise<void> {
  for (const ack of acks) {
    const seen = await eventsOf(log, ack.itemId);
    const want = ack.eventIds.map((id, i) => [id, ack.firstSeq + i] as const);
    expect(
      want.map(([id]) => [id, seen.get(id) ?? 'missing']),
      `${label}: acked batch ${ack.checkpointId} of ${ack.itemId} (seqs ${ack.firstSeq}-${ack.lastSeq}, duplicate ${ack.duplicate})`,
    ).toEqual(want);
    const state: ItemState = await log.fold(ack.itemId);
    expect(state.violations.map((v) => `${v.kind} at seq ${v.seq}`), `${label}: violations of ${ack.itemId}`).toEqual([]);
    expect(state.lastSeq, `${label}: lastSeq of ${ack.itemId}`).toBeGreaterThanOrEqual(ack.lastSeq);
  }
}

/** I1 through a fresh reader, then again after a maintenance pass. */
export async function expectDurable(
  root: string,
  leases: LeaseStore,
  clock: Clock,
  acks: readonly Ack[],
  label: string,
): Promise<void> {
  await withFreshReader(root, leases, clock, (r) => expectAcksVisible(r, acks, `${label} (fresh reader)`));
  await withFreshReader(root, leases, clock, async (r) => {
    await r.maintain();
    await expectAcksVisible(r, acks, `${label} (after maintain)`);
  });
}

/**
 * Starts `fn` on a fresh reader. `settledOrRelisting` resolves once the read finished, or once it
 * lists the meta folder a second time (it retries or waits for something): a test that holds
 * another process paused releases it then, instead of deadlocking on a reader that waits.
 */
export function startRead<T>(
  root: string,
  leases: LeaseStore,
  clock: Clock,
  fn: (log: LanceCheckpointLog) => Promise<T>,
): { result: Promise<Outcome<T>>; settledOrRelisting: Promise<void> } {
  const { log, objects } = testLog({ root, leases, clock });
  const relisting = new Gate();
  let lists = 0;
  objects.tap.before = (op, key) => {
    if (op === 'list' && key === '_dgcl/meta' && ++lists === 2) relisting.resolve();
  };
  const result = settle(fn(log).finally(() => log.close()));
  return { result, settledOrRelisting: Promise.race([result.then(() => undefined), relisting.promise]) };
}

// ---- per-file set-up ------------------------------------------------------------------------

export type OpenTestLog = (o: Omit<TestLogOptions, 'root' | 'leases' | 'clock'> & { clock?: Clock }) => TestLog;

/**
 * For a test file: `setup()` gives each test a fresh root, clock and shared lease store, and
 * `open()` logs on them with lease ttl `ttlMs`; every log and store is closed after each test
 * (`keep` registers ones made by hand).
 */
export function raceFixture(ttlMs: number) {
  let opened: TestLog[] = [];
  let stores: LocalLeaseStore[] = [];
  afterEach(async () => {
    // A test that failed while a pause held a call would otherwise leave close() waiting for it
    // (vitest runs onTestFinished hooks after afterEach).
    for (const p of heldPauses) p.release();
    for (const t of opened) await t.log.close().catch(() => undefined);
    for (const s of stores) await s.close();
    opened = [];
    stores = [];
  });
  const keep = {
    log<T extends TestLog>(t: T): T {
      opened.push(t);
      return t;
    },
    store<T extends LocalLeaseStore>(s: T): T {
      stores.push(s);
      return s;
    },
  };
  function setup(clock: ManualClock = manualClock()) {
    const root = tempRoot();
    const leases = keep.store(sharedLeases(root, clock));
    const open: OpenTestLog = (o) => keep.log(testLog({ root, leases, clock, leaseTtlMs: ttlMs, ...o }));
    return { root, clock, leases, open };
  }
  /** A log built as openLog builds it, with options testLog does not pass through (wrappers). */
  function rawLog(root: string, leases: LeaseStore, clock: ManualClock, extra: Partial<LanceLogOptions> & { owner: string }): LanceCheckpointLog {
    const uri = logUri(parseRoot(root), PIPELINE, EXPERIMENT);
    const log = new LanceCheckpointLog({
      ...DEFAULTS,
      pipeline: PIPELINE,
      experiment: EXPERIMENT,
      uri,
      objects: new LocalObjectStore(uri),
      storageOptions: undefined,
      leases,
      clock,
      slots: 2,
      ...extra,
    });
    keep.log({ log, objects: null as never, leases: null as never });
    return log;
  }
  return { setup, keep, rawLog };
}

/** Files of the base dataset's data folder. */
export async function baseDataFiles(root: string): Promise<Set<string>> {
  return new Set(await fs.readdir(path.join(logUri(parseRoot(root), PIPELINE, EXPERIMENT), 'data')));
}

/**
 * Writer `owner` (slot 0 of a one-slot log) stopped inside its first append: the dataset folder
 * of its first generation exists, the PUT of its `gen.` marker is held until `marker.release()`
 * (clear `log.objects.tap.before` first if later requests must pass freely).
 */
export async function writerHeldAtFirstMarker(
  o: { root: string; leases: LeaseStore; clock: Clock; leaseTtlMs: number; owner: string },
  batch: Record<string, unknown>,
): Promise<{ writer: TestLog; marker: Pause; appended: Promise<Outcome<Ack[]>>; writerEpoch: string }> {
  const writer = testLog({ ...o, slots: 1 });
  const marker = new Pause();
  writer.objects.tap.before = async (op, key) => {
    if (op === 'putIfAbsent' && key.includes('/gen.')) await marker.hit();
  };
  const appended = settle(writer.log.append([batch]));
  await marker.reached.promise;
  return { writer, marker, appended, writerEpoch: writer.log.writerEpoch! };
}

/** Holds the first meta listing of `R` (a read's first step) until the pause is released. */
export function holdFirstList(R: TestLog): Pause {
  const hold = new Pause();
  let armed = true;
  R.objects.tap.before = async (op, key) => {
    if (op === 'list' && key === META_DIR && armed) {
      armed = false;
      await hold.hit();
    }
  };
  return hold;
}

/** `W` appends `batch`, merges it into the base, deletes its item and closes: a tombstone over base rows. */
export async function deleteMergedItem(W: TestLog, batch: Parameters<TestLog['log']['append']>[0][number] & { itemId: string }): Promise<void> {
  await W.log.append([batch]);
  await W.log.mergeOwnShard();
  expect((await W.log.deleteItem(batch.itemId)).deleted).toBe(true);
  await W.log.close();
}

/**
 * Append `batch` through W and hold the commit once it has landed, before its epoch check
 * (`assertCurrent`) answers: resolves when it is held. `release()` lets the check (and every
 * later one) run; `answer` settles with the append.
 */
export async function landUnconfirmed(W: TestLog, batch: Record<string, unknown>): Promise<{ answer: Promise<Outcome<Ack[]>>; release(): void }> {
  const checking = new Pause();
  W.leases.tap.before = async (op) => {
    if (op === 'assertCurrent') await checking.hit();
  };
  const answer = settle(W.log.append([batch]));
  await checking.reached.promise;
  return {
    answer,
    release() {
      W.leases.tap.before = undefined;
      checking.release();
    },
  };
}
