/**
 * DynamoCoordStore against DynamoDB Local at AWS_ENDPOINT_URL_DYNAMODB: the CoordStore
 * conformance suite, the item layout (`pk`, `body`, `ttl`), input checks, and the faults that
 * matter: an answer lost after its request landed, through test/support/http-fault-proxy.ts.
 * Never skipped: a missing endpoint fails loudly. One table for the file (unique name, dropped
 * after); every test uses its own scopes.
 */
import { randomUUID } from 'node:crypto';
import { DeleteTableCommand, DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { DynamoCoordStore } from '../lib/coord/dynamo.ts';
import { InvalidInputError, NotFoundError, UnavailableError } from '../lib/errors.ts';
import { DynamoLeaseStore, createLeaseTable } from '../lib/lease/dynamo.ts';
import { claimKey, itemKey } from '../lib/log/layout.ts';
import { coordStoreConformance } from './conformance/coord.ts';
import { DYNAMO_LOST_ANSWER, dynamoOp, dynamoTries, type FaultDecision, type FaultRequest, type HttpFaultProxy, startHttpFaultProxy } from './support/http-fault-proxy.ts';

const endpoint = process.env.AWS_ENDPOINT_URL_DYNAMODB;
if (!endpoint) {
  throw new Error(
    'AWS_ENDPOINT_URL_DYNAMODB is not set: start DynamoDB Local with `bash scripts/services/dynamodb.sh start` ' +
      'and run with AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8011 AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x',
  );
}

const credentials = {
  accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? 'x',
  secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? 'x',
};
const client = new DynamoDBClient({ endpoint, region: process.env.AWS_REGION ?? 'us-east-1', credentials });
const table = `dgcl-coord-${randomUUID().slice(0, 8)}`;
let tableReady: Promise<void> | undefined;
const ready = () => (tableReady ??= createLeaseTable(client, table));

afterAll(async () => {
  if (tableReady) await client.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
  client.destroy();
});

/** A fresh scope as lib/coord/choose.ts makes them: `<pipeline>/<experiment>/<logId>`. */
const newScope = () => `pipe/exp/${randomUUID()}`;
/** DynamoDB TTL runs on the server's real clock: claims must not be in the past. */
const realTimeClock = () => new ManualClock(Date.now());

/** The stored item, all attributes, read around the store. */
async function rawItem(pk: string) {
  return (await client.send(new GetItemCommand({ TableName: table, Key: { pk: { S: pk } }, ConsistentRead: true }))).Item;
}

coordStoreConformance('dynamodb', {
  kind: 'table',
  async create() {
    await ready();
    const clock = realTimeClock();
    const scope = newScope();
    return {
      store: new DynamoCoordStore({ client, table, scope, clock }),
      // a scope that differs only in its last characters: no prefix sharing leaks records
      other: new DynamoCoordStore({ client, table, scope: `${scope.slice(0, -1)}${scope.endsWith('0') ? '1' : '0'}`, clock }),
      destroy: async () => {},
    };
  },
});

describe('DynamoCoordStore specifics', () => {
  beforeAll(() => ready());

  it('items: pk is scope/key, body as given; ttl only on putIfAbsent records, from the clock', async () => {
    const clock = realTimeClock();
    clock.advance(123); // a time off the whole second: the ttl is rounded up
    const scope = newScope();
    const store = new DynamoCoordStore({ client, table, scope, clock });
    const m = itemKey('i1');
    const c = claimKey('cp-1');
    await store.put(m, 'marker');
    expect(await rawItem(`${scope}/${m}`)).toEqual({ pk: { S: `${scope}/${m}` }, body: { S: 'marker' } });
    expect(await store.putIfAbsent(c, 'claim', { expiresAfterMs: 3_600_000 })).toBe(true);
    const ttl = Math.ceil((clock.nowMs() + 3_600_000) / 1000);
    expect(await rawItem(`${scope}/${c}`)).toEqual({ pk: { S: `${scope}/${c}` }, body: { S: 'claim' }, ttl: { N: String(ttl) } });
    expect(ttl * 1000).toBeGreaterThanOrEqual(clock.nowMs() + 3_600_000);
    expect(ttl * 1000).toBeLessThan(clock.nowMs() + 3_601_000);
    // a put replaces the whole item: the record is a marker now, without ttl
    await store.put(c, 'replaced');
    expect(await rawItem(`${scope}/${c}`)).toEqual({ pk: { S: `${scope}/${c}` }, body: { S: 'replaced' } });
    // and a refused putIfAbsent changes nothing (no ttl added)
    expect(await store.putIfAbsent(m, 'other', { expiresAfterMs: 1000 })).toBe(false);
    expect(await rawItem(`${scope}/${m}`)).toEqual({ pk: { S: `${scope}/${m}` }, body: { S: 'marker' } });
  });

  it('DynamoLeaseStore.coordStore: the same table and clock, under the scope', async () => {
    const clock = realTimeClock();
    const leases = new DynamoLeaseStore({ client, table, clock });
    const scope = newScope();
    const store = leases.coordStore(scope);
    expect(store.kind).toBe('table');
    expect(await store.putIfAbsent('_dgcl/claims/x.json', 'b', { expiresAfterMs: 10_000 })).toBe(true);
    expect(await rawItem(`${scope}/_dgcl/claims/x.json`)).toEqual({
      pk: { S: `${scope}/_dgcl/claims/x.json` },
      body: { S: 'b' },
      ttl: { N: String(Math.ceil((clock.nowMs() + 10_000) / 1000)) },
    });
    // leases and records share the table without meeting: a lease key is never scope/_dgcl/...
    const lease = await leases.acquire('pipe/exp/slot/0', 'w', 10_000);
    expect(await leases.read('pipe/exp/slot/0')).toEqual(lease);
    expect(await store.get('_dgcl/claims/x.json')).toBe('b');
  });

  it('deleteClaimsOlderThan is 0 and keeps claims (DynamoDB TTL deletes them)', async () => {
    const store = new DynamoCoordStore({ client, table, scope: newScope(), clock: realTimeClock() });
    expect(await store.putIfAbsent(claimKey('cp'), 'c', { expiresAfterMs: 60_000 })).toBe(true);
    expect(await store.deleteClaimsOlderThan(Date.now() + 3_600_000)).toBe(0);
    expect(await store.get(claimKey('cp'))).toBe('c');
  });

  it('bad input is InvalidInputError naming the field, and nothing is written', async () => {
    const scope = newScope();
    const store = new DynamoCoordStore({ client, table, scope, clock: realTimeClock() });
    expect(() => new DynamoCoordStore({ client, table, scope: '' })).toThrow(InvalidInputError);
    for (const s of ['/p/e/id', 'p/e/id/']) {
      const e = (() => {
        try {
          new DynamoCoordStore({ client, table, scope: s });
        } catch (err) {
          return err;
        }
      })();
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).field).toBe('scope');
    }
    expect(() => new DynamoCoordStore({ client, table: 'x', scope })).toThrow(/table/);

    // DynamoDB's partition keys hold 2048 bytes: scope + '/' + key
    const room = 2048 - Buffer.byteLength(`${scope}/`);
    const longest = 'k'.repeat(room);
    await store.put(longest, 'fits');
    expect(await store.get(longest)).toBe('fits');
    const tooLong = `${'k'.repeat(room - 1)}é`; // one more byte, one character fewer
    const e1 = await store.put(tooLong, 'x').catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(InvalidInputError);
    expect((e1 as InvalidInputError).field).toBe('key');
    const e2 = await store.getMany([itemKey('a'), itemKey('b'), tooLong]).catch((e: unknown) => e);
    expect((e2 as InvalidInputError).field).toBe('keys[2]');

    const k = claimKey('bad-expiry');
    for (const expiresAfterMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      const e = await store.putIfAbsent(k, 'x', { expiresAfterMs }).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).field).toBe('expiresAfterMs');
    }
    const huge = 'x'.repeat(400 * 1024);
    const e3 = await store.putIfAbsent(k, huge, { expiresAfterMs: 1000 }).catch((err: unknown) => err);
    expect((e3 as InvalidInputError).field).toBe('body');
    await expect(store.put(k, huge)).rejects.toBeInstanceOf(InvalidInputError);
    expect(await rawItem(`${scope}/${k}`)).toBeUndefined();
  });

  it('a missing table is NotFoundError; a server that does not answer is UnavailableError', async () => {
    const missing = new DynamoCoordStore({ client, table: `dgcl-missing-${randomUUID().slice(0, 8)}`, scope: newScope() });
    await expect(missing.get('k')).rejects.toBeInstanceOf(NotFoundError);
    await expect(missing.getMany(['k'])).rejects.toBeInstanceOf(NotFoundError);
    await expect(missing.put('k', 'b')).rejects.toBeInstanceOf(NotFoundError);
    await expect(missing.putIfAbsent('k', 'b', { expiresAfterMs: 1000 })).rejects.toBeInstanceOf(NotFoundError);
    const dead = new DynamoDBClient({
      endpoint: 'http://127.0.0.1:9', // discard port: connection refused
      region: 'us-east-1',
      credentials,
      maxAttempts: 1,
    });
    try {
      const store = new DynamoCoordStore({ client: dead, table, scope: newScope() });
      await expect(store.get('k')).rejects.toBeInstanceOf(UnavailableError);
      await expect(store.getMany(['k'])).rejects.toBeInstanceOf(UnavailableError);
      await expect(store.put('k', 'b')).rejects.toBeInstanceOf(UnavailableError);
      await expect(store.putIfAbsent('k', 'b', { expiresAfterMs: 1000 })).rejects.toBeInstanceOf(UnavailableError);
      await expect(store.delete('k')).rejects.toBeInstanceOf(UnavailableError);
    } finally {
      dead.destroy();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Through a proxy in front of DynamoDB Local, which can forward a request and then lose its
// answer (so the SDK resends a write the server already applied), or answer for the server.

describe('DynamoCoordStore through a fault proxy', () => {
  let proxy: HttpFaultProxy;
  let proxied: DynamoDBClient;

  beforeAll(async () => {
    await ready();
    proxy = await startHttpFaultProxy({
      target: endpoint!,
      lostAnswer: DYNAMO_LOST_ANSWER,
    });
    // the SDK's default retries (3 attempts): what a deployment gets
    proxied = new DynamoDBClient({ endpoint: proxy.endpoint, region: 'us-east-1', credentials });
  });
  afterEach(() => proxy.setScript(undefined));
  afterAll(async () => {
    proxied?.destroy();
    await proxy?.close();
  });

  const op = dynamoOp;

  /** `decision` for the first request of kind `kind`; forwards everything else. */
  function onFirst(kind: string, decision: FaultDecision): void {
    let done = false;
    proxy.setScript((r): FaultDecision => {
      if (!done && op(r) === kind) {
        done = true;
        return decision;
      }
      return 'forward';
    });
  }

  const tries = (kind: string) => dynamoTries(proxy, kind);

  function scene() {
    const scope = newScope();
    const clock = realTimeClock();
    return {
      scope,
      store: new DynamoCoordStore({ client: proxied, table, scope, clock }),
      direct: new DynamoCoordStore({ client, table, scope, clock }),
    };
  }

  for (const lost of ['forward-then-fail', 'forward-then-reset'] as const) {
    it(`put whose answer is lost after it landed (${lost}): fails, sent exactly once, the body landed`, async () => {
      const { store, direct } = scene();
      const k = itemKey('item');
      await direct.put(k, 'old body');
      onFirst('PutItem', lost);
      const err = await store.put(k, 'new body').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnavailableError);
      // one PutItem only, answered 200 by the server: the SDK did not resend it
      expect(tries('PutItem')).toEqual([{ status: 200 }]);
      expect(await direct.get(k)).toBe('new body');
    });
  }

  it('control: a plain PutItem whose answer is lost IS resent by the SDK (what send-once prevents)', async () => {
    // The proof that the proxy's lost answer makes this SDK resend a PutItem: a plain
    // PutItem (no send-once) through the same script reaches the server twice.
    const { scope, direct } = scene();
    const k = itemKey('control');
    onFirst('PutItem', 'forward-then-fail');
    await proxied.send(new PutItemCommand({ TableName: table, Item: { pk: { S: `${scope}/${k}` }, body: { S: 'b' } } }));
    expect(tries('PutItem')).toEqual([{ status: 200 }, { status: 200 }]);
    expect(await direct.get(k)).toBe('b');
  });

  it('putIfAbsent whose answer is lost after it landed: the resend meets its own record, false, body kept', async () => {
    const { store, direct } = scene();
    const c = claimKey('cp');
    onFirst('PutItem', 'forward-then-fail');
    const body = `claim nonce ${randomUUID()}`;
    expect(await store.putIfAbsent(c, body, { expiresAfterMs: 60_000 })).toBe(false);
    expect(tries('PutItem')).toEqual([{ status: 200 }, { status: 400, error: 'ConditionalCheckFailedException' }]);
    // the caller tells its own write by the nonce in the body
    expect(await direct.get(c)).toBe(body);
  });

  it('getMany whose first answer is a 500 is resent and answers right', async () => {
    const { store, direct } = scene();
    const keys = [itemKey('a'), itemKey('b'), claimKey('c')];
    await direct.put(keys[0]!, 'A');
    expect(await direct.putIfAbsent(keys[2]!, 'C', { expiresAfterMs: 60_000 })).toBe(true);
    onFirst('BatchGetItem', {
      status: 500,
      headers: { 'content-type': 'application/x-amz-json-1.0' },
      body: JSON.stringify({ __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: 'boom' }),
    });
    const got = await store.getMany(keys);
    expect(got).toEqual(
      new Map<string, string | null>([
        [keys[0]!, 'A'],
        [keys[1]!, null],
        [keys[2]!, 'C'],
      ]),
    );
    expect(tries('BatchGetItem')).toEqual([{ status: undefined }, { status: 200 }]);
  });

  it('getMany: keys the server leaves unprocessed are asked again; always unprocessed ends Unavailable', async () => {
    const { store, direct } = scene();
    const keys = Array.from({ length: 120 }, (_, i) => itemKey(`u${i}`));
    for (let i = 0; i < keys.length; i += 25) await Promise.all(keys.slice(i, i + 25).map((k) => direct.put(k, `b ${k}`)));
    /** The answer DynamoDB gives when throttled: nothing read, every key back as unprocessed. */
    const unprocessed = (r: FaultRequest): FaultDecision => {
      const req = JSON.parse(r.body.toString('utf8')) as { RequestItems: Record<string, { Keys: unknown[] }> };
      return {
        status: 200,
        headers: { 'content-type': 'application/x-amz-json-1.0' },
        body: JSON.stringify({
          Responses: { [table]: [] },
          UnprocessedKeys: { [table]: { Keys: req.RequestItems[table]!.Keys, ConsistentRead: true } },
        }),
      };
    };
    let throttled = 0;
    proxy.setScript((r) => (op(r) === 'BatchGetItem' && throttled++ < 1 ? unprocessed(r) : 'forward'));
    const got = await store.getMany(keys);
    expect(got).toEqual(new Map(keys.map((k) => [k, `b ${k}`])));
    // two chunks (100 + 20); the throttled one was asked again with the same keys
    type Sent = { RequestItems: Record<string, { Keys: unknown[]; ConsistentRead?: boolean }> };
    const sent = proxy.log
      .filter((e) => op(e.req) === 'BatchGetItem')
      .map((e) => (JSON.parse(e.req.body.toString('utf8')) as Sent).RequestItems[table]!)
      .map((r) => ({ n: r.Keys.length, consistent: r.ConsistentRead }));
    expect(sent).toHaveLength(3);
    expect(sent.every((s) => s.consistent === true)).toBe(true);
    // the first to arrive was the throttled one, whichever chunk it was
    expect(sent.map((s) => s.n).sort((a, b) => a - b)).toEqual(sent[0]!.n === 100 ? [20, 100, 100] : [20, 20, 100]);

    proxy.setScript((r) => (op(r) === 'BatchGetItem' ? unprocessed(r) : 'forward'));
    const err = await store.getMany(keys.slice(0, 3)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect(String((err as Error).message)).toMatch(/unprocessed/);
    expect(tries('BatchGetItem')).toHaveLength(8);
  });

  it('getMany of no keys and deleteClaimsOlderThan send no request', async () => {
    const { store } = scene();
    proxy.setScript(undefined);
    expect((await store.getMany([])).size).toBe(0);
    expect(await store.deleteClaimsOlderThan(Date.now())).toBe(0);
    expect(proxy.log).toHaveLength(0);
    await store.get(itemKey('x')); // the proxy does see requests
    expect(proxy.log).toHaveLength(1);
  });

  it('delete whose answer is lost is resent and ends deleted', async () => {
    const { store, direct } = scene();
    const k = itemKey('d');
    await direct.put(k, 'x');
    onFirst('DeleteItem', 'forward-then-fail');
    await store.delete(k);
    expect(tries('DeleteItem')).toEqual([{ status: 200 }, { status: 200 }]);
    expect(await direct.get(k)).toBeNull();
  });
});
