/**
 * Snapshots on an s3:// root (Ceph RGW, leases and coordination in DynamoDB Local): the scenario
 * of test/support/snapshot-scenario.ts (two writers unmerged, then appends, merges, maintenance
 * with every retention 0 and a purge; the snapshot's export byte for byte as it was), Lance's tag
 * kept on S3 through the clean-up, and `dgcl snapshot` / `export --snapshot` on the same root; a
 * snapshot dropped between its lookup and its read (NOT_FOUND), and one whose tag went outside
 * dgcl (CORRUPT); maintenance sweeping a dead attempt's tag.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { describe, expect, it } from 'vitest';
import { S3Client } from '@aws-sdk/client-s3';
import { openLog } from '../lib/index.ts';
import { pruneCutoffMs } from '../lib/log/maintain/tagged.ts';
import { readsOf } from '../lib/log/reads.ts';
import { lanceStorageOptions, parseRoot, s3ClientConfig } from '../lib/storage/location.ts';
import { S3ObjectStore } from '../lib/storage/s3.ts';
import { run } from './support/cli.ts';
import { servers, useLeaseTable } from './support/servers.ts';
import { snapshotScenario } from './support/snapshot-scenario.ts';

const table = useLeaseTable();

describe('snapshots on an s3:// root (RGW)', () => {
  it('a snapshot taken with two writers unmerged exports byte for byte as then after appends, merges, maintenance and a purge; its base version survives the clean-up', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-snapshot-s3-'));
    const root = `s3://${servers.bucket}/snapshot-${randomUUID().slice(0, 8)}`;
    const env = { ...(process.env as Record<string, string>), DGCL_LEASE_TABLE: table };
    const { log, baseVersion, events } = await snapshotScenario({ root, env, dir });
    try {
      // The clean-up on S3 pruned every version older than the tagged one (but those of its last
      // second: lib/log/maintain/tagged.ts) and kept that one.
      const db = await lancedb.connect(`${root}/datagen_checkpoints/p/e`, { storageOptions: lanceStorageOptions(parseRoot(root), process.env) });
      const base = await db.openTable('log');
      const all = await base.listVersions();
      const taggedAt = all.find((x) => x.version === baseVersion)!.timestamp.getTime();
      expect(all.filter((x) => x.version < baseVersion! && x.timestamp.getTime() < taggedAt - 1000).map((x) => x.version)).toEqual([]);

      // The CLI reads the same snapshot on the same root.
      const flags = ['--root', root, '--pipeline', 'p', '--experiment', 'e'];
      const listed = await run(['snapshot', ...flags, '--list', '--json'], { env });
      expect(listed.code, listed.stderr).toBe(0);
      expect(JSON.parse(listed.stdout)).toMatchObject({ name: 's1', baseVersion, events });
      const out = path.join(dir, 'cli', 'items.jsonl');
      const exp = await run(['export', ...flags, '--status', 'any', '--snapshot', 's1', '--out', out, '--blobs', path.join(dir, 'cli', 'blobs')], { env });
      expect(exp.code, exp.stderr).toBe(0);
      expect(readFileSync(out)).toEqual(readFileSync(path.join(dir, 'live-then', 'items.jsonl')));
      const unknown = await run(['report', ...flags, '--snapshot', 's2', '--out', path.join(dir, 'r.html')], { env });
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toMatch(/NOT_FOUND: no snapshot "s2" in s3:\/\/.*; its snapshots: "s1"\n$/);
    } finally {
      await log.close();
    }
  });

  it("maintenance on S3 sweeps a dead attempt's tag (no record, its marker old) and the clean-up cutoff moves past it; a young attempt's tag is kept", async () => {
    const prefix = `snapshot-sweep-${randomUUID().slice(0, 8)}`;
    const root = `s3://${servers.bucket}/${prefix}`;
    const env = { ...(process.env as Record<string, string>), DGCL_LEASE_TABLE: table };
    const log = await openLog({ root, pipeline: 'p', experiment: 'e', env, mergeIdleMs: 0, versionRetentionMs: 0 });
    try {
      const store = new S3ObjectStore({ client: new S3Client(s3ClientConfig()), bucket: servers.bucket, basePrefix: `${prefix}/datagen_checkpoints/p/e/log.lance` });
      const db = await lancedb.connect(`${root}/datagen_checkpoints/p/e`, { storageOptions: lanceStorageOptions(parseRoot(root), process.env) });
      const base = () => db.openTable('log');
      /** An attempt that tagged version `v`, then stopped before its record; its marker `ageMs` old. */
      const attempt = async (nonce: string, v: number, ageMs: number) => {
        await store.put(`_dgcl/snapshots/attempts/${nonce}.json`, JSON.stringify({ name: 'x', startedAtMs: Date.now() - ageMs }));
        await (await (await base()).tags()).create(`dgcl-snap-${nonce}`, v);
      };
      await log.append([{ itemId: 'a', runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: 1 } }]);
      await log.mergeOwnShard();
      const deadAt = await (await base()).version();
      await attempt('00000000000000d5', deadAt, 7 * 3600 * 1000);
      await log.append([{ itemId: 'b', runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: 2 } }]);
      await log.mergeOwnShard();
      const youngAt = await (await base()).version();
      await attempt('00000000000000a6', youngAt, 60_000);
      const times = new Map((await (await base()).listVersions()).map((x) => [x.version, x.timestamp.getTime()]));
      expect(await pruneCutoffMs(await base(), store, Date.now())).toBe(times.get(deadAt)! - 1000);

      const r = await log.maintain();
      expect(r.failures).toEqual([]);
      expect(r.sweptSnapshotAttempts).toEqual(['00000000000000d5']);
      expect(Object.keys(await (await (await base()).tags()).list())).toEqual(['dgcl-snap-00000000000000a6']);
      expect(await store.list('_dgcl/snapshots/attempts')).toEqual(['00000000000000a6.json']);
      expect(await pruneCutoffMs(await base(), store, Date.now())).toBe(times.get(youngAt)! - 1000);
    } finally {
      await log.close();
    }
  });

  it('a snapshot dropped between its lookup and its read is NOT_FOUND naming it and the log; its tag deleted with the record still there is CORRUPT', async () => {
    const root = `s3://${servers.bucket}/snapshot-drop-${randomUUID().slice(0, 8)}`;
    const env = { ...(process.env as Record<string, string>), DGCL_LEASE_TABLE: table };
    const log = await openLog({ root, pipeline: 'p', experiment: 'e', env, mergeIdleMs: 0 });
    try {
      await log.append([{ itemId: 'a', runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: 1 } }]);
      await log.mergeOwnShard();
      await log.append([{ itemId: 'b', runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: 2 } }]);
      await log.snapshot('s');
      await log.snapshot('kept');
      const view = await readsOf(log).openSnapshot('s');
      await log.dropSnapshot('s');
      await expect(view.aggregates()).rejects.toMatchObject({
        code: 'NOT_FOUND',
        retryable: false,
        message: `snapshot "s" of ${log.uri} was dropped while it was being read; dgcl snapshot --list lists the snapshots it has`,
      });
      // A tag deleted outside dgcl, its record still there.
      const kept = await readsOf(log).openSnapshot('kept');
      const db = await lancedb.connect(`${root}/datagen_checkpoints/p/e`, { storageOptions: lanceStorageOptions(parseRoot(root), process.env) });
      await (await (await db.openTable('log')).tags()).delete(kept.record.baseTag!);
      await expect(kept.aggregates()).rejects.toMatchObject({ code: 'CORRUPT', message: `snapshot "kept" of ${log.uri}: the base's tag ${kept.record.baseTag} is gone (deleted outside dgcl?): the snapshot cannot be read` });
    } finally {
      await log.close();
    }
  });
});
