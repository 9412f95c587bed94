/**
 * Lance as scheduling and fault points.
 *  - `simTableWrapper`: the TableWrapper the log takes (lib/log/tables.ts). A Proxy makes every
 *    async table method, and the terminal calls of query / takeRowIds / mergeInsert builders,
 *    a wrapped operation. Failures are plain Errors, as Lance's are.
 *  - `installLancePatches`: the connection calls the log makes before it has a table handle
 *    (connect, openTable, createEmptyTable) are not reachable through TableWrapper, and
 *    unscheduled native I/O would break replay; so they are patched on lancedb's own classes,
 *    once per process. The patch is inert outside a simulation context.
 */
import crypto, { type RandomUUIDOptions } from 'node:crypto';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import path from 'node:path';
import type { Table } from '../../lib/log/tables.ts';
import type { Rng } from './prng.ts';
import { simContext, type Scheduler } from './scheduler.ts';

const lanceError = (m: string) => new Error(m);

const MUTATING = new Set(['add', 'optimize', 'createIndex', 'delete', 'update', 'restore', 'addColumns', 'alterColumns', 'dropColumns', 'dropIndex']);
const READING = new Set(['version', 'checkout', 'checkoutLatest', 'countRows', 'listIndices', 'stats', 'schema', 'listVersions', 'indexStats']);
const BUILDERS = new Set(['query', 'takeRowIds', 'takeOffsets', 'mergeInsert', 'search', 'vectorSearch']);
const TERMINAL = new Set(['toArrow', 'toArray', 'execute']);

type Fn = (...args: unknown[]) => unknown;

export function simTableWrapper(sched: Scheduler): (table: Table, name: string) => Table {
  return (table, name) => wrapTable(table, name, sched);
}

/** A Proxy of `obj` whose methods are what `method` makes of them (properties pass through). */
function methodProxy<T extends object>(obj: T, method: (prop: string, fn: Fn, target: T, receiver: unknown) => unknown): T {
  return new Proxy(obj, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof prop !== 'string' || typeof value !== 'function') return value;
      return method(prop, value as Fn, target, receiver);
    },
  });
}

/** One Lance call as a released operation, a fault point. */
function lanceOp(sched: Scheduler, kind: string, target: string, mutating: boolean, run: () => Promise<unknown>): Promise<unknown> {
  return sched.op({ kind, target, mutating, faultable: true, run, error: lanceError });
}

function wrapTable(table: Table, name: string, sched: Scheduler): Table {
  return methodProxy(table, (prop, fn, target) => {
    if (prop === 'add') {
      return (...args: unknown[]) =>
        sched.op({
          kind: 'lance.add',
          target: name,
          mutating: true,
          faultable: true,
          run: () => fn.apply(target, args) as Promise<unknown>,
          error: lanceError,
          // A commit that timed out lands later only if nothing else committed meanwhile:
          // Lance commits version N+1 with put-if-absent, which a later commit already took.
          late: lateAdd(target, fn, args),
        });
    }
    if (MUTATING.has(prop) || READING.has(prop)) {
      return (...args: unknown[]) => lanceOp(sched, `lance.${prop}`, name, MUTATING.has(prop), () => fn.apply(target, args) as Promise<unknown>);
    }
    if (BUILDERS.has(prop)) return (...args: unknown[]) => wrapBuilder(fn.apply(target, args) as object, `${name}.${prop}`, prop === 'mergeInsert', sched);
    if (prop === 'tags') return (...args: unknown[]) => lanceOp(sched, 'lance.tags', name, false, async () => wrapTags((await fn.apply(target, args)) as object, name, sched));
    return fn.bind(target);
  });
}

/** A table's tags (snapshots tag the base): each call native I/O, so each a released operation. */
function wrapTags(tags: object, name: string, sched: Scheduler): object {
  const mutating = (prop: string) => prop === 'create' || prop === 'delete' || prop === 'update';
  return methodProxy(tags, (prop, fn, target) => (...args: unknown[]) => lanceOp(sched, `lance.tags.${prop}`, name, mutating(prop), () => fn.apply(target, args) as Promise<unknown>));
}

/** The version seen when the call was made; the late landing happens only at that version. */
function lateAdd(target: Table, fn: Fn, args: unknown[]): () => Promise<() => Promise<unknown>> {
  // Called at the release that timed out: that is when the request was sent.
  return async () => {
    const before = await target.version().catch(() => -1);
    return async () => {
      await target.checkoutLatest().catch(() => undefined);
      if ((await target.version()) !== before) return undefined;
      return fn.apply(target, args);
    };
  };
}

function wrapBuilder(builder: object, label: string, mutating: boolean, sched: Scheduler): object {
  return methodProxy(builder, (prop, fn, target, receiver) => {
    if (TERMINAL.has(prop)) {
      return (...args: unknown[]) =>
        // (`execute` answers its stream without a promise; `direct` mode passes that through)
        Promise.resolve(lanceOp(sched, `lance.${label.split('.').pop()}.${prop}`, label.split('.')[0]!, mutating, () => fn.apply(target, args) as Promise<unknown>)).then((out) =>
          prop === 'execute' && !mutating ? scheduledStream(out as AsyncIterable<unknown>, label, sched) : out,
        );
    }
    return (...args: unknown[]) => {
      const out = fn.apply(target, args);
      if (out === target) return receiver;
      if (out && typeof out === 'object' && !(out instanceof Promise)) return wrapBuilder(out, label, mutating, sched);
      return out;
    };
  });
}

/**
 * A query's `execute` answers a stream whose batches Lance reads on each `next()`: native I/O
 * that, unscheduled, took real time between two released operations (schedules then depended on
 * the machine's speed, and a stream still reading at the end looked like a hang). Each batch is
 * a released operation of its own here, a fault point like any read, and other operations
 * interleave between two batches.
 */
function scheduledStream(stream: AsyncIterable<unknown>, label: string, sched: Scheduler): AsyncIterable<unknown> {
  const it = stream[Symbol.asyncIterator]();
  const [table, builder] = label.split('.');
  return {
    [Symbol.asyncIterator]() {
      return {
        next: () => Promise.resolve(sched.op({ kind: `lance.${builder}.next`, target: table!, mutating: false, faultable: true, run: () => it.next(), error: lanceError })),
        return: async (v?: unknown) => (await it.return?.(v)) ?? { done: true as const, value: v },
      };
    },
  };
}

let installed = false;

export function installLancePatches(): void {
  if (installed) return;
  installed = true;
  const require = createRequire(import.meta.url);
  const dir = path.dirname(require.resolve('@lancedb/lancedb'));
  const native = require(path.join(dir, 'native.js')) as { Connection: { new: Fn } };
  const conn = require(path.join(dir, 'connection.js')) as { LocalConnection: { prototype: Record<string, Fn> } };
  const gate = (kind: string, target: string, mutating: boolean, call: () => Promise<unknown>): Promise<unknown> => {
    const ctx = simContext.getStore();
    if (!ctx || ctx.sched.direct) return call();
    // connect does no I/O on a local root (nor on S3: the store is built lazily), so it is a
    // scheduling point but never faulted.
    return ctx.sched.op({ kind, target, mutating, faultable: kind !== 'lance.connect', run: call, error: lanceError });
  };
  // `Connection.new` is read-only on the native class: replace the export by an object that
  // inherits the class's statics and has a gated `new` (connect() reads it at each call).
  const Native = native.Connection;
  const origNew = Native.new;
  const gatedNew = function (this: unknown, ...args: unknown[]) {
    return gate('lance.connect', shortPath(String(args[0])), false, () => origNew.apply(Native, args) as Promise<unknown>);
  };
  native.Connection = Object.create(Native, { new: { value: gatedNew } }) as { new: Fn };
  // A query's `execute` starts the native query and hands its promise to a generator that awaits
  // it only in the first `next()`. In a process that `next()` follows at once (lib/log/read/stream.ts),
  // long before the native answer; here the scheduler releases it as an operation of its own, so
  // a query that fails meanwhile (its shard deleted) was an unhandled rejection, a false CRASH
  // (seed 1874). Marked handled; the first `next()` still gets the error.
  const queries = require(path.join(dir, 'query.js')) as { QueryBase: { prototype: Record<string, Fn> } };
  const origExecute = queries.QueryBase.prototype.nativeExecute!;
  queries.QueryBase.prototype.nativeExecute = function (this: unknown, ...args: unknown[]) {
    const p = origExecute.apply(this, args) as Promise<unknown>;
    p.catch(() => undefined);
    return p;
  };
  for (const m of ['openTable', 'createEmptyTable'] as const) {
    const orig = conn.LocalConnection.prototype[m]!;
    conn.LocalConnection.prototype[m] = function (this: unknown, ...args: unknown[]) {
      return gate(`lance.${m}`, String(args[0]), m === 'createEmptyTable', () => orig.apply(this, args) as Promise<unknown>);
    };
  }
}

function shortPath(p: string): string {
  const i = p.indexOf('log.lance');
  return i >= 0 ? p.slice(i) : path.basename(p);
}

/**
 * Route lib's randomness to the schedule's own streams: Math.random (the random first slot) and
 * node:crypto's randomUUID and randomBytes (log ids, nonces, lease tokens), so that a replay
 * makes the same ids, in the same order, as the run it replays (listings and ties sort by them).
 */
let randomInstalled = false;
export function installRandomPatch(): void {
  if (randomInstalled) return;
  randomInstalled = true;
  const orig = Math.random;
  Math.random = () => {
    const ctx = simContext.getStore();
    return ctx ? ctx.sched.libRandom.next() : orig();
  };
  const origBytes = crypto.randomBytes;
  const origUuid = crypto.randomUUID;
  const ids = (): Rng | null => simContext.getStore()?.sched.idRandom ?? null;
  const bytes = (n: number, r: Rng): Buffer => {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = r.int(256);
    return b;
  };
  crypto.randomBytes = ((n: number, cb?: unknown) => {
    const r = ids();
    return r && cb === undefined ? bytes(n, r) : (origBytes as (n: number, cb?: unknown) => Buffer)(n, cb);
  }) as typeof crypto.randomBytes;
  crypto.randomUUID = ((o?: RandomUUIDOptions) => {
    const r = ids();
    if (!r) return origUuid(o);
    const b = bytes(16, r);
    b[6] = (b[6]! & 0x0f) | 0x40;
    b[8] = (b[8]! & 0x3f) | 0x80;
    const h = b.toString('hex');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}` as ReturnType<typeof origUuid>;
  }) as typeof crypto.randomUUID;
  syncBuiltinESMExports();
}
