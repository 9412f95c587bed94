/**
 * Repair and adoption on RGW + DynamoDB Local (lib/log/admin/rehome.ts; docs/operations.md,
 * "Repairing a log", "A lost or new lease table"): a lease table lost, a log copied to another
 * prefix as `aws s3 sync` does, logs of the same names under two roots sharing one table, and a
 * writer frozen across a repair.
 */
import { randomUUID } from 'node:crypto';
import { CopyObjectCommand, DeleteObjectsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ManualClock, systemClock, type Clock } from '../lib/clock.ts';
import { createLeaseTable, DynamoLeaseStore, openLog } from '../lib/index.ts';
import type { LanceCheckpointLog } from '../lib/log/log.ts';
import { s3ClientConfig } from '../lib/storage/location.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { expectAcksVisible, settle } from './support/race-kit.ts';
import { servers } from './support/servers.ts';

const TTL = 60_000;
const s3 = new S3Client(s3ClientConfig(process.env));
const ddb = new DynamoDBClient({ endpoint: process.env.AWS_ENDPOINT_URL_DYNAMODB });
const opened: LanceCheckpointLog[] = [];

afterEach(async () => {
  for (const l of opened.splice(0)) await l.close().catch(() => undefined);
});
afterAll(() => {
  s3.destroy();
  ddb.destroy();
});

async function newTable(): Promise<string> {
  const table = `dgcl-rehome-${randomUUID().slice(0, 8)}`;
  await createLeaseTable(ddb, table);
  return table;
}

const newRoot = () => `s3://${servers.bucket}/rehome-${randomUUID().slice(0, 8)}`;

async function open(root: string, table: string, o: { owner: string; clock?: Clock; slot?: number }): Promise<LanceCheckpointLog> {
  const clock = o.clock ?? systemClock;
  const log = (await openLog({
    root,
    pipeline: 'p',
    experiment: 'e',
    owner: o.owner,
    clock,
    slots: 2,
    ...(o.slot !== undefined ? { slot: o.slot } : {}),
    leaseTtlMs: TTL,
    leases: new DynamoLeaseStore({ client: ddb, table, clock }),
  })) as LanceCheckpointLog;
  opened.push(log);
  return log;
}

/** What `aws s3 sync` does: every object under one prefix copied under another. */
async function syncPrefix(from: string, to: string): Promise<void> {
  const fromPrefix = from.slice(`s3://${servers.bucket}/`.length);
  const toPrefix = to.slice(`s3://${servers.bucket}/`.length);
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: servers.bucket, Prefix: `${fromPrefix}/`, ContinuationToken: token }));
    for (const o of page.Contents ?? []) {
      await s3.send(new CopyObjectCommand({ Bucket: servers.bucket, Key: `${toPrefix}/${o.Key!.slice(fromPrefix.length + 1)}`, CopySource: `${servers.bucket}/${o.Key!}` }));
    }
    token = page.NextContinuationToken;
  } while (token);
}

/** Every object under a root deleted (a restore's first step). */
async function deletePrefix(root: string): Promise<void> {
  const prefix = root.slice(`s3://${servers.bucket}/`.length);
  for (;;) {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: servers.bucket, Prefix: `${prefix}/` }));
    const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
    if (keys.length === 0) return;
    await s3.send(new DeleteObjectsCommand({ Bucket: servers.bucket, Delete: { Objects: keys } }));
  }
}

const codeOf = (o: { ok: boolean; error?: unknown }) => (o.ok ? 'ok' : ((o.error as { code?: string }).code ?? String(o.error)));

describe('repair and adoption on S3 with a lease table', () => {
  it('a lost lease table: writers refuse, `repair` with the new table makes the log writable at its seqs', async () => {
    const root = newRoot();
    const W = await open(root, await newTable(), { owner: 'w' });
    const acks: Ack[] = [...(await W.append([createBatch('a')])), ...(await W.append([stepBatch('a', 1)]))];
    await W.close();
    const table = await newTable(); // the old one is gone (cdk destroy + deploy, another account)
    const refused = await settle((await open(root, table, { owner: 'x' })).append([stepBatch('a', 2)]));
    expect(codeOf(refused)).toBe('CORRUPT');
    expect(String((refused as { error: Error }).error.message)).toMatch(/dgcl repair/);
    const report = await (await open(root, table, { owner: 'r' })).repair();
    expect({ markers: report.markers, claims: report.claims, record: report.record }).toEqual({ markers: 1, claims: 2, record: `table ${report.logId} v2` });
    const X = await open(root, table, { owner: 'x2' });
    const [again] = await X.append([stepBatch('a', 1)]);
    expect({ duplicate: again!.duplicate, firstSeq: again!.firstSeq }).toEqual({ duplicate: true, firstSeq: acks[1]!.firstSeq });
    const [next] = await X.append([stepBatch('a', 2)]);
    expect(next!.firstSeq).toBe(acks[1]!.lastSeq + 1);
    await expectAcksVisible(X, [...acks, next!], 'after the repair');
  }, 120_000);

  it('a copy made as `aws s3 sync` does is refused, then adopted; copy and origin are written side by side with one table', async () => {
    const table = await newTable();
    const origin = newRoot();
    const W = await open(origin, table, { owner: 'w' });
    const acks = await W.append([createBatch('a')]);
    await W.close();
    const copy = newRoot();
    await syncPrefix(origin, copy);
    const refused = await settle((await open(copy, table, { owner: 'c' })).append([stepBatch('a', 1)]));
    expect(codeOf(refused)).toBe('CORRUPT');
    expect(String((refused as { error: Error }).error.message)).toMatch(/is a copy of .*dgcl adopt/);
    await expect((await open(copy, table, { owner: 'r' })).repair(), 'repair refuses a copy').rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await (await open(copy, table, { owner: 'r2' })).adopt();
    const [c] = await (await open(copy, table, { owner: 'c2', slot: 0 })).append([stepBatch('a', 1)]);
    const [o] = await (await open(origin, table, { owner: 'o', slot: 0 })).append([stepBatch('a', 1)]);
    expect([c!.firstSeq, o!.firstSeq], 'both continue a at the same seq, each in its own log').toEqual([acks[0]!.lastSeq + 1, acks[0]!.lastSeq + 1]);
    expect((await (await open(origin, table, { owner: 'reader' })).trajectory('a')).length, 'the origin holds only its own events').toBe(o!.lastSeq);
  }, 120_000);

  it('a log restored in place from a backup, then adopted: a reader from before does not read the lost history; writes continue at the restored seqs', async () => {
    const table = await newTable();
    const root = newRoot();
    const W = await open(root, table, { owner: 'w', slot: 0 });
    const kept = await W.append([createBatch('a')]);
    await W.close();
    const backup = newRoot();
    await syncPrefix(root, backup);
    const reader = await open(root, table, { owner: 'reader' });
    const before = await open(root, table, { owner: 'before', slot: 1 });
    const lost = await before.append([stepBatch('a', 1), createBatch('gone')]);
    expect((await reader.fold('a')).lastSeq).toBe(lost[0]!.lastSeq);
    await before.close();
    await deletePrefix(root);
    await syncPrefix(backup, root);
    await (await open(root, table, { owner: 'r' })).adopt();
    expect((await reader.fold('a')).lastSeq, 'the reader from before reads the restored log').toBe(kept[0]!.lastSeq);
    await expect(reader.fold('gone')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const [next] = await (await open(root, table, { owner: 'after' })).append([stepBatch('a', 1)]);
    expect({ firstSeq: next!.firstSeq, duplicate: next!.duplicate }).toEqual({ firstSeq: kept[0]!.lastSeq + 1, duplicate: false });
  }, 120_000);

  it('logs of the same names under two roots share one lease table without sharing a slot', async () => {
    const table = await newTable();
    const A = await open(newRoot(), table, { owner: 'a', slot: 0 });
    const B = await open(newRoot(), table, { owner: 'b', slot: 0 });
    await A.append([createBatch('x')]);
    // B's pinned slot 0 is taken at once: A's lease key names A's log id, not only p/e.
    const started = Date.now();
    await B.append([createBatch('x')]);
    expect(Date.now() - started, 'B did not wait for A\'s slot').toBeLessThan(TTL / 2);
    expect([A.writerEpoch, B.writerEpoch]).toEqual(['s00-e000001', 's00-e000001']);
  }, 120_000);

  it('a writer frozen across a repair takes its next slot in the new records, never sealing the epoch of a writer that started after', async () => {
    const table = await newTable();
    const root = newRoot();
    const wClock = new ManualClock(Date.now());
    const W = await open(root, table, { owner: 'w', clock: wClock, slot: 0 });
    await W.append([createBatch('a')]);
    // W freezes (its clock stands still); for everyone else its lease runs out.
    const later = new ManualClock(wClock.nowMs() + 2 * TTL);
    await (await open(root, table, { owner: 'r', clock: later })).repair();
    const X = await open(root, table, { owner: 'x', clock: later, slot: 0 });
    const xAcks = [...(await X.append([createBatch('x')]))];
    // W thaws and writes again, as a caller retries: refused while it finds out, then it takes slot 0 again.
    let w = await settle(W.append([createBatch('w')]));
    for (let i = 0; i < 3 && !w.ok && ['FENCED', 'UNAVAILABLE'].includes(codeOf(w)); i++) w = await settle(W.append([createBatch('w')]));
    xAcks.push(...(await X.append([stepBatch('x', 1)])));
    await expectAcksVisible(await open(root, table, { owner: 'reader', clock: later }), xAcks, 'the acks of the writer that started after the repair');
    expect(codeOf(w), 'W waits for slot 0 of the new records (held by X) and gives up').toBe('LEASE_HELD');
  }, 180_000);
});
