/**
 * What an s3:// root needs from the AWS SDK: the S3 object store and the DynamoDB lease store.
 * Loaded by openLog on the first s3:// root only (the SDK's clients take a while to load).
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import type { Clock } from './clock.ts';
import { localLeaseStore } from './lease/default-local.ts';
import { DynamoLeaseStore } from './lease/dynamo.ts';
import { MissingLeaseStore } from './lease/missing.ts';
import type { LeaseStore } from './lease/types.ts';
import { S3ObjectStore } from './storage/s3.ts';
import { s3ClientConfig, type Env, type Location, type S3Location } from './storage/location.ts';

/**
 * A request that never answers must not hang an append forever: it fails (UNAVAILABLE, the
 * outcome unknown, which the log handles like any lost answer). The log's own S3 objects are
 * small; lease requests are single-item.
 */
const S3_REQUESTS = {
  connectionTimeout: 5_000,
  requestTimeout: 30_000,
  throwOnRequestTimeout: true,
  // A group commit sends one claim PUT and one marker GET per batch at once: the SDK's default of
  // 50 sockets queued them in waves.
  httpAgent: { keepAlive: true, maxSockets: 256 },
  httpsAgent: { keepAlive: true, maxSockets: 256 },
} as const;
const DYNAMODB_REQUESTS = { connectionTimeout: 3_000, requestTimeout: 10_000, throwOnRequestTimeout: true } as const;

/** The object stores of a root on S3 and of a log in it, on one client. */
export function s3ObjectStores(root: S3Location, loc: S3Location, env: Env): { objects: S3ObjectStore; rootObjects: S3ObjectStore } {
  const client = new S3Client({ ...s3ClientConfig(env), requestHandler: S3_REQUESTS });
  return { objects: S3ObjectStore.at(client, loc), rootObjects: S3ObjectStore.at(client, root) };
}

/** The lease store a root uses when none is given, and how to close what it opened. */
export function defaultLeaseStore(
  root: Location,
  env: Env,
  clock: Clock,
): { store: LeaseStore; close: () => Promise<void> } {
  if (root.kind === 'file') return localLeaseStore(root.dir, clock);
  const table = env.DGCL_LEASE_TABLE;
  if (!table) {
    // Reads need no lease: open anyway; the first use of the store says what is missing.
    return { store: new MissingLeaseStore(), close: async () => {} };
  }
  const client = new DynamoDBClient({ requestHandler: DYNAMODB_REQUESTS });
  const store = new DynamoLeaseStore({ client, table, clock });
  return {
    store,
    close: async () => {
      await store.close();
      client.destroy();
    },
  };
}

