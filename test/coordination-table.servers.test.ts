/**
 * Item markers and claims in the lease table (lib/coord). Each test shows one finding
 * and asserts the behaviour of its fix (each failed before it). Local roots (real Lance) with
 * leases on DynamoDB Local (the same choice an S3 root makes).
 *
 * F1: a writer of the version before the choice record (markers and claims always objects)
 *     running beside this version on a new log (a rolling upgrade): the new log is recorded
 *     `table`, the old writer never reads it, and one checkpoint gets two `duplicate: false`
 *     acks (I4), and an item written by both, one after the other, gets two events at one seq
 *     (I5: no ownership breach by the caller). An old binary cannot be made to look; the fix is
 *     `coordination: 'objects'` (DGCL_COORDINATION) while old processes run (docs/operations.md,
 *     "Upgrades and migrations"), shown here.
 * F3 (performance): a new log whose slot lease already has an epoch (a log deleted and made
 *     again under the same names, or a first writer that died before it chose) gets a seal of
 *     the previous epoch in `_dgcl/meta` before it chooses, so it is recorded `objects` for
 *     ever, though nothing was ever committed to it.
 * F4: a claim is a DynamoDB item (at most 400 KB) holding the whole ack, event ids included:
 *     a batch of about 11,500 events or more commits, then its claim is refused as bad input
 *     (INVALID_INPUT, "nothing written") although its events are durable and visible. As
 *     objects the same batch is acked.
 * F6: a log copied to another root (same pipeline, experiment and lease table) shares the
 *     original's scope (the id is in the copied record): a claim made in one log answers a
 *     batch written in the other, naming seqs that in the copy hold other events (I4).
 * F2: the table records are now part of the log, but nothing checks they are there: a log
 *     recorded `table` opened with another lease table (a replaced table, a copy of the log in
 *     another account or stack) reads every marker as absent, takes its items for new ones and
 *     writes them again at seq 1, without reading them.
 */
import { randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../lib/clock.ts';
import { CHOICE_KEY } from '../lib/coord/choose.ts';
import { createLeaseTable, DEFAULTS, DynamoLeaseStore, openLog } from '../lib/index.ts';
import type { LeaseStore } from '../lib/lease/types.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { LanceCheckpointLog } from '../lib/log/log.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { lanceStorageOptions, logLocation, logUri, parseRoot } from '../lib/storage/location.ts';
import { createBatch, stepBatch } from './support/batches.ts';

const ddb = new DynamoDBClient({});
const tableA = `dgcl-rev14a-${randomUUID().slice(0, 8)}`;
const tableB = `dgcl-rev14b-${randomUUID().slice(0, 8)}`;
let leasesA: DynamoLeaseStore;
let leasesB: DynamoLeaseStore;
beforeAll(async () => {
  await createLeaseTable(ddb, tableA);
  await createLeaseTable(ddb, tableB);
  leasesA = new DynamoLeaseStore({ client: ddb, table: tableA });
  leasesB = new DynamoLeaseStore({ client: ddb, table: tableB });
});
afterAll(async () => {
  for (const t of [tableA, tableB]) await ddb.send(new DeleteTableCommand({ TableName: t })).catch(() => undefined);
  ddb.destroy();
});

const open: CheckpointLog[] = [];
afterEach(async () => {
  for (const l of open.splice(0)) await l.close().catch(() => undefined);
});

/**
 * The object store as the version before lib/coord sees it: it never reads the choice record
 * (it does not know it), so its markers and claims are objects, whatever the record says.
 */
class BeforeChoiceObjects extends LocalObjectStore {
  override get(key: string): Promise<string | null> {
    return key === CHOICE_KEY ? Promise.resolve('objects') : super.get(key);
  }
}

/** `leases` without its coordination table (only the LeaseStore methods). */
function withoutTable(leases: LeaseStore): LeaseStore {
  return {
    acquire: (k, o, t) => leases.acquire(k, o, t),
    renew: (l, t) => leases.renew(l, t),
    release: (l) => leases.release(l),
    read: (k) => leases.read(k),
    assertCurrent: (l) => leases.assertCurrent(l),
    raiseEpoch: (k, e) => leases.raiseEpoch(k, e),
    close: () => leases.close(),
  };
}

function experiment(name = `e-${randomUUID().slice(0, 8)}`) {
  const rootDir = mkdtempSync(path.join(tmpdir(), 'dgcl-rev14-'));
  const root = `file://${rootDir}`;
  const loc = logLocation(parseRoot(root), 'p', name);
  if (loc.kind !== 'file') throw new Error('a local root');
  const newLog = async (owner: string, leases: LeaseStore, slot: number, more: { coordination?: 'objects' } = {}) => {
    const log = await openLog({ root, pipeline: 'p', experiment: name, owner, leases, slot, slots: 4, ...more });
    open.push(log);
    return log;
  };
  /** A writer of the version before the choice record, same lease table. */
  const oldLog = (owner: string, leases: LeaseStore, slot: number) => {
    const r = parseRoot(root);
    const log = new LanceCheckpointLog({
      pipeline: 'p',
      experiment: name,
      uri: logUri(r, 'p', name),
      objects: new BeforeChoiceObjects(loc.dir),
      storageOptions: lanceStorageOptions(r, process.env),
      // The same leases, but no table for records: the old version knew none.
      leases: withoutTable(leases),
      owner,
      clock: systemClock,
      slots: 4,
      slot,
      leaseTtlMs: DEFAULTS.leaseTtlMs,
      mergeEveryCommits: 1000,
      mergeEveryBytes: DEFAULTS.mergeEveryBytes,
      mergeIdleMs: DEFAULTS.mergeIdleMs,
      maxBatchesPerCommit: DEFAULTS.maxBatchesPerCommit,
      cachedItems: DEFAULTS.cachedItems,
      versionRetentionMs: DEFAULTS.versionRetentionMs,
      claimRetentionMs: DEFAULTS.claimRetentionMs,
      deletionRetentionMs: DEFAULTS.deletionRetentionMs,
    });
    open.push(log);
    return log;
  };
  return { name, rootDir, dir: loc.dir, objects: new LocalObjectStore(loc.dir), newLog, oldLog };
}

describe('item markers and claims in the lease table', () => {
  it("a writer of the previous version beside this one on a new log, with coordination: 'objects' during the upgrade: one first ack per checkpoint, no two events at one seq", async () => {
    const x = experiment();
    const a = await x.newLog('new', leasesA, 0, { coordination: 'objects' });
    const old = x.oldLog('old', leasesA, 1);
    const [first] = await a.append([createBatch('i1')]);
    expect(first!.duplicate).toBe(false);
    // The same checkpoint delivered again, to the old writer (after the first ack: not a race).
    const [again] = await old.append([createBatch('i1')]);
    expect.soft({ record: await x.objects.get(CHOICE_KEY), duplicate: again!.duplicate }).toEqual({ record: expect.stringMatching(/^objects [0-9a-f-]{36}$/), duplicate: true });
    // The item goes on on the new writer, then on the old one, one after the other.
    const [s1] = await a.append([stepBatch('i1', 1)]);
    const [s2] = await old.append([stepBatch('i1', 2)]);
    expect.soft(s2!.firstSeq).toBe(s1!.lastSeq + 1);
    expect.soft((await a.fold('i1')).violations).toEqual([]);
  });

  it('a log kept in the table opened with another lease table is refused, not taken for a new log', async () => {
    const x = experiment();
    const a = await x.newLog('a', leasesA, 0);
    await a.append([createBatch('i1')]);
    const [s1] = await a.append([stepBatch('i1', 1)]);
    await a.close();
    expect(await x.objects.get(CHOICE_KEY)).toMatch(/^table /);
    // Another table (replaced, or the log copied to where another stack runs): slot 2 was never
    // used in this log, so the "epoch restarted below a seal" check (lib/log/maintain/seal.ts) passes.
    const b = await x.newLog('b', leasesB, 2);
    const step2 = await b.append([stepBatch('i1', 2)]).then(
      (acks) => acks[0]!,
      (e: unknown) => e as Error,
    );
    // Today: ITEM_NOT_FOUND for an item with two acknowledged batches (its marker is absent).
    expect.soft(step2).toMatchObject({ code: 'CORRUPT' });
    // Today: a create from another run is written at seq 1 again, beside the acked seq 1.
    const recreate = await b.append([createBatch('i1', { runId: 'r2' })]).then(
      (acks) => acks[0]!,
      (e: unknown) => e as Error,
    );
    expect.soft(recreate).toMatchObject({ code: 'CORRUPT' });
    expect.soft((await b.fold('i1')).lastSeq).toBe(s1!.lastSeq);
    expect.soft((await b.fold('i1')).violations).toEqual([]);
  });

  it('a log deleted and made again under the same names (its slots keep their epochs) still goes to the table', async () => {
    const x = experiment();
    const a = await x.newLog('a', leasesA, 0);
    await a.append([createBatch('i1')]);
    await a.close();
    expect(await x.objects.get(CHOICE_KEY)).toMatch(/^table /);
    rmSync(x.dir, { recursive: true });
    const b = await x.newLog('b', leasesA, 0);
    await b.append([createBatch('i1')]);
    // Today: "objects": slot 0's epoch 2 sealed epoch 1 (a fence and an empty seal in the meta
    // folder) before the writer chose, and the choice reads any meta object as data.
    expect(await x.objects.get(CHOICE_KEY)).toMatch(/^table /);
  });

  it('a maintainer run on a new log before any writer chooses nothing (it is refused, LOG_NOT_FOUND); the first writer chooses the table, and the writers after it agree', async () => {
    const x = experiment();
    const m = await x.newLog('m', leasesA, 0);
    await expect(m.maintain()).rejects.toMatchObject({ code: 'LOG_NOT_FOUND' });
    expect(await x.objects.get(CHOICE_KEY)).toBeNull();
    const a = await x.newLog('a', leasesA, 1);
    const [first] = await a.append([createBatch('i1')]);
    const record = await x.objects.get(CHOICE_KEY);
    expect(record).toMatch(/^table /);
    const b = await x.newLog('b', leasesA, 2);
    const [again] = await b.append([createBatch('i1')]);
    expect(again).toMatchObject({ firstSeq: first!.firstSeq, duplicate: true });
    expect(await x.objects.get(CHOICE_KEY)).toBe(record);
  });

  it('a batch of 12,000 events on a table log is acked (its claim fits), as on objects', async () => {
    const x = experiment();
    const a = await x.newLog('a', leasesA, 0);
    const big = createBatch('i1', { append: { tokens: Array.from({ length: 12_000 }, (_, i) => i) } });
    const out = await a.append([big]).then(
      (acks) => acks[0]!,
      (e: unknown) => e as Error,
    );
    expect(await x.objects.get(CHOICE_KEY)).toMatch(/^table /);
    // Today: InvalidInputError ("... do not fit in one DynamoDB item"), after the commit: the
    // events are visible, and the retry is answered duplicate: true (no first ack ever).
    expect.soft(out).toMatchObject({ duplicate: false, firstSeq: 1 });
    const retry = await a.append([big]);
    expect.soft(retry[0]!.duplicate).toBe(true);
    expect.soft((await a.fold('i1')).lastSeq).toBe(12_004 - 1);
  }, 60_000);

  it('a copy of a table log under another root is refused for writing (it would share the original records), and still reads', async () => {
    const x = experiment();
    const a = await x.newLog('a', leasesA, 0);
    await a.append([createBatch('i1')]);
    await a.close();
    const y = experiment(x.name);
    rmSync(y.dir, { recursive: true, force: true });
    cpSync(x.dir, y.dir, { recursive: true });
    const inX = await x.newLog('x', leasesA, 0);
    const inY = await y.newLog('y', leasesA, 1);
    const [s1x] = await inX.append([stepBatch('i1', 1)]); // claimed, through x
    expect(s1x!.duplicate).toBe(false);
    // Before the fix: y's own step 9 first, then step 1 answered with x's seqs, duplicate: true.
    await expect(inY.append([stepBatch('i1', 9)])).rejects.toMatchObject({ code: 'CORRUPT', message: expect.stringContaining('is a copy of') });
    expect((await inY.fold('i1')).lastSeq).toBe(s1x!.firstSeq - 1);
  });

  it('claimRetentionMs is checked when the log is opened, not by the claim after a commit', async () => {
    const x = experiment();
    // "Keep claims for ever" was fine on objects (nothing is ever older). Today openLog accepts
    // it, and every new batch then commits and fails INVALID_INPUT (field expiresAfterMs) at its
    // claim, its events visible.
    const opened = await openLog({ root: `file://${x.rootDir}`, pipeline: 'p', experiment: x.name, owner: 'a', leases: leasesA, claimRetentionMs: Infinity }).then(
      (log) => {
        open.push(log);
        return log;
      },
      (e: unknown) => e as Error,
    );
    expect(opened).toMatchObject({ code: 'INVALID_INPUT', field: 'claimRetentionMs' });
  });
});
