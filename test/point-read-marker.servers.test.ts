/**
 * Point reads of an S3 log whose item markers are in the lease table, while a writer's generation
 * is live (lib/log/log.ts `itemMarker`): with the table (the deployed fold and resume handlers),
 * the item's marker is read before and after the read; in a process without the table (no
 * DGCL_LEASE_TABLE), or one IAM refuses, the read goes without the check, as it did before the
 * check existed, instead of failing. Ceph RGW and DynamoDB Local (through a proxy that can refuse).
 */
import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLog, type CheckpointLog } from '../lib/index.ts';
import { ManualClock } from '../lib/clock.ts';
import { DynamoLeaseStore } from '../lib/lease/dynamo.ts';
import { itemKey } from '../lib/log/layout.ts';
import { createBatch } from './support/batches.ts';
import { dynamoOp, startHttpFaultProxy, type HttpFaultProxy } from './support/http-fault-proxy.ts';
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

describe('a point read with the lease table (as the deployed fold and resume handlers read)', () => {
  let proxy: HttpFaultProxy;
  let client: DynamoDBClient;
  beforeAll(async () => {
    proxy = await startHttpFaultProxy({ target: process.env.AWS_ENDPOINT_URL_DYNAMODB! });
    client = new DynamoDBClient({ endpoint: proxy.endpoint, region: process.env.AWS_REGION ?? 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });
  });
  afterAll(async () => {
    client.destroy();
    await proxy.close();
  });

  const withReader = async (body: (reader: CheckpointLog, writer: CheckpointLog) => Promise<void>, o: { clock?: ManualClock; readerTable?: string } = {}) => {
    const writer = await openLog({ root, pipeline: 'qa', experiment: 'table', env: { ...process.env, DGCL_LEASE_TABLE: table }, mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const leases = new DynamoLeaseStore({ client, table: o.readerTable ?? table, ...(o.clock ? { clock: o.clock } : {}) });
    const reader = await openLog({ root, pipeline: 'qa', experiment: 'table', leases, ...(o.clock ? { clock: o.clock } : {}) });
    try {
      await body(reader, writer);
    } finally {
      await reader.close();
      await writer.close();
    }
  };

  it("reads the item's marker before and after the read", async () => {
    await withReader(async (reader, writer) => {
      const [ack] = await writer.append([createBatch('doc-2')]);
      await reader.fold('doc-2'); // the first point read also reads the log's record once
      proxy.setScript(undefined);
      const st = await reader.fold('doc-2');
      expect(st.lastSeq).toBe(ack!.lastSeq);
      const markerReads = proxy.log.filter((e) => dynamoOp(e.req) === 'GetItem' && e.req.body.toString().includes(itemKey('doc-2')));
      expect(markerReads.map((e) => e.upstreamStatus)).toEqual([200, 200]);
    });
  });

  it('reads without the check, as before it existed, while IAM refuses the marker read, and asks again a minute later', async () => {
    const clock = new ManualClock(Date.now());
    await withReader(
      async (reader, writer) => {
        let refuse = true;
        proxy.setScript((req) =>
          refuse && dynamoOp(req) === 'GetItem'
            ? { status: 400, headers: { 'content-type': 'application/x-amz-json-1.0' }, body: JSON.stringify({ __type: 'com.amazon.coral.service#AccessDeniedException', message: 'not authorized to perform: dynamodb:GetItem' }) }
            : 'forward',
        );
        const [ack] = await writer.append([createBatch('doc-3')]);
        expect((await reader.fold('doc-3')).lastSeq).toBe(ack!.lastSeq);
        expect((await reader.trajectory('doc-3')).length).toBe(ack!.lastSeq);
        // Refused once, then not asked again for a while: the log object reads without the check.
        const getItems = () => proxy.log.filter((e) => dynamoOp(e.req) === 'GetItem').map((e) => e.upstreamStatus ?? 'refused');
        expect(getItems()).toEqual(['refused']);
        refuse = false; // the grant arrives
        clock.advance(61_000);
        expect((await reader.fold('doc-3')).lastSeq).toBe(ack!.lastSeq);
        // The log's record, then the item's marker before and after the read.
        expect(getItems()).toEqual(['refused', 200, 200, 200]);
      },
      { clock },
    );
  });

  it('reads without the check when the lease table it was given does not exist', async () => {
    await withReader(
      async (reader, writer) => {
        const [ack] = await writer.append([createBatch('doc-4')]);
        proxy.setScript(undefined);
        expect((await reader.fold('doc-4')).lastSeq).toBe(ack!.lastSeq);
        expect(proxy.log.filter((e) => dynamoOp(e.req) === 'GetItem').map((e) => e.upstreamStatus)).toEqual([400]);
      },
      { readerTable: `dgcl-missing-${randomUUID().slice(0, 8)}` },
    );
  });
});
