/**
 * Where a log keeps its item markers and claims (lib/coord/choose.ts), decided once and recorded
 * in the log: a new log with a lease table keeps them in the table; a log with data written
 * before (its markers are objects) keeps objects; a log recorded as `table` refuses writers
 * without the table; a rejected first append writes nothing, not even the record. Local roots
 * (real Lance) with leases on DynamoDB Local: the same choice an S3 root makes.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DeleteItemCommand, DeleteTableCommand, DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CHOICE_KEY } from '../lib/coord/choose.ts';
import { CorruptError, InvalidInputError } from '../lib/errors.ts';
import { createLeaseTable, DynamoLeaseStore, openLog } from '../lib/index.ts';
import { CLAIMS_DIR, ITEMS_DIR } from '../lib/log/layout.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logLocation, parseRoot } from '../lib/storage/location.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { tree } from './support/tree.ts';

const ddb = new DynamoDBClient({});
const table = `dgcl-choice-${randomUUID().slice(0, 8)}`;
let leases: DynamoLeaseStore;
beforeAll(async () => {
  await createLeaseTable(ddb, table);
  leases = new DynamoLeaseStore({ client: ddb, table });
});
afterAll(async () => {
  await ddb.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
  ddb.destroy();
});

const open: CheckpointLog[] = [];
afterEach(async () => {
  for (const l of open.splice(0)) await l.close().catch(() => undefined);
});

function experiment() {
  const rootDir = mkdtempSync(path.join(tmpdir(), 'dgcl-choice-'));
  const root = `file://${rootDir}`;
  const name = `e-${randomUUID().slice(0, 8)}`;
  const loc = logLocation(parseRoot(root), 'p', name);
  if (loc.kind !== 'file') throw new Error('a local root');
  const objects = new LocalObjectStore(loc.dir);
  const newLog = async (owner: string, o: { local?: boolean; objects?: boolean; slot?: number } = {}) => {
    const log = await openLog({
      root,
      pipeline: 'p',
      experiment: name,
      owner,
      ...(o.slot !== undefined ? { slot: o.slot } : {}),
      ...(o.objects ? { coordination: 'objects' as const } : {}),
      leases: o.local ? new LocalLeaseStore({ dir: path.join(rootDir, '.dgcl', 'leases') }) : leases,
    });
    open.push(log);
    return log;
  };
  return { name, dir: loc.dir, objects, newLog };
}

/** Every item of the table under `p/<experiment>/`, as pk -> body. */
async function tableRecords(experiment: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let start: Record<string, import('@aws-sdk/client-dynamodb').AttributeValue> | undefined;
  do {
    const page = await ddb.send(new ScanCommand({ TableName: table, ConsistentRead: true, ...(start ? { ExclusiveStartKey: start } : {}) }));
    for (const it of page.Items ?? []) if (it.pk?.S?.startsWith(`p/${experiment}/`) && it.body?.S !== undefined) out.set(it.pk.S, it.body.S);
    start = page.LastEvaluatedKey;
  } while (start);
  return out;
}

describe('where a log keeps its item markers and claims', () => {
  it('a new log with a lease table: the table, under the log id its record names; no marker or claim object', async () => {
    const x = experiment();
    const a = await x.newLog('a');
    const [first] = await a.append([createBatch('i1')]);
    const record = await x.objects.get(CHOICE_KEY);
    // A new log's record scopes its lease keys by its id too (` v2`).
    expect(record).toMatch(/^table [0-9a-f-]{36} v2$/);
    const id = record!.split(' ')[1]!;
    expect(await x.objects.list(ITEMS_DIR)).toEqual([]);
    expect(await x.objects.list(CLAIMS_DIR)).toEqual([]);
    const recs = await tableRecords(x.name);
    const keys = [...recs.keys()].map((k) => k.slice(`p/${x.name}/${id}/`.length));
    expect(keys.filter((k) => k.startsWith(`${ITEMS_DIR}/`))).toHaveLength(1);
    expect(keys.filter((k) => k.startsWith(`${CLAIMS_DIR}/`))).toEqual([`${CLAIMS_DIR}/${first!.checkpointId}.json`]);
    expect([...recs.keys()].every((k) => k.startsWith(`p/${x.name}/${id}/`))).toBe(true);
    // A second writer delivering the same checkpoint at once gets the first ack as a duplicate.
    const b = await x.newLog('b');
    const [again] = await b.append([createBatch('i1')]);
    expect(again).toMatchObject({ checkpointId: first!.checkpointId, firstSeq: first!.firstSeq, lastSeq: first!.lastSeq, duplicate: true });
  });

  it('a log with data written before the table held its records stays on objects, and continues its items', async () => {
    const x = experiment();
    // Written with its markers and claims as objects, then the record removed: as a log written
    // by a version before the choice record existed (same lease table: epochs go on).
    const old = await x.newLog('old', { objects: true });
    await old.append([createBatch('i1')]);
    const [s1] = await old.append([stepBatch('i1', 1)]);
    await old.close();
    rmSync(path.join(x.dir, ...CHOICE_KEY.split('/')));
    expect(await x.objects.list(ITEMS_DIR)).toHaveLength(1);
    const a = await x.newLog('a');
    const [s2] = await a.append([stepBatch('i1', 2)]);
    expect(await x.objects.get(CHOICE_KEY)).toMatch(/^objects [0-9a-f-]{36}$/);
    expect(s2!.firstSeq).toBe(s1!.lastSeq + 1);
    expect(s2!.duplicate).toBe(false);
    expect((await a.fold('i1')).lastSeq).toBe(s2!.lastSeq);
    // In the table: only the two ids' sentinels (the log's first record and the one after it went), no marker or claim.
    expect([...(await tableRecords(x.name)).keys()].map((k) => k.split('/').slice(3).join('/'))).toEqual(['_dgcl/log', '_dgcl/log']);
  });

  it('a log recorded as kept in the table refuses a writer without the table: INVALID_INPUT, nothing written', async () => {
    const x = experiment();
    const a = await x.newLog('a');
    await a.append([createBatch('i1')]);
    await a.close();
    const before = tree(x.dir);
    const local = await x.newLog('local', { local: true });
    const err = await local.append([stepBatch('i1', 1)]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).message).toMatch(/lease table/);
    expect(tree(x.dir).filter((p) => !p.startsWith('..'))).toEqual(before);
  });

  it('a record that is neither: CORRUPT, and no marker or claim is written anywhere', async () => {
    const x = experiment();
    await x.objects.putIfAbsent(CHOICE_KEY, 'somewhere else');
    const a = await x.newLog('a');
    await expect(a.append([createBatch('i1')])).rejects.toBeInstanceOf(CorruptError);
    expect(await x.objects.list(ITEMS_DIR)).toEqual([]);
    expect(await tableRecords(x.name)).toEqual(new Map());
  });

  it('a rejected first append of a new log writes nothing: no choice record, no table record', async () => {
    const x = experiment();
    const a = await x.newLog('a');
    // Refused by sequencing (the validation pass after the marker read), not by the batch parser.
    await expect(a.append([stepBatch('nobody', 1)])).rejects.toMatchObject({ code: 'ITEM_NOT_FOUND' });
    expect(await x.objects.get(CHOICE_KEY)).toBeNull();
    expect(await tableRecords(x.name)).toEqual(new Map());
  });

  it('a lease record gone from the table (TTL) restarts its epochs: the slot is refused (CORRUPT), nothing written', async () => {
    const x = experiment();
    const a = await x.newLog('a', { slot: 1 });
    await a.append([createBatch('i1')]);
    await a.close(); // seals epoch 1 of slot 1
    const id = (await x.objects.get(CHOICE_KEY))!.split(' ')[1]!;
    await ddb.send(new DeleteItemCommand({ TableName: table, Key: { pk: { S: `p/${x.name}/${id}/slot/1` } } }));
    const before = tree(x.dir);
    const b = await x.newLog('b', { slot: 1 });
    await expect(b.append([stepBatch('i1', 1)])).rejects.toMatchObject({ code: 'CORRUPT', message: expect.stringContaining('already sealed') });
    expect(tree(x.dir)).toEqual(before);
  });

  it('a log deleted and made again at the same place does not meet the old claims', async () => {
    const x = experiment();
    const a = await x.newLog('a');
    const [first] = await a.append([createBatch('i1')]);
    await a.append([stepBatch('i1', 1)]);
    await a.close();
    rmSync(x.dir, { recursive: true });
    const b = await x.newLog('b');
    // The same checkpoint again, within the claim retention: a new log's first ack, not the old one's.
    const [again] = await b.append([createBatch('i1')]);
    expect(again).toMatchObject({ checkpointId: first!.checkpointId, firstSeq: 1, duplicate: false });
    const [step] = await b.append([stepBatch('i1', 1)]);
    expect(step!.firstSeq).toBe(again!.lastSeq + 1);
    expect(step!.duplicate).toBe(false);
  });
});
