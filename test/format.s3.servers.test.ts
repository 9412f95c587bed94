/** Tables on an s3:// root are written in Lance file format 2.2 (docs/design/performance.md, "Folds"). */
import { randomUUID } from 'node:crypto';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { s3ClientConfig } from '../lib/storage/location.ts';
import { fileFormat } from './support/lance-format.ts';
import { servers, useLeaseTable } from './support/servers.ts';

const table = useLeaseTable();
const s3 = new S3Client(s3ClientConfig(process.env));

async function formats(prefix: string): Promise<string[]> {
  const listed = await s3.send(new ListObjectsV2Command({ Bucket: servers.bucket, Prefix: prefix }));
  const keys = (listed.Contents ?? []).map((o) => o.Key!).filter((k) => /\/data\/[^/]+\.lance$/.test(k));
  return Promise.all(
    keys.map(async (Key) => {
      const r = await s3.send(new GetObjectCommand({ Bucket: servers.bucket, Key, Range: 'bytes=-8' }));
      return fileFormat(await r.Body!.transformToByteArray());
    }),
  );
}

it('shard and base data files of an s3:// log are format 2.2', async () => {
  const root = `format-${randomUUID().slice(0, 8)}`;
  const log = await openLog({ root: `s3://${servers.bucket}/${root}`, pipeline: 'p', experiment: 'e', env: { ...process.env, DGCL_LEASE_TABLE: table } });
  await log.append([{ itemId: 'a', runId: 'r', create: {}, set: { x: 1 } }]);
  const logPrefix = `${root}/datagen_checkpoints/p/e/log.lance`;
  expect(await formats(`${logPrefix}/_dgcl/shards/`)).toEqual(['2.2']);
  await log.close();
  expect(await formats(`${logPrefix}/data/`)).toEqual(['2.2']);
});
