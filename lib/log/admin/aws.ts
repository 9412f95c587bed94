/**
 * The stores of an s3:// place (lib/log/admin/place.ts): the S3 object stores of the log and
 * its root, and, with `DGCL_LEASE_TABLE`, the DynamoDB lease store and that table's records on
 * one client. Loaded for s3:// roots only (the SDK's clients take a while to load).
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Clock } from '../../clock.ts';
import { DynamoLeaseStore } from '../../lease/dynamo.ts';
import { MissingLeaseStore } from '../../lease/missing.ts';
import type { LeaseStore } from '../../lease/types.ts';
import { s3ObjectStores } from '../../open-aws.ts';
import type { Env, S3Location } from '../../storage/location.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { TableRecords } from './table-records.ts';

/** As lib/open-aws.ts's: a request that never answers fails instead of hanging the command. */
const DYNAMODB_REQUESTS = { connectionTimeout: 3_000, requestTimeout: 10_000, throwOnRequestTimeout: true } as const;

export function s3Stores(
  root: S3Location,
  loc: S3Location,
  env: Env,
  clock: Clock,
  withLeases: boolean,
): { objects: ObjectStore; rootObjects: ObjectStore; leases: LeaseStore | null; records: TableRecords | null; close: () => Promise<void> } {
  const { objects, rootObjects } = s3ObjectStores(root, loc, env);
  const table = env.DGCL_LEASE_TABLE;
  if (!withLeases) return { objects, rootObjects, leases: null, records: null, close: async () => {} };
  if (!table) return { objects, rootObjects, leases: new MissingLeaseStore(), records: null, close: async () => {} };
  const client = new DynamoDBClient({ requestHandler: DYNAMODB_REQUESTS });
  return {
    objects,
    rootObjects,
    leases: new DynamoLeaseStore({ client, table, clock }),
    records: new TableRecords({ client, table, clock }),
    close: async () => client.destroy(),
  };
}
