/**
 * A point read in a process without the lease table (as the fold and resume handlers are opened:
 * no DGCL_LEASE_TABLE) of an S3 log whose item markers are in the lease table, while a writer's
 * generation is live: it reads without the marker check (lib/log/log.ts `itemMarker`), as it did
 * before the check existed, instead of failing. Ceph RGW and DynamoDB Local.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { createBatch } from './support/batches.ts';
import { servers, useLeaseTable } from './support/servers.ts';

const { bucket } = servers;
const table = useLeaseTable();
const root = `s3://${bucket}/point-read-${randomUUID().slice(0, 8)}`;

describe('a point read without the lease table, of a log whose markers are there', () => {
  it('folds the item while a writer is live', async () => {
    const writer = await openLog({ root, pipeline: 'qa', experiment: 'e', env: { ...process.env, DGCL_LEASE_TABLE: table }, mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const env = { ...process.env };
    delete env.DGCL_LEASE_TABLE;
    const reader = await openLog({ root, pipeline: 'qa', experiment: 'e', env });
    try {
      const [ack] = await writer.append([createBatch('doc-1')]);
      const st = await reader.fold('doc-1');
      expect(st.lastSeq).toBe(ack!.lastSeq);
      expect((await reader.trajectory('doc-1')).length).toBe(ack!.lastSeq);
    } finally {
      await reader.close();
      await writer.close();
    }
  });
});
