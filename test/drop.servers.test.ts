/**
 * `dropLog` and `copyLog` on s3:// roots (Ceph RGW) with the log's records and leases in a
 * DynamoDB lease table (DynamoDB Local): objects, records and the log's own lease records gone,
 * the records of a log of the same names under another root untouched, those of an earlier log
 * at the same place found by their sentinel; refusals that delete nothing.
 */
import { randomUUID } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DynamoDBClient, GetItemCommand, ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import type * as arrow from 'apache-arrow';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { CHOICE_KEY } from '../lib/coord/choose.ts';
import { systemClock } from '../lib/clock.ts';
import { createLeaseTable, DynamoLeaseStore } from '../lib/lease/dynamo.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import { DEFAULT_SLOTS, slotKey } from '../lib/lease/slots.ts';
import { openLog } from '../lib/index.ts';
import { copyLog } from '../lib/log/admin/copy.ts';
import { dropLog } from '../lib/log/admin/drop.ts';
import { HeldLeases } from '../lib/log/admin/held-leases.ts';
import { TableRecords } from '../lib/log/admin/table-records.ts';
import { openPlace, type OpenedPlace } from '../lib/log/admin/place.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { readsOf } from '../lib/log/reads.ts';
import { COLUMN_NAMES, rowsFromArrow } from '../lib/schema.ts';
import { s3ClientConfig } from '../lib/storage/location.ts';
import type { EventRow } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { servers, useLeaseTable } from './support/servers.ts';

const { bucket } = servers;
const table = useLeaseTable('dgcl-drop');
const env = { ...process.env, DGCL_LEASE_TABLE: table };
const ddb = new DynamoDBClient({});
const s3 = new S3Client(s3ClientConfig());
afterAll(() => {
  ddb.destroy();
  s3.destroy();
});

const logs: CheckpointLog[] = [];
const places: OpenedPlace[] = [];
afterEach(async () => {
  for (const l of logs.splice(0)) await l.close().catch(() => undefined);
  for (const p of places.splice(0)) await p.close();
});

const newRoot = () => `s3://${bucket}/drop-${randomUUID().slice(0, 8)}`;

async function open(root: string, o: { owner?: string; slot?: number; mergeEveryCommits?: number } = {}): Promise<CheckpointLog> {
  const log = await openLog({ root, pipeline: 'p', experiment: 'e', env, leaseTtlMs: 3_600_000, mergeIdleMs: 0, mergeEveryCommits: 2, ...o });
  logs.push(log);
  return log;
}

async function place(root: string, o: { env?: Record<string, string | undefined>; experiment?: string } = {}): Promise<OpenedPlace> {
  const p = await openPlace({ root, pipeline: 'p', experiment: o.experiment ?? 'e', env: o.env ?? env });
  places.push(p);
  return p;
}

/** A log at `root` with `n` items written by one writer, closed; returns its id. */
async function written(root: string, n: number): Promise<string> {
  const w = await open(root, { owner: `writer-${n}`, slot: 0 });
  for (let i = 0; i < n; i++) await w.append([createBatch(`i${i}`), stepBatch(`i${i}`, 1)]);
  await w.close();
  logs.splice(logs.indexOf(w), 1);
  const p = await place(root);
  const record = await p.objects.get(CHOICE_KEY);
  expect(record, 'the fixture: records in the table').toMatch(/^table [0-9a-f-]{36} v2$/);
  return record!.split(' ')[1]!;
}

/** Every key of the table starting with `prefix` (its own scan, not the code under test's). */
async function keys(prefix: string): Promise<string[]> {
  const out: string[] = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const r = await ddb.send(new ScanCommand({ TableName: table, ConsistentRead: true, ...(start ? { ExclusiveStartKey: start } : {}) }));
    for (const i of r.Items ?? []) if (i.pk?.S?.startsWith(prefix)) out.push(i.pk.S);
    start = r.LastEvaluatedKey;
  } while (start);
  return out.sort();
}

async function objectsUnder(root: string): Promise<string[]> {
  const prefix = `${root.slice(`s3://${bucket}/`.length)}/`;
  const out: string[] = [];
  let token: string | undefined;
  do {
    const r = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of r.Contents ?? []) out.push(o.Key!);
    token = r.IsTruncated ? r.NextContinuationToken : undefined;
  } while (token);
  return out.sort();
}

async function lease(key: string): Promise<Record<string, AttributeValue> | undefined> {
  return (await ddb.send(new GetItemCommand({ TableName: table, Key: { pk: { S: key } }, ConsistentRead: true }))).Item;
}

describe('dropLog on S3 with the lease table', () => {
  it('deletes the objects and the records of this place (an earlier log here too), its own lease records, and keeps another root\'s log whole', async () => {
    const root = newRoot();
    // An earlier log at this place, deleted by hand (objects only): its records stay behind.
    const earlier = await written(root, 2);
    await (await place(root)).objects.deletePrefix('');
    const id = await written(root, 4);
    expect(id).not.toBe(earlier);
    const elsewhere = newRoot();
    const otherId = await written(elsewhere, 3);

    const mine = [...(await keys(`p/e/${earlier}/`)), ...(await keys(`p/e/${id}/`))];
    expect(mine.filter((k) => k.includes('/_dgcl/items/')), 'the fixture: one marker per item of both logs').toHaveLength(6);
    const objects = await objectsUnder(root);
    const theirs = await keys(`p/e/${otherId}/`);
    const theirObjects = await objectsUnder(elsewhere);

    // The log's own lease keys (scoped by its id) are ended as leases, the rest swept as records.
    const ownLeases = (k: string) => k.startsWith(`p/e/${id}/slot/`) || k === `p/e/${id}/maintainer`;
    const result = await dropLog(await place(root), { waitMs: 0 });
    expect(result).toEqual({ objects: objects.length, records: mine.filter((k) => !ownLeases(k)).length, leases: DEFAULT_SLOTS + 1 });
    expect(await objectsUnder(root)).toEqual([]);
    expect(await keys(`p/e/${earlier}/`)).toEqual([]);
    expect(await keys(`p/e/${id}/`)).toEqual([]);
    expect(await keys(`p/e/${otherId}/`)).toEqual(theirs);
    expect(await objectsUnder(elsewhere)).toEqual(theirObjects);
    expect(await lease(slotKey('p', 'e', 0, id)), 'its lease records went with it').toBeUndefined();
    // The other root's log is still writable: its records and leases are whole.
    const w = await open(elsewhere, { owner: 'after' });
    expect(await w.append([stepBatch('i0', 2)])).toMatchObject([{ itemId: 'i0', duplicate: false }]);

    expect(await dropLog(await place(root), { waitMs: 0 })).toEqual({ objects: 0, records: 0, leases: 0 });
  });

  it('refuses while a writer holds a slot, with another lease table, or with local leases, deleting nothing', async () => {
    const root = newRoot();
    const w = await open(root, { owner: 'live', slot: 2, mergeEveryCommits: 1000 });
    await w.append([createBatch('x')]);
    const id = (await (await place(root)).objects.get(CHOICE_KEY))!.split(' ')[1]!;
    const objects = await objectsUnder(root);
    // The log's records (its lease records aside: a refused drop takes and gives back leases).
    const recordsOf = async () => (await keys(`p/e/${id}/`)).filter((k) => !/\/(slot\/\d+|maintainer)$/.test(k));
    const records = await recordsOf();

    await expect(dropLog(await place(root), { waitMs: 200 })).rejects.toMatchObject({ code: 'LEASE_HELD', holder: { owner: 'live' } });
    const other = await otherLeaseTable();
    await expect(dropLog(await place(root, { env: { ...process.env, DGCL_LEASE_TABLE: other } }), { waitMs: 0 }), 'no sentinel in that table').rejects.toMatchObject({ code: 'CORRUPT' });
    const local = await openPlace({ root, pipeline: 'p', experiment: 'e', env, leases: new LocalLeaseStore({ dir: path.join(tmpdir(), `dgcl-drop-local-${randomUUID()}`) }) });
    places.push(local);
    await expect(dropLog(local, { waitMs: 0 })).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'leases' });
    expect(await objectsUnder(root)).toEqual(objects);
    expect(await recordsOf()).toEqual(records);
  });
});

describe('dropLog of a copy made by hand', () => {
  it('deletes the copy\'s objects and leaves the original\'s records, so the original stays writable', async () => {
    // Local roots with leases in the table (what an S3 root chooses): a copy is a cp -r away.
    const leases = new DynamoLeaseStore({ client: ddb, table });
    const records = new TableRecords({ client: ddb, table });
    const a = mkdtempSync(path.join(tmpdir(), 'dgcl-drop-orig-'));
    const b = mkdtempSync(path.join(tmpdir(), 'dgcl-drop-copy-'));
    try {
      const pipeline = `p-${randomUUID().slice(0, 8)}`;
      const w = await openLog({ root: a, pipeline, experiment: 'e', leases, leaseTtlMs: 3_600_000, mergeIdleMs: 0 });
      logs.push(w);
      const [first] = await w.append([createBatch('x'), createBatch('y')]);
      await w.close();
      logs.splice(logs.indexOf(w), 1);
      cpSync(path.join(a, 'datagen_checkpoints'), path.join(b, 'datagen_checkpoints'), { recursive: true });
      const id = (await (await placeAt(a, pipeline, leases, records)).objects.get(CHOICE_KEY))!.split(' ')[1]!;
      const original = await keys(`${pipeline}/e/${id}/`);
      expect(original.filter((k) => k.includes('/_dgcl/items/')), 'the fixture: markers of x and y').toHaveLength(2);

      const copy = await placeAt(b, pipeline, leases, records);
      const result = await dropLog(copy, { waitMs: 0 });
      expect(result.records).toBe(0);
      expect(existsSync(path.join(b, 'datagen_checkpoints', pipeline, 'e'))).toBe(false);
      expect(await keys(`${pipeline}/e/${id}/`)).toEqual(original);
      const again = await openLog({ root: a, pipeline, experiment: 'e', leases, mergeIdleMs: 0 });
      logs.push(again);
      expect(await again.append([createBatch('x')]), 'the batch again: answered by its claim').toEqual([{ ...first, duplicate: true }]);
      await expect(again.append([createBatch('x', { runId: 'r2' })]), 'x\'s marker is there').rejects.toMatchObject({ code: 'ITEM_EXISTS' });
      expect(await again.append([stepBatch('x', 1)])).toMatchObject([{ itemId: 'x', duplicate: false }]);
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });
});

async function placeAt(root: string, pipeline: string, leases: DynamoLeaseStore, records: TableRecords): Promise<OpenedPlace> {
  const p = await openPlace({ root, pipeline, experiment: 'e', leases, records });
  places.push(p);
  return p;
}

describe('lease records named by a log id', () => {
  it('are deleted once released; a shared one is only released', async () => {
    const leases = new DynamoLeaseStore({ client: ddb, table });
    const records = new TableRecords({ client: ddb, table });
    const scoped = `p/e/${randomUUID()}/slot/0`;
    const shared = `p/e-${randomUUID().slice(0, 8)}/slot/0`;
    const keys = [
      { key: scoped, what: 'writer slot 0', scoped: true },
      { key: shared, what: 'writer slot 0', scoped: false },
    ];
    const held = await HeldLeases.take(leases, keys, { owner: 'dropper', ttlMs: 60_000, waitMs: 0, clock: systemClock });
    expect(await held.end(records, () => true)).toBe(2);
    expect(await lease(scoped)).toBeUndefined();
    expect((await lease(shared))?.owner?.S).toBe('');
    // Taken again by a writer after its release, a record is the writer's: it stays.
    const taken = await leases.acquire(scoped, 'writer', 60_000);
    expect(await records.deleteReleasedLease(scoped)).toBe(false);
    expect((await lease(scoped))?.owner?.S).toBe('writer');
    await leases.release(taken);
  });
});

describe('copyLog on S3', () => {
  it('copies every visible event to another root', async () => {
    const root = newRoot();
    await written(root, 3);
    const to = newRoot();
    const source = await place(root);
    const target = await place(to);
    let called = 0;
    const r = await copyLog(source, target, { initRecords: async () => void called++ });
    expect(called).toBe(1);
    const read = async (at: string) => {
      const log = await openLog({ root: at, pipeline: 'p', experiment: 'e', env });
      logs.push(log);
      return readsOf(log).scanEvents({ columns: COLUMN_NAMES }, () => {
        const out = new Map<string, EventRow>();
        return {
          batch(b: arrow.RecordBatch, keep: (r: number) => boolean) {
            rowsFromArrow({ numRows: b.numRows, getChild: (n: string) => b.getChild(n) } as unknown as arrow.Table).forEach((row, i) => keep(i) && out.set(row.event_id, row));
          },
          done: () => out,
        };
      });
    };
    const [a, b] = [await read(root), await read(to)];
    expect(r.events).toBe(a.size);
    expect(b).toEqual(a);
  });
});

/** A second lease table, made now. */
async function otherLeaseTable(): Promise<string> {
  const name = `dgcl-drop-other-${randomUUID().slice(0, 8)}`;
  await createLeaseTable(ddb, name);
  return name;
}
