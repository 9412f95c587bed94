/**
 * Benchmarks of an s3:// root on the local Ceph RGW (leases on DynamoDB Local), run by
 * `npm run bench:s3` (scripts/bench-s3.sh starts and stops both servers). Prints figures with
 * a same-run baseline; asserts nothing. All S3 traffic of this process goes through a counting
 * proxy so requests per operation are measured, not guessed.
 */
import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { openLog } from '../lib/index.ts';
import { createLeaseTable } from '../lib/lease/dynamo.ts';
import type { LanceCheckpointLog } from '../lib/log/log.ts';
import { startS3Proxy } from '../test/support/s3-proxy.ts';

const bucket = process.env.DGCL_TEST_BUCKET;
const upstream = process.env.AWS_ENDPOINT_URL_S3;
if (!bucket || !upstream || !process.env.AWS_ENDPOINT_URL_DYNAMODB) {
  throw new Error('run through `npm run bench:s3` (needs RGW and DynamoDB Local)');
}
const proxy = await startS3Proxy({ target: upstream });
process.env.AWS_ENDPOINT_URL_S3 = proxy.endpoint; // Lance reads the process environment
const table = `dgcl-bench-${randomUUID().slice(0, 8)}`;
const ddb = new DynamoDBClient({});
await createLeaseTable(ddb, table);
process.env.DGCL_LEASE_TABLE = table;
const root = `s3://${bucket}/bench-${randomUUID().slice(0, 8)}`;

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const ms = (x: number) => `${x.toFixed(1)} ms`;
const batch = (itemId: string, step?: number) =>
  step === undefined
    ? { itemId, runId: 'bench', create: {}, step: { name: 'load', index: 0 }, set: Object.fromEntries(Array.from({ length: 8 }, (_, f) => [`f${f}`, `v${f}`])) }
    : { itemId, runId: 'bench', step: { name: `s${step}`, index: step }, set: { out: `o${step}` } };

console.log(`datagen-checkpoint-log S3 bench: ${root} via ${upstream} (Ceph RGW on loopback)`);

// 1. Ack latency and requests per batch.
{
  const log = await openLog({ root, pipeline: 'b', experiment: 'ack' });
  await log.append([batch('warm')]);
  const lat: number[] = [];
  proxy.reset();
  const n = 40;
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await log.append([batch(`i${i}`)]);
    lat.push(performance.now() - t);
  }
  const perBatch = proxy.counts.total / n;
  const methods = Object.entries(proxy.counts.byMethod).map(([m, c]) => `${m} ${(c / n).toFixed(1)}`).join(', ');
  await log.close();
  // Baseline: the same process's bare S3 round trip (one small conditional PUT via our store).
  const { S3Client } = await import('@aws-sdk/client-s3');
  const { S3ObjectStore } = await import('../lib/storage/s3.ts');
  const { s3ClientConfig } = await import('../lib/storage/location.ts');
  const store = new S3ObjectStore({ client: new S3Client(s3ClientConfig()), bucket, basePrefix: `bench-raw-${randomUUID().slice(0, 8)}` });
  const raw: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await store.putIfAbsent(`k${i}`, 'x');
    raw.push(performance.now() - t);
  }
  console.log(`ack latency, 10-event batch (n=${n}): p50 ${ms(pct(lat, 50))}  p99 ${ms(pct(lat, 99))}`);
  console.log(`  one bare conditional PUT: p50 ${ms(pct(raw, 50))} -> an ack costs ${(pct(lat, 50) / pct(raw, 50)).toFixed(1)} PUT round trips`);
  console.log(`  S3 requests per batch: ${perBatch.toFixed(1)} (${methods}) + 1 DynamoDB GetItem`);
}

// 2. Fold latency with 1, 4 and 16 unmerged shards (one writer each, nothing merged).
{
  console.log('fold latency of one item vs unmerged shards (20 commits per shard):');
  let baseline = 0;
  for (const shards of [1, 4, 16]) {
    const exp = `fold${shards}`;
    const writers: LanceCheckpointLog[] = [];
    for (let w = 0; w < shards; w++) writers.push(await openLog({ root, pipeline: 'b', experiment: exp, owner: `w${w}`, slot: w, mergeEveryCommits: 1_000_000 }));
    await Promise.all(writers.map(async (log, w) => {
      for (let i = 0; i < 20; i++) await log.append([batch(`w${w}-i${i}`)]);
    }));
    const reader = await openLog({ root, pipeline: 'b', experiment: exp });
    await reader.fold('w0-i0');
    proxy.reset();
    const lat: number[] = [];
    for (let k = 0; k < 10; k++) {
      const t = performance.now();
      await reader.fold(`w${k % shards}-i${k}`);
      lat.push(performance.now() - t);
    }
    const reqs = proxy.counts.total / 10;
    if (shards === 1) baseline = pct(lat, 50);
    console.log(`  ${String(shards).padStart(2)} shards: p50 ${ms(pct(lat, 50))} p99 ${ms(pct(lat, 99))}, ${reqs.toFixed(0)} requests per fold, ${(pct(lat, 50) / baseline).toFixed(1)}x the 1-shard fold`);
    // after maintenance: everything merged into a compacted, indexed base
    for (const w of writers) await w.close();
    await reader.maintain();
    const after: number[] = [];
    for (let k = 0; k < 10; k++) {
      const t = performance.now();
      await reader.fold(`w${k % shards}-i${k}`);
      after.push(performance.now() - t);
    }
    console.log(`     after merge + maintenance: p50 ${ms(pct(after, 50))}`);
    await reader.close();
  }
}
ddb.destroy();
await proxy.close();
