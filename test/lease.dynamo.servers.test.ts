/**
 * DynamoLeaseStore against DynamoDB Local at AWS_ENDPOINT_URL_DYNAMODB (started by
 * scripts/services/dynamodb.sh). Never skipped: a missing endpoint fails loudly. Every test
 * gets its own fresh table.
 */
import { randomUUID } from 'node:crypto';
import {
  DeleteTableCommand,
  DescribeTimeToLiveCommand,
  DynamoDBClient,
  GetItemCommand,
  ThrottlingException,
} from '@aws-sdk/client-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { ConflictError, FencedError, InternalError, NotFoundError, UnavailableError } from '../lib/errors.ts';
import {
  DEFAULT_TTL_GRACE_MS,
  DynamoLeaseStore,
  classifyDynamoError,
  createLeaseTable,
  ttlFor,
} from '../lib/lease/dynamo.ts';
import { leaseStoreConformance } from './conformance/lease.ts';

const endpoint = process.env.AWS_ENDPOINT_URL_DYNAMODB;
if (!endpoint) {
  throw new Error(
    'AWS_ENDPOINT_URL_DYNAMODB is not set: start DynamoDB Local with `bash scripts/services/dynamodb.sh start` ' +
      'and run with AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8011 AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x',
  );
}

const client = new DynamoDBClient({
  endpoint,
  region: process.env.AWS_REGION ?? 'us-east-1',
  credentials: {
    accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? 'x',
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? 'x',
  },
});
const tables: string[] = [];

async function freshTable(): Promise<string> {
  const table = `dgcl-lease-${randomUUID().slice(0, 8)}`;
  tables.push(table);
  await createLeaseTable(client, table);
  return table;
}

async function dropTable(table: string): Promise<void> {
  await client.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
}

afterAll(async () => {
  for (const t of tables) await dropTable(t);
  client.destroy();
});

leaseStoreConformance('dynamodb', {
  async create() {
    const table = await freshTable();
    // DynamoDB TTL runs on the server's real clock: start the manual clock at real time so
    // `ttl` (store clock + grace) is never in the past and items are never deleted mid-test.
    const clock = new ManualClock(Date.now());
    return { store: new DynamoLeaseStore({ client, table, clock }), clock, destroy: () => dropTable(table) };
  },
});

describe('DynamoLeaseStore specifics', () => {
  it('createLeaseTable is idempotent and enables TTL on `ttl`', async () => {
    const table = await freshTable();
    await createLeaseTable(client, table);
    await Promise.all([createLeaseTable(client, table), createLeaseTable(client, table)]);
    const ttl = await client.send(new DescribeTimeToLiveCommand({ TableName: table }));
    expect(ttl.TimeToLiveDescription?.AttributeName).toBe('ttl');
    expect(['ENABLED', 'ENABLING']).toContain(ttl.TimeToLiveDescription?.TimeToLiveStatus);
  });

  it('stores every attribute; `ttl` stays a grace beyond max(expiry, now), also after release', async () => {
    const table = await freshTable();
    const clock = new ManualClock(Date.now());
    const store = new DynamoLeaseStore({ client, table, clock });
    const graceSec = DEFAULT_TTL_GRACE_MS / 1000;
    const raw = async () =>
      (await client.send(new GetItemCommand({ TableName: table, Key: { pk: { S: 'k' } }, ConsistentRead: true }))).Item;
    const lease = await store.acquire('k', 'a', 30_000);
    expect(await raw()).toEqual({
      pk: { S: 'k' },
      owner: { S: 'a' },
      epoch: { N: '1' },
      expiresAtMs: { N: String(lease.expiresAtMs) },
      ttl: { N: String(Math.ceil(lease.expiresAtMs / 1000) + graceSec) },
      updatedAtMs: { N: String(clock.nowMs()) },
    });
    clock.advance(5_000);
    await store.release(lease);
    const released = await raw();
    expect(released?.owner).toEqual({ S: '' });
    expect(released?.expiresAtMs).toEqual({ N: '0' });
    expect(released?.epoch).toEqual({ N: '1' });
    expect(Number(released?.ttl?.N)).toBe(ttlFor(0, clock.nowMs(), graceSec));
    expect(Number(released?.ttl?.N)).toBeGreaterThan(clock.nowMs() / 1000 + graceSec - 1);
  });

  it('ttlGraceMs: null writes no ttl attribute', async () => {
    const table = await freshTable();
    const store = new DynamoLeaseStore({ client, table, ttlGraceMs: null });
    const lease = await store.acquire('k', 'a', 30_000);
    await store.renew(lease, 30_000);
    await store.release(lease);
    const item = (await client.send(new GetItemCommand({ TableName: table, Key: { pk: { S: 'k' } }, ConsistentRead: true })))
      .Item;
    expect(item?.ttl).toBeUndefined();
    expect(item?.epoch).toEqual({ N: '1' });
  });

  it('a missing table is NotFoundError; a server that does not answer is UnavailableError', async () => {
    const missing = new DynamoLeaseStore({ client, table: `dgcl-missing-${randomUUID().slice(0, 8)}` });
    await expect(missing.acquire('k', 'a', 1000)).rejects.toBeInstanceOf(NotFoundError);
    await expect(missing.read('k')).rejects.toBeInstanceOf(NotFoundError);
    const dead = new DynamoDBClient({
      endpoint: 'http://127.0.0.1:9', // discard port: connection refused
      region: 'us-east-1',
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
      maxAttempts: 1,
    });
    try {
      const store = new DynamoLeaseStore({ client: dead, table: 'whatever' });
      await expect(store.acquire('k', 'a', 1000)).rejects.toBeInstanceOf(UnavailableError);
      await expect(store.read('k')).rejects.toBeInstanceOf(UnavailableError);
      await expect(store.assertCurrent({ key: 'k', owner: 'a', epoch: 1, expiresAtMs: 0 })).rejects.toBeInstanceOf(
        UnavailableError,
      );
    } finally {
      dead.destroy();
    }
  });

  it('classifies SDK errors: throttling -> Unavailable, validation -> Internal', () => {
    const throttled = new ThrottlingException({ message: 'slow down', $metadata: {} });
    expect(classifyDynamoError(throttled, 'x')).toBeInstanceOf(UnavailableError);
    const validation = Object.assign(new Error('bad'), { name: 'ValidationException', $fault: 'client', $metadata: {} });
    expect(classifyDynamoError(validation, 'x')).toBeInstanceOf(InternalError);
    const fenced = new FencedError('f');
    expect(classifyDynamoError(fenced, 'x')).toBe(fenced);
    expect(new ConflictError('c').retryable).toBe(true);
  });
});
