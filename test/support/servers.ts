/**
 * Preamble of the servers suites that run the log on an s3:// root (Ceph RGW) with leases in
 * DynamoDB (DynamoDB Local): the environment scripts/test.sh sets up, and a fresh lease table.
 * Never skipped: importing this without the servers fails loudly.
 */
import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { beforeAll } from 'vitest';
import { createLeaseTable } from '../../lib/lease/dynamo.ts';

export interface Servers {
  /** The test bucket (DGCL_TEST_BUCKET). */
  bucket: string;
  /** The S3 endpoint (AWS_ENDPOINT_URL_S3) as it was when the suite started. */
  s3Endpoint: string;
}

/** The servers' environment, or a clear error saying how to get it. */
export function requireServers(env: NodeJS.ProcessEnv = process.env): Servers {
  const bucket = env.DGCL_TEST_BUCKET;
  const s3Endpoint = env.AWS_ENDPOINT_URL_S3;
  if (!bucket || !s3Endpoint || !env.AWS_ENDPOINT_URL_DYNAMODB) {
    throw new Error(
      'these tests need RGW and DynamoDB Local (DGCL_TEST_BUCKET, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_DYNAMODB): ' +
        'run them through `npm test` (scripts/test.sh), which starts both',
    );
  }
  return { bucket, s3Endpoint };
}

export const servers = requireServers();

/**
 * Registers a beforeAll that creates a fresh lease table in DynamoDB Local; returns its name
 * (`<prefix>-<random>`), usable once the suite's hooks ran.
 */
export function useLeaseTable(prefix = 'dgcl-leases'): string {
  const table = `${prefix}-${randomUUID().slice(0, 8)}`;
  beforeAll(async () => {
    const client = new DynamoDBClient({});
    await createLeaseTable(client, table);
    client.destroy();
  });
  return table;
}
