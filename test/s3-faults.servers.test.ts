/**
 * The log on S3 (RGW) and DynamoDB Local through fault proxies: for each kind of request the
 * log makes, and each way a request can go wrong (fails before landing, lands and its answer
 * is lost, lands and its answer comes after the client gave up), one operation is run with the
 * fault injected on exactly that kind, then:
 *  - the operation acks or throws a typed DgclError;
 *  - no part of the batch is visible (all of it or nothing), also right after the fault;
 *  - after healing, a retry by the same writer and a redelivery to another writer ack the same
 *    events at the same seqs, once in the log (fold's lastSeq and the trajectory prove it), and
 *    at most one ack of the checkpoint says `duplicate: false`;
 *  - every acked batch is visible at its acked seqs to a fresh reader, and again after the
 *    writers closed and maintain() ran.
 * A file of its own: Lance talks to S3 through the proxy for the whole process.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DgclError } from '../lib/errors.ts';
import { slotKey } from '../lib/lease/slots.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { S3Client } from '@aws-sdk/client-s3';
import { logLocation, parseRoot, s3ClientConfig, type S3Location } from '../lib/storage/location.ts';
import { S3ObjectStore } from '../lib/storage/s3.ts';
import { leaseLogIdOf } from './support/coord.ts';
import type { Ack } from '../lib/types.ts';
import { AckLedger, expectAcksVisible, trajectoryOrNone } from './support/ack-checks.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { startFaultBench, type FaultBench, type FaultSession } from './support/fault-bench.ts';
import type { ArmedFault, Fault, FaultProxy, FaultRequest } from './support/fault-proxy.ts';

/** How an operation meets its fault. */
interface FaultSpec {
  name: string;
  fault: Fault;
  /**
   * Consecutive requests of the kind hit: 1 (a client retry may absorb it) or EVERY, more than
   * any client retries (SDK: 3 attempts; Lance: 3 per request, and it redoes a commit ~12 times),
   * so that the failure reaches the log's code.
   */
  count: number;
}

const EVERY = 50;

const FAULTS: FaultSpec[] = [
  { name: 'fails before landing, every attempt', fault: 'fail-before', count: EVERY },
  { name: 'lands, the connection closed before the answer', fault: 'lost-close', count: 1 },
  { name: 'lands, every answer lost (500)', fault: 'lost-500', count: EVERY },
  { name: 'lands, the answer held past the client timeout', fault: 'timeout', count: 1 },
];

/**
 * Where the faulted request happens:
 *  - warm-append: a step batch for an item the (warm) writer wrote before;
 *  - new-item: a writer's first batch of an item nobody wrote (item marker PUT);
 *  - foreign-item: a batch for an item another writer wrote (the writer reads it: meta listing);
 *  - new-generation: the first batch after the writer merged its generation (gen marker PUT);
 *  - takeover: a writer's first batch on a slot whose last holder ended without sealing (seal PUT);
 *  - first-append: a new log's first writer's first batch (lease acquire, the log's id and
 *    coordination record);
 *  - merge: the writer merging its generation into the base (not an append).
 */
type Scenario = 'warm-append' | 'new-item' | 'foreign-item' | 'new-generation' | 'takeover' | 'first-append' | 'merge';

interface Target {
  proxy: 's3' | 'ddb';
  kind: string;
  /** More kinds faulted alike, only on requests whose path matches `alsoPath` (e.g. Lance reading its manifest back). */
  also?: string[];
  alsoPath?: RegExp;
  scenario: Scenario;
  /** The first request of the kind hit (default 1). */
  nth?: number;
  what: string;
  /**
   * 'objects': the log keeps its item markers and claims as S3 objects (its first writer was told
   * `coordination: 'objects'`, as logs with data from before 0.2.0 are kept). Default: a new
   * log, whose markers and claims are in the lease table.
   */
  coord?: 'objects';
}

const TARGETS: Target[] = [
  { proxy: 's3', kind: 'lance-commit', scenario: 'warm-append', what: 'the Lance commit (manifest PUT, If-None-Match)' },
  {
    proxy: 's3',
    kind: 'lance-commit',
    also: ['head', 'get'],
    alsoPath: /\/_versions\//,
    scenario: 'warm-append',
    what: 'the Lance commit and Lance reading its manifest back',
  },
  { proxy: 's3', kind: 'lance-data', scenario: 'warm-append', what: 'a Lance data / transaction PUT' },
  { proxy: 'ddb', kind: 'ddb:PutItem', scenario: 'warm-append', what: 'the claim (conditional PutItem)' },
  { proxy: 'ddb', kind: 'ddb:BatchGetItem', scenario: 'warm-append', what: 'the item marker read (BatchGetItem)' },
  { proxy: 'ddb', kind: 'ddb:GetItem', scenario: 'warm-append', what: 'the epoch check (GetItem)' },
  { proxy: 'ddb', kind: 'ddb:PutItem', scenario: 'new-item', what: 'the item marker PutItem' },
  { proxy: 's3', kind: 'claim', scenario: 'warm-append', what: 'the claim PUT', coord: 'objects' },
  { proxy: 's3', kind: 'get', scenario: 'warm-append', what: 'the item marker GET', coord: 'objects' },
  { proxy: 's3', kind: 'item-marker', scenario: 'new-item', what: 'the item marker PUT', coord: 'objects' },
  { proxy: 's3', kind: 'list', scenario: 'foreign-item', what: 'the meta listing' },
  { proxy: 's3', kind: 'gen-marker', scenario: 'new-generation', what: 'the generation marker PUT' },
  { proxy: 's3', kind: 'seal', scenario: 'takeover', what: "the predecessor's seal PUT" },
  { proxy: 'ddb', kind: 'ddb:UpdateItem', scenario: 'first-append', what: 'the lease acquire (UpdateItem)' },
  { proxy: 's3', kind: 'log-id', scenario: 'first-append', what: "a new log's id PUT (If-None-Match)" },
  { proxy: 's3', kind: 'coordination', scenario: 'first-append', what: "a new log's coordination record PUT" },
  { proxy: 's3', kind: 'lance-commit', scenario: 'merge', nth: 2, what: 'the base commit (merge insert)' },
  { proxy: 's3', kind: 'base-marker', scenario: 'merge', what: 'the base marker PUT' },
  { proxy: 's3', kind: 'retired-marker', scenario: 'merge', what: 'the retired marker PUT' },
  { proxy: 's3', kind: 'delete', scenario: 'merge', what: 'the deletion of the merged generation' },
];

type Outcome<T> = { ok: T } | { error: unknown };

async function attempt<T>(fn: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: await fn() };
  } catch (error) {
    return { error };
  }
}

function describeError(o: Outcome<unknown>): string {
  if ('ok' in o) return 'acked';
  const e = o.error;
  return e instanceof Error ? `${e.constructor.name}: ${e.message}` : String(e);
}

/** The operation either succeeded or threw a typed DgclError. */
function expectAckOrTyped(o: Outcome<unknown>, label: string): void {
  expect('ok' in o || o.error instanceof DgclError, `${label}: ${describeError(o)}`).toBe(true);
}

/** The fault hit the operation: on `count` requests of the kind, or on every one it made. */
function expectFired(a: ArmedFault, label: string): void {
  expect(a.seen, `${label}: requests of kind ${a.kind} made`).toBeGreaterThanOrEqual(a.nth);
  expect(a.hits.length, `${label}: requests of kind ${a.kind} hit`).toBe(Math.min(a.count, a.seen - a.nth + 1));
}

let bench: FaultBench;
describe.concurrent('s3:// root through fault proxies: each request kind, each fault', () => {
  beforeAll(async () => {
    bench = await startFaultBench('faults');
  });
  afterAll(async () => {
    await bench.stop();
  });

  const newExperiment = () => `e-${randomUUID().slice(0, 8)}`;

  /**
   * Runs one case with its own logs and faults: faults only hit requests of the case's own
   * experiment (S3 keys hold it, DynamoDB lease keys hold it), so cases run side by side.
   */
  async function withCase(fn: (c: { experiment: string; s: FaultSession; arm: (t: Target, f: FaultSpec) => ArmedFault; heal: () => void }) => Promise<void>) {
    const experiment = newExperiment();
    const s = bench.session();
    // S3: the key or the listing prefix holds the experiment; DynamoDB: the lease key in the body
    const mine = (r: FaultRequest) => decodeURIComponent(r.url).includes(`/${experiment}/`) || r.body.includes(`/${experiment}/`);
    const armed: Array<[FaultProxy, ArmedFault]> = [];
    const arm = (t: Target, f: FaultSpec) => {
      const proxy = t.proxy === 's3' ? bench.s3 : bench.ddb;
      const main = proxy.arm(t.kind, f.fault, { nth: t.nth ?? 1, count: f.count, matches: mine });
      armed.push([proxy, main]);
      for (const k of t.also ?? []) {
        armed.push([proxy, proxy.arm(k, f.fault, { count: f.count, matches: (r) => mine(r) && (t.alsoPath?.test(r.path) ?? true) })]);
      }
      return main;
    };
    const heal = () => {
      for (const [p, a] of armed.splice(0)) p.disarm(a);
    };
    try {
      await fn({ experiment, s, arm, heal });
    } finally {
      heal();
      await s.close();
    }
  }

  /** Closes the writers, runs maintain() in a fresh log, and checks every ack again. */
  async function afterMaintain(s: FaultSession, experiment: string, writers: CheckpointLog[], ledger: AckLedger, label: string) {
    for (const w of writers) expectAckOrTyped(await attempt(() => w.close()), `${label}: close`);
    const m = s.log(experiment, { owner: 'maintainer' });
    const report = await attempt(() => m.maintain());
    expect('ok' in report, `${label}: maintain after healing: ${describeError(report)}`).toBe(true);
    await expectAcksVisible(s.log(experiment), ledger.acked(), `${label}, after maintain`);
  }

  for (const t of TARGETS.filter((x) => x.scenario !== 'merge')) {
    describe.concurrent(`${t.what} [${[t.kind, ...(t.also ?? [])].join('+')}, ${t.scenario}${t.coord ? `, ${t.coord}` : ''}]`, () => {
      for (const f of FAULTS) {
        it(f.name, () => withCase(async ({ experiment, s, arm, heal }) => {
          const label = `${t.kind}/${t.scenario}/${f.name}`;
          const ledger = new AckLedger();
          const pinned = t.scenario === 'takeover' || t.scenario === 'first-append';
          // The log's first writer decides where its markers and claims live.
          const w = s.log(experiment, { ...(pinned ? { slot: 0, owner: 'writer-w' } : { owner: 'writer-w' }), ...(t.coord ? { coordination: t.coord } : {}) });
          const item = 'x';
          let before = 0;
          let batch: Record<string, unknown> = createBatch(item);
          if (t.scenario === 'warm-append' || t.scenario === 'new-generation') {
            const [a] = await w.append([createBatch(item)]);
            ledger.add(a!);
            before = a!.lastSeq;
            batch = stepBatch(item, 1);
            if (t.scenario === 'new-generation') await w.mergeOwnShard();
          } else if (t.scenario === 'new-item') {
            ledger.add(...(await w.append([createBatch('warm')])));
          } else if (t.scenario === 'foreign-item') {
            ledger.add(...(await w.append([createBatch('warm')])));
            const [a] = await s.log(experiment, { owner: 'writer-b' }).append([createBatch(item)]);
            ledger.add(a!);
            before = a!.lastSeq;
            batch = stepBatch(item, 1);
          } else if (t.scenario === 'takeover') {
            // slot 0's epoch 1 ends without a seal (a writer that died before writing anything);
            // another writer's first append (slot 1) made the log's record, which scopes the key
            const pre = s.log(experiment, { slot: 1, owner: 'writer-pre', ...(t.coord ? { coordination: t.coord } : {}) });
            ledger.add(...(await pre.append([createBatch('warm')])));
            await pre.close();
            const objects = S3ObjectStore.at(new S3Client(s3ClientConfig(process.env)), logLocation(parseRoot(bench.root), 'p', experiment) as S3Location);
            const ghost = await bench.leases.acquire(slotKey('p', experiment, 0, await leaseLogIdOf(objects)), 'ghost', 60_000);
            await bench.leases.release(ghost);
          }

          const armed = arm(t, f);
          const first = await attempt(() => w.append([batch]));
          heal();
          expectFired(armed, label);
          expectAckOrTyped(first, label);

          // right after the fault: the batch is in the log whole or not at all
          const seen = await trajectoryOrNone(s.log(experiment), item);

          // healed: the same writer retries, another writer gets a redelivery
          const retry = await attempt(() => w.append([batch]));
          expect('ok' in retry, `${label}: retry after healing: ${describeError(retry)}`).toBe(true);
          const again = await attempt(() => s.log(experiment, { owner: 'writer-x' }).append([batch]));
          expect('ok' in again, `${label}: redelivery to another writer: ${describeError(again)}`).toBe(true);
          const ack = (retry as { ok: Ack[] }).ok[0]!;
          const redelivered = (again as { ok: Ack[] }).ok[0]!;
          if ('ok' in first) {
            ledger.add(first.ok[0]!);
            expect(first.ok[0]!.duplicate, `${label}: first ack`).toBe(false);
            expect(ack.duplicate, `${label}: retry of an acked batch`).toBe(true);
          }
          ledger.add(ack, redelivered);
          expect(redelivered.duplicate, `${label}: redelivery`).toBe(true);
          ledger.expectConsistent(label);

          const n = ack.eventIds.length;
          const copies = seen.filter((e) => e.checkpointId === ack.checkpointId).length;
          expect([0, n], `${label}: events of the batch visible right after the fault`).toContain(copies);
          if ('ok' in first) expect(copies, `${label}: acked batch visible right after the fault`).toBe(n);
          expect(ack.firstSeq, `${label}: the batch follows the item's earlier events`).toBe(before + 1);

          const reader = s.log(experiment);
          await expectAcksVisible(reader, ledger.acked(), label);
          expect((await reader.fold(item)).lastSeq, `${label}: one copy of the batch`).toBe(before + n);
          await afterMaintain(s, experiment, [w], ledger, label);
        }));
      }
    });
  }

  for (const t of TARGETS.filter((x) => x.scenario === 'merge')) {
    describe.concurrent(`${t.what} [${t.kind}, merge]`, () => {
      for (const f of FAULTS) {
        it(f.name, () => withCase(async ({ experiment, s, arm, heal }) => {
          const label = `${t.kind}/merge/${f.name}`;
          const ledger = new AckLedger();
          const w = s.log(experiment, { owner: 'writer-w' });
          const item = 'x';
          const batches = [createBatch(item), stepBatch(item, 1), stepBatch(item, 2)];
          for (const b of batches) ledger.add(...(await w.append([b])));

          const armed = arm(t, f);
          const merged = await attempt(() => w.mergeOwnShard());
          heal();
          expectFired(armed, label);
          expectAckOrTyped(merged, label);
          await expectAcksVisible(s.log(experiment), ledger.acked(), `${label}, right after the fault`);

          // healed: the writer goes on, redeliveries are duplicates of the acked batches
          const next = await attempt(() => w.append([stepBatch(item, 3)]));
          expect('ok' in next, `${label}: append after healing: ${describeError(next)}`).toBe(true);
          ledger.add(...(next as { ok: Ack[] }).ok);
          const x = s.log(experiment, { owner: 'writer-x' });
          for (const b of batches) {
            const again = await attempt(() => x.append([b]));
            expect('ok' in again, `${label}: redelivery: ${describeError(again)}`).toBe(true);
            expect((again as { ok: Ack[] }).ok[0]!.duplicate, `${label}: redelivery`).toBe(true);
            ledger.add(...(again as { ok: Ack[] }).ok);
          }
          ledger.expectConsistent(label);
          await expectAcksVisible(s.log(experiment), ledger.acked(), label);
          await afterMaintain(s, experiment, [w, x], ledger, label);
        }));
      }
    });
  }

  describe.concurrent("a reader's requests faulted: fold answers right or throws a typed error", () => {
    const READ_KINDS = ['list', 'lance-list', 'get'] as const;
    it.each(READ_KINDS)('%s', (kind) => withCase(async ({ experiment, s, arm, heal }) => {
      // one item merged into the base, one in a live writer's shard
      const a = s.log(experiment, { owner: 'writer-a' });
      for (const b of [createBatch('merged'), stepBatch('merged', 1)]) await a.append([b]);
      await a.close();
      const live = s.log(experiment, { owner: 'writer-b' });
      for (const b of [createBatch('live'), stepBatch('live', 1)]) await live.append([b]);
      const expected = { merged: await s.log(experiment).fold('merged'), live: await s.log(experiment).fold('live') };
      expect(expected.merged.lastSeq).toBe(5);
      expect(expected.live.lastSeq).toBe(5);
      for (const f of FAULTS) {
        for (const id of ['merged', 'live'] as const) {
          const label = `${kind}/${f.name}/${id}`;
          const reader = s.log(experiment);
          const armed = arm({ proxy: 's3', kind, scenario: 'warm-append', what: 'read' }, f);
          const got = await attempt(() => reader.fold(id));
          heal();
          expectFired(armed, label);
          expectAckOrTyped(got, label);
          if ('ok' in got) expect(got.ok, label).toEqual(expected[id]);
        }
      }
    }));
  });
});
