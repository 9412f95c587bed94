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
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import {
  ConflictError,
  FencedError,
  InternalError,
  LeaseHeldError,
  NotFoundError,
  UnavailableError,
} from '../lib/errors.ts';
import {
  DEFAULT_TTL_GRACE_MS,
  DynamoLeaseStore,
  createLeaseTable,
  ttlFor,
} from '../lib/lease/dynamo.ts';
import { classifyDynamoError } from '../lib/lease/dynamo-errors.ts';
import { leaseStoreConformance } from './conformance/lease.ts';
import { DYNAMO_LOST_ANSWER, dynamoOp, dynamoTries, type FaultDecision, type FaultRequest, type HttpFaultProxy, startHttpFaultProxy } from './support/http-fault-proxy.ts';

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
      // the acquire call's own token (rules.isOwnAcquire), a fresh one per call
      acquireToken: { S: expect.stringMatching(/^[0-9a-f-]{36}$/) },
    });
    clock.advance(5_000);
    await store.release(lease);
    const released = await raw();
    expect(released?.owner).toEqual({ S: '' });
    expect(released?.expiresAtMs).toEqual({ N: '0' });
    expect(released?.epoch).toEqual({ N: '1' });
    expect(released?.acquireToken).toBeUndefined(); // a released record is nobody's acquire
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

  it('classifies SDK errors: throttling -> Unavailable, validation -> Internal, access denied -> PermissionDenied', () => {
    const throttled = new ThrottlingException({ message: 'slow down', $metadata: {} });
    expect(classifyDynamoError(throttled, 'x')).toBeInstanceOf(UnavailableError);
    const validation = Object.assign(new Error('bad'), { name: 'ValidationException', $fault: 'client', $metadata: {} });
    expect(classifyDynamoError(validation, 'x')).toBeInstanceOf(InternalError);
    const refused = Object.assign(new Error('not authorized to perform: dynamodb:GetItem'), { name: 'AccessDeniedException', $fault: 'client', $metadata: { httpStatusCode: 400 } });
    expect(classifyDynamoError(refused, 'lease get of "k" in table t')).toMatchObject({ code: 'PERMISSION_DENIED', retryable: false, path: 'lease get of "k" in table t' });
    const fenced = new FencedError('f');
    expect(classifyDynamoError(fenced, 'x')).toBe(fenced);
    expect(new ConflictError('c').retryable).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// "The request landed, the answer was lost": a proxy in front of DynamoDB Local forwards a
// request, waits for the server's answer, drops it and answers 500, so the SDK resends a write
// the server already applied. Every lease operation must still end as if it ran once.

describe('DynamoLeaseStore when an answer is lost and the SDK resends', () => {
  let proxy: HttpFaultProxy;
  let proxied: DynamoDBClient;

  beforeAll(async () => {
    proxy = await startHttpFaultProxy({
      target: endpoint!,
      lostAnswer: DYNAMO_LOST_ANSWER,
    });
    proxied = new DynamoDBClient({
      endpoint: proxy.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
      maxAttempts: 3, // pinned: the tests count the resends
    });
  });
  afterEach(() => proxy.setScript(undefined));
  afterAll(async () => {
    proxied?.destroy();
    await proxy?.close();
  });

  const op = dynamoOp;

  /** Loses the answer to the first request of kind `kind`; forwards everything else. */
  function loseFirst(kind: string): void {
    let lost = false;
    proxy.setScript((r): FaultDecision => {
      if (!lost && op(r) === kind) {
        lost = true;
        return 'forward-then-fail';
      }
      return 'forward';
    });
  }

  const tries = (kind: string) => dynamoTries(proxy, kind);

  async function scene() {
    const table = await freshTable();
    const clock = new ManualClock(Date.now());
    return {
      store: new DynamoLeaseStore({ client: proxied, table, clock }),
      direct: new DynamoLeaseStore({ client, table, clock }),
      clock,
    };
  }

  it('acquire: the resend meets its own landed write and returns that lease, not LeaseHeldError', async () => {
    const { store, direct, clock } = await scene();
    loseFirst('UpdateItem');
    const lease = await store.acquire('k', 'a', 30_000);
    // the first try created the lease at epoch 1; the resend failed its condition on it
    expect(tries('UpdateItem')).toEqual([{ status: 200 }, { status: 400, error: 'ConditionalCheckFailedException' }]);
    expect(lease).toEqual({ key: 'k', owner: 'a', epoch: 1, expiresAtMs: clock.nowMs() + 30_000 });
    expect(await direct.read('k')).toEqual(lease);
    await direct.assertCurrent(lease);
    // recognising its own write is per call: a second acquire by the same owner is refused
    proxy.setScript(undefined);
    await expect(store.acquire('k', 'a', 30_000)).rejects.toBeInstanceOf(LeaseHeldError);
    // and the lease works as any other: renew, release, then the next epoch
    await store.renew(lease, 30_000);
    await store.release(lease);
    expect((await store.acquire('k', 'b', 30_000)).epoch).toBe(2);
  });

  it('acquire: every answer lost (the SDK gives up) yet the first try landed: one read finds the lease', async () => {
    const { store, direct, clock } = await scene();
    proxy.setScript((r) => (op(r) === 'UpdateItem' ? 'forward-then-fail' : 'forward'));
    const lease = await store.acquire('k', 'a', 30_000);
    expect(tries('UpdateItem')).toEqual([
      { status: 200 },
      { status: 400, error: 'ConditionalCheckFailedException' },
      { status: 400, error: 'ConditionalCheckFailedException' },
    ]);
    expect(tries('GetItem')).toEqual([{ status: 200 }]);
    expect(lease).toEqual({ key: 'k', owner: 'a', epoch: 1, expiresAtMs: clock.nowMs() + 30_000 });
    expect(await direct.read('k')).toEqual(lease);
    // nothing landed (the server never saw the write): the SDK's error, the key untouched
    proxy.setScript((r) => (op(r) === 'UpdateItem' ? { status: 500, body: '{}' } : 'forward'));
    await expect(store.acquire('k2', 'a', 30_000)).rejects.toBeInstanceOf(UnavailableError);
    expect(tries('GetItem')).toEqual([{ status: 200 }]);
    expect(await direct.read('k2')).toBeNull();
  });

  it('acquire of a taken key: a resend that finds another holder is still LeaseHeldError', async () => {
    const { store, direct } = await scene();
    const theirs = await direct.acquire('k', 'a', 30_000);
    loseFirst('UpdateItem');
    const err = await store.acquire('k', 'a', 30_000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaseHeldError);
    expect((err as LeaseHeldError).holder).toEqual(theirs);
    expect(tries('UpdateItem')).toEqual([
      { status: 400, error: 'ConditionalCheckFailedException' },
      { status: 400, error: 'ConditionalCheckFailedException' },
    ]);
  });

  it('acquire over an expired holder: the resend returns the lease its first try took', async () => {
    const { store, direct, clock } = await scene();
    const old = await direct.acquire('k', 'a', 1_000);
    clock.advance(1_000);
    loseFirst('UpdateItem');
    const lease = await store.acquire('k', 'b', 30_000);
    expect(lease).toMatchObject({ owner: 'b', epoch: old.epoch + 1 });
    expect(tries('UpdateItem')).toEqual([{ status: 200 }, { status: 400, error: 'ConditionalCheckFailedException' }]);
    expect(await direct.read('k')).toEqual(lease);
    await expect(direct.assertCurrent(old)).rejects.toBeInstanceOf(FencedError);
  });

  it('renew: the resend of a landed renewal succeeds (not FencedError) and the expiry is the new one', async () => {
    const { store, direct, clock } = await scene();
    const lease = await direct.acquire('k', 'a', 10_000);
    clock.advance(5_000);
    loseFirst('UpdateItem');
    const renewed = await store.renew(lease, 10_000);
    expect(tries('UpdateItem')).toEqual([{ status: 200 }, { status: 200 }]);
    expect(renewed).toEqual({ ...lease, expiresAtMs: clock.nowMs() + 10_000 });
    expect(await direct.read('k')).toEqual(renewed);
  });

  it('release: the resend of a landed release is a no-op; the key is free at the same epoch', async () => {
    const { store, direct } = await scene();
    const lease = await direct.acquire('k', 'a', 10_000);
    loseFirst('UpdateItem');
    await store.release(lease);
    expect(tries('UpdateItem')).toEqual([{ status: 200 }, { status: 400, error: 'ConditionalCheckFailedException' }]);
    expect(await direct.read('k')).toEqual({ key: 'k', owner: '', epoch: 1, expiresAtMs: 0 });
    expect((await direct.acquire('k', 'b', 10_000)).epoch).toBe(2);
  });

  it('assertCurrent: a lost read is re-read; current stays current, fenced stays fenced', async () => {
    const { store, direct, clock } = await scene();
    const lease = await direct.acquire('k', 'a', 10_000);
    loseFirst('GetItem');
    await store.assertCurrent(lease);
    expect(tries('GetItem')).toEqual([{ status: 200 }, { status: 200 }]);
    clock.advance(10_000);
    const next = await direct.acquire('k', 'b', 10_000);
    loseFirst('GetItem');
    const err = await store.assertCurrent(lease).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FencedError);
    expect(tries('GetItem')).toHaveLength(2);
    await store.assertCurrent(next);
  });
});
