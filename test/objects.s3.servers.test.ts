/**
 * The ObjectStore conformance suite against a real S3-compatible server (CI: a local Ceph RGW
 * from scripts/services/rgw.sh). Needs the environment from `bash scripts/services/rgw.sh env`.
 */
import { HeadBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ObjectStore } from '../lib/storage/objects.ts';
import { logLocation, parseRoot, s3ClientConfig, s3Endpoint } from '../lib/storage/location.ts';
import { S3ObjectStore } from '../lib/storage/s3.ts';
import { objectStoreConformance } from './conformance/objects.ts';
import { s3Error, startS3Proxy, type ProxyRequest, type S3Proxy, type ScriptDecision } from './support/s3-proxy.ts';

const bucket = process.env.DGCL_TEST_BUCKET;
const endpoint = s3Endpoint(process.env);
if (!bucket || !endpoint) {
  throw new Error(
    'S3 server tests need DGCL_TEST_BUCKET and AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL) plus credentials: ' +
      'run `bash scripts/services/rgw.sh start && eval "$(bash scripts/services/rgw.sh env)"` first',
  );
}

const client = new S3Client(s3ClientConfig(process.env));
const runPrefix = `conformance/${Date.now()}-${process.pid}`;
const rootStore = new S3ObjectStore({ client, bucket, basePrefix: runPrefix });

beforeAll(async () => {
  try {
    await client.send(new HeadBucketCommand({ Bucket: bucket }));
  } catch (e) {
    throw new Error(
      `S3 test bucket s3://${bucket} is not reachable at ${endpoint}: ${(e as Error).name}: ${(e as Error).message}`,
      { cause: e },
    );
  }
});
afterAll(async () => {
  await rootStore.deletePrefix('');
  client.destroy();
});

objectStoreConformance(`S3 (${endpoint})`, {
  async open(name) {
    const loc = logLocation(parseRoot(`s3://${bucket}/${runPrefix}/${name}`), 'pipe', 'exp');
    if (loc.kind !== 's3') throw new Error('expected an s3 location');
    return S3ObjectStore.at(client, loc);
  },
  async close(store: ObjectStore) {
    await store.deletePrefix('');
  },
});

// ---------------------------------------------------------------------------------------------
// Answers a local RGW does not give on its own (409 conflicts, lost answers, servers that refuse
// conditional writes or DeleteObjects), played by a proxy in front of it: the store talks to the
// real server with the real S3Client, and the proxy answers some requests itself, or forwards
// them and drops the server's answer. Everything else is the real server's.

describe('S3ObjectStore through a fault-injecting proxy in front of the real server', () => {
  let proxy: S3Proxy;
  let proxied: S3Client;
  let scenes = 0;

  beforeAll(async () => {
    proxy = await startS3Proxy({ target: endpoint });
    // the store's client, as the code builds it, but at the proxy; 3 tries (the SDK's default)
    // pinned, as the lost-answer and 500 cases count the SDK's resends
    proxied = new S3Client({ ...s3ClientConfig({ ...process.env, AWS_ENDPOINT_URL_S3: proxy.endpoint }), maxAttempts: 3 });
  });
  afterEach(() => {
    proxy.set({ script: undefined });
  });
  afterAll(async () => {
    proxied?.destroy();
    await proxy?.close();
  });

  /**
   * A fresh folder with two stores on it: `store` through the proxy (as the code under test sees
   * the server) and `direct`, straight to the server (to set up and check). The proxy records
   * every request in `seen` and lets `decide` answer it.
   */
  function scene(decide: (r: ProxyRequest) => ScriptDecision | Promise<ScriptDecision> = () => 'forward') {
    const base = `${runPrefix}/proxied/${++scenes}`;
    const seen: ProxyRequest[] = [];
    proxy.set({
      script: (r) => {
        seen.push(r);
        return decide(r);
      },
    });
    proxy.reset();
    return {
      base,
      seen,
      store: new S3ObjectStore({ client: proxied, bucket: bucket!, basePrefix: base, conflictRetries: 2 }),
      direct: new S3ObjectStore({ client, bucket: bucket!, basePrefix: base }),
      count: (pred: (r: ProxyRequest) => boolean) => seen.filter(pred).length,
    };
  }

  const conditionalPut = (r: ProxyRequest) => r.method === 'PUT' && r.headers['if-none-match'] === '*';
  const listing = (r: ProxyRequest) => r.method === 'GET' && r.query.get('list-type') === '2';
  const objectGet = (r: ProxyRequest) => r.method === 'GET' && r.key !== '' && !listing(r);
  const bulkDelete = (r: ProxyRequest) => r.method === 'POST' && r.query.has('delete');
  const singleDelete = (r: ProxyRequest) => r.method === 'DELETE';
  const conflict = () =>
    s3Error(409, 'ConditionalRequestConflict', 'A conflicting operation occurred. If using PutObject, you can retry the request.');

  /** Writes full keys straight to the server, `concurrency` at a time (body: the key). */
  async function putMany(keys: string[], concurrency = 48): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < keys.length) {
        const Key = keys[next++]!;
        await client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: Key }));
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, keys.length) }, worker));
  }

  it('retries 409 ConditionalRequestConflict, then succeeds', async () => {
    let conflicts = 0;
    const t = scene((r) => (conditionalPut(r) && conflicts++ < 2 ? conflict() : 'forward'));
    expect(await t.store.putIfAbsent('seal', 'x')).toBe(true);
    expect(t.count(conditionalPut)).toBe(3);
    expect(t.seen[0]).toMatchObject({ method: 'PUT', bucket, key: `${t.base}/seal` });
    expect(proxy.counts.scripted).toBe(2);
    expect(await t.direct.get('seal')).toBe('x'); // the third try reached the server
  });

  it('decides a persistent 409 by reading the key', async () => {
    const t = scene((r) => (conditionalPut(r) ? conflict() : 'forward'));
    await t.direct.putIfAbsent('taken', 'theirs');
    expect(await t.store.putIfAbsent('taken', 'mine')).toBe(false);
    expect(t.count(conditionalPut)).toBe(3); // 1 + conflictRetries
    expect(t.count(objectGet)).toBe(1);
    expect(await t.direct.get('taken')).toBe('theirs');

    const err = await t.store.putIfAbsent('absent', 'mine').catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'UnavailableError', retryable: true, cause: { name: 'ConditionalRequestConflict' } });
    expect((err as Error).message).toMatch(/still conflicting after 3 tries/);
    expect(await t.direct.get('absent')).toBeNull();
  });

  it('a persistent 409 after a lost answer: the key exists, so false (never "won" by its body)', async () => {
    let puts = 0;
    // the first try lands but its answer is lost; the SDK resends, and that and the store's
    // own retries meet 409s
    const t = scene((r) => (!conditionalPut(r) ? 'forward' : puts++ === 0 ? 'forward-then-fail' : conflict()));
    expect(await t.store.putIfAbsent('seal', 'mine')).toBe(false);
    expect(proxy.counts.lost).toBe(1);
    expect(t.count(conditionalPut)).toBe(4); // try, SDK resend, 2 store retries
    expect(t.count(objectGet)).toBe(1); // the 409s are decided by whether the key exists
    expect(await t.direct.get('seal')).toBe('mine'); // the caller recognises its own body (nonce)
  });

  it('412 is false, on the first try or after a resend, without reading the key', async () => {
    // a plain 412 from the server: the key exists
    const plain = scene();
    await plain.direct.putIfAbsent('seal', 'theirs');
    expect(await plain.store.putIfAbsent('seal', 'mine')).toBe(false);
    expect(plain.count(conditionalPut)).toBe(1);
    expect(plain.count(objectGet)).toBe(0);

    // our first try created the key but its answer was lost; the SDK's resend gets 412: false,
    // the key holds our body, and it is the caller's job to recognise it
    let first = true;
    const ours = scene((r) => (conditionalPut(r) && first ? ((first = false), 'forward-then-fail') : 'forward'));
    expect(await ours.store.putIfAbsent('seal', 'mine')).toBe(false);
    expect(proxy.counts.lost).toBe(1);
    expect(ours.count(conditionalPut)).toBe(2);
    expect(ours.count(objectGet)).toBe(0);
    expect(await ours.direct.get('seal')).toBe('mine');
  });

  it('two concurrent identical claims, one answer lost: never two trues', async () => {
    // Both PUTs are held at the proxy until both arrived (proof of overlap). A's lands and its
    // answer is lost; B's first try is refused with a 500 once A's has landed, so both resends
    // meet 412. Comparing bodies made both "win"; neither may say it created the key.
    let arrived = 0;
    let bothArrived!: () => void;
    const overlap = new Promise<void>((r) => (bothArrived = r));
    let n = 0;
    const t = scene(async (r) => {
      if (!conditionalPut(r)) return 'forward';
      const i = n++;
      if (i >= 2) return 'forward'; // the SDK's resends
      if (++arrived === 2) bothArrived();
      await overlap;
      if (i === 0) return 'forward-then-fail';
      while ((await t.direct.get('claim')) === null) await new Promise((res) => setTimeout(res, 5));
      return s3Error(500, 'InternalError', 'refused by the test proxy');
    });
    const body = '{"checkpoint":"c1","ack":[1,2]}';
    const results = await Promise.all([t.store.putIfAbsent('claim', body), t.store.putIfAbsent('claim', body)]);
    expect(t.count(conditionalPut)).toBe(4);
    expect(results.filter((x) => x)).toHaveLength(0); // at most one true; here none: both resent
    expect(await t.direct.get('claim')).toBe(body);
  });

  it('two concurrent identical bodies without faults: exactly one true', async () => {
    let arrived = 0;
    let bothArrived!: () => void;
    const overlap = new Promise<void>((r) => (bothArrived = r));
    const t = scene(async (r): Promise<ScriptDecision> => {
      if (!conditionalPut(r)) return 'forward';
      if (++arrived === 2) bothArrived();
      await overlap; // both requests are in flight before either reaches the server
      return 'forward';
    });
    const body = '{"checkpoint":"c2"}';
    const results = await Promise.all([t.store.putIfAbsent('claim', body), t.store.putIfAbsent('claim', body)]);
    expect(t.count(conditionalPut)).toBe(2);
    expect(results.filter((x) => x)).toHaveLength(1);
    expect(await t.direct.get('claim')).toBe(body);
  });

  it('a server without conditional writes (501) is a clear, retryable error', async () => {
    const t = scene((r) =>
      conditionalPut(r) ? s3Error(501, 'NotImplemented', 'A header you provided implies functionality that is not implemented') : 'forward',
    );
    const err = await t.store.putIfAbsent('seal', 'x').catch((e: unknown) => e);
    expect(err).toMatchObject({
      name: 'UnavailableError',
      retryable: true,
      cause: { name: 'NotImplemented', $metadata: { httpStatusCode: 501 } },
    });
    expect((err as Error).message).toMatch(/does not support conditional writes/);
    expect(t.count(conditionalPut)).toBe(1); // neither the SDK nor the store retries it
    expect(await t.direct.get('seal')).toBeNull();
  });

  it('maps not-found to null, a refusal to PermissionDeniedError, a missing bucket to LogNotFoundError, other failures to UnavailableError, each with the cause', async () => {
    const t = scene((r) => {
      if (!objectGet(r)) return 'forward';
      if (r.key.endsWith('/denied')) return s3Error(403, 'AccessDenied', 'Access Denied');
      if (r.key.endsWith('/broken')) return s3Error(500, 'InternalError', 'We encountered an internal error.');
      return 'forward';
    });
    expect(await t.store.get('missing')).toBeNull(); // the server's own 404 NoSuchKey

    const denied = await t.store.get('denied').catch((e: unknown) => e);
    expect(denied).toMatchObject({
      name: 'PermissionDeniedError',
      code: 'PERMISSION_DENIED',
      retryable: false,
      path: `s3://${bucket}/${t.base}/denied`,
      cause: { name: 'AccessDenied', $metadata: { httpStatusCode: 403 } },
    });
    expect((denied as Error).message).toContain(`s3://${bucket}/${t.base}/denied`);
    expect((denied as Error).message).toContain('AccessDenied');

    const broken = await t.store.get('broken').catch((e: unknown) => e);
    expect(broken).toMatchObject({
      name: 'UnavailableError',
      cause: { name: 'InternalError', $metadata: { httpStatusCode: 500, attempts: 3 } },
    });
    expect(t.seen.filter((r) => r.key.endsWith('/broken'))).toHaveLength(3); // the SDK retried it

    // a bucket that does not exist is no log at all, not an absent key (the server's own 404)
    const noBucket = new S3ObjectStore({ client: proxied, bucket: `${bucket}-absent-${process.pid}`, basePrefix: t.base });
    await expect(noBucket.get('k')).rejects.toMatchObject({ name: 'LogNotFoundError', code: 'LOG_NOT_FOUND', retryable: false, cause: { name: 'NoSuchBucket' } });
    await expect(noBucket.list('')).rejects.toThrow(/S3 bucket "[^"]+-absent-\d+" does not exist/);
  });

  it('lists across pages (>1,000 keys), objects and folders, deduplicated and sorted', async () => {
    const t = scene();
    const many = Array.from({ length: 1100 }, (_, i) => `k${String(i).padStart(4, '0')}`);
    await putMany([
      ...many.map((n) => `${t.base}/s/${n}`),
      `${t.base}/s/a`, // an object and a folder of the same name
      `${t.base}/s/a/x`,
      `${t.base}/s/c`,
      `${t.base}/s/z/y/deep`,
      `${t.base}/s/`, // a folder marker: no name of its own
      `${t.base}/s2/other`, // shares the string prefix, not the folder
    ]);
    expect(await t.store.list('s')).toEqual(['a', 'c', ...many, 'z']);
    const pages = t.seen.filter(listing);
    expect(pages.length).toBeGreaterThanOrEqual(2);
    for (const p of pages) {
      expect(p.query.get('prefix')).toBe(`${t.base}/s/`);
      expect(p.query.get('delimiter')).toBe('/');
    }
    expect(pages[0]!.query.has('continuation-token')).toBe(false);
    expect(pages.slice(1).every((p) => p.query.has('continuation-token'))).toBe(true);
  });

  it('falls back to single deletes when a server refuses DeleteObjects, and remembers it', async () => {
    const t = scene((r) =>
      bulkDelete(r) ? s3Error(400, 'MissingContentMD5', 'Missing required header for this request: Content-MD5') : 'forward',
    );
    const keys = (round: number) => Array.from({ length: 5 }, (_, i) => `${t.base}/p/${i % 2 ? 'd/' : ''}r${round}k${i}`);
    await putMany(keys(1));
    expect(await t.store.deletePrefix('p')).toBe(5);
    expect(t.count(bulkDelete)).toBe(1);
    expect(t.count(singleDelete)).toBe(5);
    expect(await t.direct.list('p')).toEqual([]);

    await putMany(keys(2));
    expect(await t.store.deletePrefix('p')).toBe(5);
    expect(t.count(bulkDelete)).toBe(1); // not asked again
    expect(t.count(singleDelete)).toBe(10);
    expect(await t.direct.list('p')).toEqual([]);
  });

  it('deletePrefix deletes >1,000 keys in chunks of 1,000', async () => {
    const t = scene();
    const keys = Array.from({ length: 2500 }, (_, i) => `${t.base}/p/${i % 10 === 0 ? 'sub/' : ''}k${String(i).padStart(4, '0')}`);
    await putMany(keys);
    await t.direct.putIfAbsent('keep/me', 'x');
    expect(await t.store.deletePrefix('p')).toBe(2500);
    const posts = t.seen.filter(bulkDelete);
    expect(posts.map((r) => r.body.toString('utf8').match(/<Key>/g)?.length ?? 0)).toEqual([1000, 1000, 500]);
    expect(t.count(singleDelete)).toBe(0); // the server took DeleteObjects
    expect(t.seen.filter(listing).length).toBe(3); // 2,500 keys listed 1,000 a page
    expect(await t.direct.list('p')).toEqual([]);
    expect(await t.direct.get('keep/me')).toBe('x');
  });

  it('reports per-key DeleteObjects errors, ignoring keys that were already gone', async () => {
    const t = scene((r) =>
      bulkDelete(r)
        ? {
            status: 200,
            headers: { 'content-type': 'application/xml' },
            body:
              '<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
              `<Error><Key>${t.base}/q/k0</Key><Code>NoSuchKey</Code><Message>gone</Message></Error>` +
              `<Error><Key>${t.base}/q/k1</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>` +
              '</DeleteResult>',
          }
        : 'forward',
    );
    await putMany([0, 1, 2].map((i) => `${t.base}/q/k${i}`));
    const err = await t.store.deletePrefix('q').catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'UnavailableError', retryable: true });
    expect((err as Error).message).toMatch(/1 of 3 objects were not deleted/);
    expect((err as Error).message).toContain(`s3://${bucket}/${t.base}/q/k1: AccessDenied`);
  });
  // A resent PUT whose first copy was only slow can land after a later PUT of the key and bring
  // the old body back (an item marker restored that way made a writer trust a stale cache).
  const plainPut = (r: ProxyRequest) => r.method === 'PUT' && r.headers['if-none-match'] === undefined;

  it('sends a plain put once: a lost answer fails the call and nothing is resent', async () => {
    let first = true;
    const t = scene((r) => (plainPut(r) && first ? ((first = false), 'forward-then-fail') : 'forward'));
    const err = await t.store.put('marker', 'body-1').catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'UnavailableError', retryable: true });
    expect((err as Error).message).toContain(`s3://${bucket}/${t.base}/marker`);
    expect(t.count(plainPut)).toBe(1);
    expect(await t.direct.get('marker')).toBe('body-1'); // it landed; only the answer was lost
    await t.store.put('marker', 'body-2'); // the next call is sent as usual
    expect(t.count(plainPut)).toBe(2);
    expect(await t.direct.get('marker')).toBe('body-2');
  });

  // A shard generation's marker: a resent copy landing after the generation was
  // retired would bring its marker back over a deleted dataset.
  it('sends putIfAbsent once when asked: a lost answer fails the call and nothing is resent', async () => {
    let first = true;
    const t = scene((r) => (conditionalPut(r) && first ? ((first = false), 'forward-then-fail') : 'forward'));
    const err = await t.store.putIfAbsent('gen', '', { once: true }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'UnavailableError', retryable: true });
    expect(t.count(conditionalPut)).toBe(1);
    expect(await t.direct.get('gen')).toBe(''); // it landed; only the answer was lost
    expect(await t.store.putIfAbsent('gen', '', { once: true })).toBe(false);
    // control: without `once` the SDK resends the conditional PUT, which meets 412
    let again = true;
    const c = scene((r) => (conditionalPut(r) && again ? ((again = false), 'forward-then-fail') : 'forward'));
    expect(await c.store.putIfAbsent('gen', '')).toBe(false);
    expect(c.count(conditionalPut)).toBe(2);
  });

  it('sends putIfAbsent once, yet sends it again after a SlowDown (refused unprocessed: it never lands)', async () => {
    let first = true;
    const t = scene((r) => (conditionalPut(r) && first ? ((first = false), s3Error(503, 'SlowDown', 'refused by the test proxy')) : 'forward'));
    expect(await t.store.putIfAbsent('gen', 'x', { once: true })).toBe(true);
    expect(t.count(conditionalPut)).toBe(2);
    expect(await t.direct.get('gen')).toBe('x');
  });

  // The surfaced error is the first attempt's (checked), and a put the server itself
  // refused (S3's SlowDown: nothing landed, nothing can land later) is no longer resent either.
  it('a lost answer surfaces as the first attempt\'s error (the cause)', async () => {
    let first = true;
    const t = scene((r) => (plainPut(r) && first ? ((first = false), 'forward-then-fail') : 'forward'));
    const err = await t.store.put('marker', 'body-1').catch((e: unknown) => e);
    // the proxy's lost answer is a 500 InternalError; the refused resend is not what surfaces
    expect(err).toMatchObject({ name: 'UnavailableError', cause: { name: 'InternalError', message: 'answer lost by the test proxy', $metadata: { httpStatusCode: 500 } } });
    expect(t.count(plainPut)).toBe(1);
  });

  // A put the server refused (SlowDown: nothing landed) is not resent either; the
  // writer retries its item markers itself, each time with a new body (test/item-marker-retry.test.ts).
  it('does not resend a plain put the server refused with SlowDown either', async () => {
    let first = true;
    const t = scene((r) => (plainPut(r) && first ? ((first = false), s3Error(503, 'SlowDown', 'Please reduce your request rate.')) : 'forward'));
    const err = await t.store.put('marker', 'body-1').catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'UnavailableError', cause: { name: 'SlowDown' } });
    expect(t.count(plainPut)).toBe(1);
    expect(await t.direct.get('marker')).toBeNull();
  });

  it('still resends reads and conditional puts whose answer was lost', async () => {
    let lostGet = true;
    let lostPut = true;
    const t = scene((r) => {
      if (objectGet(r) && lostGet) return (lostGet = false), 'forward-then-fail';
      if (conditionalPut(r) && lostPut) return (lostPut = false), 'forward-then-fail';
      return 'forward';
    });
    await t.direct.put('k', 'v');
    expect(await t.store.get('k')).toBe('v');
    expect(t.count(objectGet)).toBe(2);
    // the resend meets its own first copy: false, as ObjectStore.putIfAbsent documents
    expect(await t.store.putIfAbsent('c', 'x')).toBe(false);
    expect(t.count(conditionalPut)).toBe(2);
  });
});
