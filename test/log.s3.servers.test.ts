import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { beforeAll } from 'vitest';
import { createLeaseTable } from '../lib/lease/dynamo.ts';
import { logStoreConformance } from './conformance/log.ts';

const bucket = process.env.DGCL_TEST_BUCKET;
if (!bucket || !process.env.AWS_ENDPOINT_URL_S3 || !process.env.AWS_ENDPOINT_URL_DYNAMODB) {
  throw new Error('the s3:// log suite needs RGW and DynamoDB Local: run it through `npm test` (scripts/test.sh), which starts both');
}
const table = `dgcl-leases-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  const client = new DynamoDBClient({});
  await createLeaseTable(client, table);
  client.destroy();
});

logStoreConformance('s3:// root on Ceph RGW, leases on DynamoDB Local', {
  newRoot: async () => ({ root: `s3://${bucket}/log-suite-${randomUUID().slice(0, 8)}`, env: { DGCL_LEASE_TABLE: table } }),
});
