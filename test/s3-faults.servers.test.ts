/**
 * The log on S3 through a proxy that counts requests and injects faults. A file of its own, so
 * its process talks to S3 only through the proxy (Lance caches object stores per process).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DgclError } from '../lib/errors.ts';
import { openLog } from '../lib/index.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { startS3Proxy, type S3Proxy } from './support/s3-proxy.ts';
import { servers, useLeaseTable } from './support/servers.ts';

const { bucket, s3Endpoint: s3 } = servers;
const table = useLeaseTable();

describe('s3:// root through a proxy that answers 503 or stalls on some requests', () => {
  let proxy: S3Proxy;
  beforeAll(async () => {
    proxy = await startS3Proxy({ target: s3, seed: 7 });
    // Lance's object store reads AWS_ENDPOINT_URL_S3 from the process environment and prefers
    // it to the endpoint in its storage options: point the whole process at the proxy.
    process.env.AWS_ENDPOINT_URL_S3 = proxy.endpoint;
  });
  afterAll(async () => {
    process.env.AWS_ENDPOINT_URL_S3 = s3;
    await proxy.close();
  });

  it('appends either ack or fail clearly, and no partial batch is ever visible', async () => {
    const root = `s3://${bucket}/faults-${randomUUID().slice(0, 8)}`;
    const env = { ...process.env, DGCL_LEASE_TABLE: table, AWS_ENDPOINT_URL_S3: proxy.endpoint };
    const log = await openLog({ root, pipeline: 'p', experiment: 'f', env, mergeEveryCommits: 8 });
    proxy.set({ failRate: 0.1, delayRate: 0.05, delayMs: 1500 });
    const outcomes: Array<{ id: string; ack?: Ack; error?: unknown }> = [];
    for (let i = 0; i < 30; i++) {
      const id = `f${i}`;
      try {
        const [ack] = await log.append([createBatch(id, { append: { parts: ['a', 'b', 'c'] } })]);
        outcomes.push({ id, ack: ack! });
      } catch (error) {
        outcomes.push({ id, error });
      }
    }
    proxy.set({ failRate: 0, delayRate: 0 });
    await log.close().catch(() => undefined);
    expect(proxy.counts.failed).toBeGreaterThan(0);
    for (const o of outcomes) if (o.error) expect(o.error).toBeInstanceOf(DgclError);
    const acked = outcomes.filter((o) => o.ack);
    expect(acked.length).toBeGreaterThan(0);
    const reader = await openLog({ root, pipeline: 'p', experiment: 'f', env: { ...process.env, DGCL_LEASE_TABLE: table } });
    try {
      const states = new Map((await reader.allStates()).map((s) => [s.itemId, s]));
      for (const o of acked) expect(states.has(o.id), o.id).toBe(true);
      for (const s of states.values()) {
        expect(s.lastSeq, `${s.itemId} is whole`).toBe(6); // create, set, 3 appends, completion: all or nothing
        expect(s.fields.parts).toEqual(['a', 'b', 'c']);
      }
      // a failed append retried after the network healed is written once
      const failed = outcomes.find((o) => o.error);
      if (failed) {
        const [again] = await reader.append([createBatch(failed.id, { append: { parts: ['a', 'b', 'c'] } })]);
        expect((await reader.fold(failed.id)).lastSeq).toBe(again!.lastSeq);
      }
    } finally {
      await reader.close();
    }
  });

  it('counts the S3 requests of one checkpoint batch', async () => {
    const root = `s3://${bucket}/count-${randomUUID().slice(0, 8)}`;
    const env = { ...process.env, DGCL_LEASE_TABLE: table, AWS_ENDPOINT_URL_S3: proxy.endpoint };
    const log = await openLog({ root, pipeline: 'p', experiment: 'c', env, mergeEveryCommits: 1000 });
    await log.append([createBatch('warm')]);
    proxy.reset();
    const n = 10;
    for (let i = 1; i <= n; i++) await log.append([stepBatch('warm', i)]);
    const perBatch = proxy.counts.total / n;
    console.log(`S3 requests per checkpoint batch (warm writer): ${perBatch.toFixed(1)}`, proxy.counts.byMethod);
    proxy.reset();
    await log.fold('warm');
    console.log(`S3 requests per fold (warm handles): ${proxy.counts.total}`, proxy.counts.byMethod);
    await log.close();
    expect(perBatch).toBeGreaterThan(0);
  });
});
