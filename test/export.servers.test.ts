/**
 * Export and report to s3:// (Ceph RGW): the uploaded objects equal what a local export writes;
 * blob files land under the --blobs prefix.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportItems } from '../lib/export/export.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { report } from '../lib/report/report.ts';
import { s3ClientConfig } from '../lib/storage/location.ts';
import { BLOB, buildExperiment } from './support/report-log.ts';
import { servers } from './support/servers.ts';

let dir: string;
let log: CheckpointLog;
const s3 = new S3Client(s3ClientConfig(process.env));
const prefix = `export-${randomUUID().slice(0, 8)}`;

async function get(key: string): Promise<Buffer> {
  const r = await s3.send(new GetObjectCommand({ Bucket: servers.bucket, Key: key }));
  return Buffer.from(await r.Body!.transformToByteArray());
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'dgcl-export-s3-'));
  log = await buildExperiment(path.join(dir, 'root'));
});

afterAll(async () => {
  await log.close();
  s3.destroy();
});

describe('export and report to s3://', () => {
  it('an export uploaded to S3 equals the local one, blobs included', async () => {
    const local = path.join(dir, 'local.parquet');
    await exportItems(log, { out: local, status: 'any', fields: ['n', 'image'] });
    const r = await exportItems(log, { out: `s3://${servers.bucket}/${prefix}/items.parquet`, status: 'any', fields: ['n', 'image'] });
    expect(r.out).toBe(`s3://${servers.bucket}/${prefix}/items.parquet`);
    expect(await get(`${prefix}/items.parquet`)).toEqual(readFileSync(local));

    const b = await exportItems(log, { out: `s3://${servers.bucket}/${prefix}/items.jsonl`, blobs: `s3://${servers.bucket}/${prefix}/blobs`, fields: ['image'] });
    // One file per completed item holding the blob field (the default status is completed).
    const withBlob = (await log.allStates()).filter((s) => s.status === 'completed' && s.fields.image !== undefined);
    expect(b.blobFiles).toBe(withBlob.length);
    const rows = (await get(`${prefix}/items.jsonl`)).toString('utf8').trim().split('\n').map((l) => JSON.parse(l) as { item_id: string; image: string | null });
    const withImage = rows.filter((x) => x.image !== null);
    expect(withImage.length).toBe(b.blobFiles);
    for (const row of withImage) {
      // Relative to the export's key (same bucket).
      expect(row.image).toBe(`blobs/${row.item_id}/image`);
      expect(await get(`${prefix}/blobs/${row.item_id}/image`)).toEqual(BLOB);
    }
    // A local export of S3 blobs: no relative path leads from one to the other.
    const mixed = path.join(dir, 'mixed.jsonl');
    await exportItems(log, { out: mixed, blobs: `s3://${servers.bucket}/${prefix}/blobs`, fields: ['image'] });
    for (const row of readFileSync(mixed, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { item_id: string; image: string | null })) {
      if (row.image !== null) expect(row.image).toBe(`s3://${servers.bucket}/${prefix}/blobs/${row.item_id}/image`);
    }
  });

  it('a report uploaded to S3 is the page the result holds', async () => {
    const r = await report(log, { out: `s3://${servers.bucket}/${prefix}/report.html` });
    expect((await get(`${prefix}/report.html`)).toString('utf8')).toBe(r.html);
  });
});
