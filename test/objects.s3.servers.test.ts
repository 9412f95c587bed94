/**
 * The ObjectStore conformance suite against a real S3-compatible server (CI: a local Ceph RGW
 * from scripts/services/rgw.sh). Needs the environment from `bash scripts/services/rgw.sh env`.
 */
import { HeadBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ObjectStore } from '../lib/storage/objects.ts';
import { logLocation, parseRoot, s3ClientConfig, s3Endpoint } from '../lib/storage/location.ts';
import { S3ObjectStore } from '../lib/storage/s3.ts';
import { objectStoreConformance } from './conformance/objects.ts';

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
// S3 answers a local RGW never gives (409 conflicts, lost answers, servers that refuse
// conditional writes or DeleteObjects), played by a scripted client.

type Handler = (input: Record<string, unknown>) => unknown;

function sdkError(name: string, status: number, attempts = 1): Error {
  return Object.assign(new Error(`${name} (scripted)`), { name, $metadata: { httpStatusCode: status, attempts } });
}

function scripted(handlers: Record<string, Handler>) {
  const calls: { op: string; input: Record<string, unknown> }[] = [];
  const client = {
    async send(cmd: { constructor: { name: string }; input: Record<string, unknown> }) {
      const op = cmd.constructor.name.replace(/Command$/, '');
      calls.push({ op, input: cmd.input });
      const h = handlers[op];
      if (!h) throw new Error(`unscripted ${op}`);
      return h(cmd.input);
    },
  } as unknown as S3Client;
  const store = new S3ObjectStore({ client, bucket: 'b', basePrefix: 'base/log.lance', conflictRetries: 2 });
  return { store, calls, count: (op: string) => calls.filter((c) => c.op === op).length };
}

function body(text: string) {
  return { Body: { transformToString: async () => text } };
}

describe('S3ObjectStore with a scripted client', () => {
  it('retries 409 ConditionalRequestConflict, then succeeds', async () => {
    let n = 0;
    const { store, count, calls } = scripted({
      PutObject: () => {
        if (n++ < 2) throw sdkError('ConditionalRequestConflict', 409);
        return {};
      },
    });
    expect(await store.putIfAbsent('seal', 'x')).toBe(true);
    expect(count('PutObject')).toBe(3);
    expect(calls[0]?.input).toMatchObject({ Bucket: 'b', Key: 'base/log.lance/seal', IfNoneMatch: '*' });
  });

  it('decides a persistent 409 by reading the key', async () => {
    const taken = scripted({
      PutObject: () => {
        throw sdkError('ConditionalRequestConflict', 409);
      },
      GetObject: () => body('theirs'),
    });
    expect(await taken.store.putIfAbsent('seal', 'mine')).toBe(false);
    expect(taken.count('PutObject')).toBe(3);

    const absent = scripted({
      PutObject: () => {
        throw sdkError('ConditionalRequestConflict', 409);
      },
      GetObject: () => {
        throw sdkError('NoSuchKey', 404);
      },
    });
    await expect(absent.store.putIfAbsent('seal', 'mine')).rejects.toMatchObject({
      name: 'UnavailableError',
      retryable: true,
    });
  });

  it('412 is false, read back only when the SDK had resent the request', async () => {
    const plain = scripted({
      PutObject: () => {
        throw sdkError('PreconditionFailed', 412);
      },
    });
    expect(await plain.store.putIfAbsent('seal', 'mine')).toBe(false);
    expect(plain.count('GetObject')).toBe(0);

    const resentOurs = scripted({
      PutObject: () => {
        throw sdkError('PreconditionFailed', 412, 2);
      },
      GetObject: () => body('mine'),
    });
    expect(await resentOurs.store.putIfAbsent('seal', 'mine')).toBe(true);

    const resentTheirs = scripted({
      PutObject: () => {
        throw sdkError('PreconditionFailed', 412, 2);
      },
      GetObject: () => body('theirs'),
    });
    expect(await resentTheirs.store.putIfAbsent('seal', 'mine')).toBe(false);
  });

  it('a server without conditional writes (501) is a clear, retryable error', async () => {
    const { store } = scripted({
      PutObject: () => {
        throw sdkError('NotImplemented', 501);
      },
    });
    await expect(store.putIfAbsent('seal', 'x')).rejects.toThrow(/does not support conditional writes/);
  });

  it('maps not-found to null and other failures to UnavailableError with the cause', async () => {
    const missing = scripted({
      GetObject: () => {
        throw sdkError('NoSuchKey', 404);
      },
    });
    expect(await missing.store.get('k')).toBeNull();
    const denied = sdkError('AccessDenied', 403);
    const forbidden = scripted({
      GetObject: () => {
        throw denied;
      },
    });
    const err = await forbidden.store.get('k').catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'UnavailableError', code: 'UNAVAILABLE', retryable: true, cause: denied });
    expect((err as Error).message).toContain('s3://b/base/log.lance/k');
    expect((err as Error).message).toContain('AccessDenied');
  });

  it('lists across pages, objects and folders, deduplicated and sorted', async () => {
    const { store, calls } = scripted({
      ListObjectsV2: (input) =>
        input.ContinuationToken
          ? { Contents: [{ Key: 'base/log.lance/s/a' }], CommonPrefixes: [{ Prefix: 'base/log.lance/s/z/' }] }
          : {
              IsTruncated: true,
              NextContinuationToken: 't1',
              Contents: [{ Key: 'base/log.lance/s/c' }, { Key: 'base/log.lance/s/' }],
              CommonPrefixes: [{ Prefix: 'base/log.lance/s/a/' }],
            },
    });
    expect(await store.list('s')).toEqual(['a', 'c', 'z']);
    expect(calls[0]?.input).toMatchObject({ Prefix: 'base/log.lance/s/', Delimiter: '/' });
  });

  it('falls back to single deletes when a server refuses DeleteObjects', async () => {
    const keys = Array.from({ length: 5 }, (_, i) => ({ Key: `base/log.lance/p/k${i}` }));
    const { store, count } = scripted({
      ListObjectsV2: () => ({ Contents: keys }),
      DeleteObjects: () => {
        throw sdkError('MissingContentMD5', 400);
      },
      DeleteObject: () => ({}),
    });
    expect(await store.deletePrefix('p')).toBe(5);
    expect(count('DeleteObjects')).toBe(1);
    expect(count('DeleteObject')).toBe(5);
    expect(await store.deletePrefix('p')).toBe(5);
    expect(count('DeleteObjects')).toBe(1); // remembered
  });

  it('deletes in chunks of 1000 and reports per-key DeleteObjects errors', async () => {
    const keys = Array.from({ length: 2500 }, (_, i) => ({ Key: `base/log.lance/p/k${i}` }));
    const sizes: number[] = [];
    const ok = scripted({
      ListObjectsV2: () => ({ Contents: keys }),
      DeleteObjects: (input) => {
        sizes.push((input.Delete as { Objects: unknown[] }).Objects.length);
        return {};
      },
    });
    expect(await ok.store.deletePrefix('p')).toBe(2500);
    expect(sizes).toEqual([1000, 1000, 500]);

    const partial = scripted({
      ListObjectsV2: () => ({ Contents: keys.slice(0, 3) }),
      DeleteObjects: () => ({ Errors: [{ Key: 'base/log.lance/p/k1', Code: 'AccessDenied', Message: 'no' }] }),
    });
    await expect(partial.store.deletePrefix('p')).rejects.toThrow(/1 of 3 objects were not deleted/);
  });
});
