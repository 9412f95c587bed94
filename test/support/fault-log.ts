/**
 * A log on an s3:// root whose every client goes through the fault proxies and gives up on a
 * request after `requestTimeoutMs`: the S3 client of the object store, Lance's object store
 * (storage option `timeout`) and the DynamoDB client of the lease store. openLog() configures
 * no request timeouts, so a held answer would hang an append there; a deployment that wants
 * appends to end sets them, and that is what the "timeout" faults exercise.
 */
import type { CoordPreference } from '../../lib/coord/choose.ts';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { DEFAULTS } from '../../lib/index.ts';
import { DynamoLeaseStore } from '../../lib/lease/dynamo.ts';
import { LanceCheckpointLog } from '../../lib/log/log.ts';
import type { WriterHooks } from '../../lib/log/write/writer.ts';
import { systemClock } from '../../lib/clock.ts';
import { lanceStorageOptions, logLocation, logUri, parseRoot, s3ClientConfig, type S3Location } from '../../lib/storage/location.ts';
import { S3ObjectStore } from '../../lib/storage/s3.ts';

export interface FaultLogOptions {
  root: string;
  pipeline: string;
  experiment: string;
  /** The S3 proxy's endpoint (Lance also reads AWS_ENDPOINT_URL_S3: point the process at it too). */
  s3Endpoint: string;
  /** The DynamoDB proxy's endpoint, or the server's. */
  dynamoEndpoint: string;
  table: string;
  requestTimeoutMs: number;
  owner?: string;
  slot?: number;
  slots?: number;
  mergeEveryCommits?: number;
  leaseTtlMs?: number;
  hooks?: WriterHooks;
  /** Where a new log keeps its item markers and claims (default: the lease table). */
  coordination?: CoordPreference;
}

export function openFaultLog(o: FaultLogOptions): LanceCheckpointLog {
  const env = { ...process.env, AWS_ENDPOINT_URL_S3: o.s3Endpoint };
  const root = parseRoot(o.root);
  const handler = { requestTimeout: o.requestTimeoutMs, connectionTimeout: o.requestTimeoutMs, throwOnRequestTimeout: true };
  const s3 = new S3Client({ ...s3ClientConfig(env), requestHandler: handler });
  const ddb = new DynamoDBClient({ endpoint: o.dynamoEndpoint, requestHandler: handler });
  const leases = new DynamoLeaseStore({ client: ddb, table: o.table });
  return new LanceCheckpointLog({
    pipeline: o.pipeline,
    experiment: o.experiment,
    uri: logUri(root, o.pipeline, o.experiment),
    objects: S3ObjectStore.at(s3, logLocation(root, o.pipeline, o.experiment) as S3Location),
    // Lance: the same timeout, and 2 retries (3 attempts, like the SDK) instead of 10 with
    // backoff, so that a fault on every attempt reaches the log in a second, not a minute.
    storageOptions: {
      ...lanceStorageOptions(root, env),
      timeout: `${o.requestTimeoutMs}ms`,
      connect_timeout: `${o.requestTimeoutMs}ms`,
      client_max_retries: '2',
      client_retry_timeout: '10',
    },
    leases,
    owner: o.owner ?? `fault-${Math.random().toString(36).slice(2, 8)}`,
    clock: systemClock,
    slots: o.slots ?? 4,
    ...(o.slot !== undefined ? { slot: o.slot } : {}),
    leaseTtlMs: o.leaseTtlMs ?? DEFAULTS.leaseTtlMs,
    mergeEveryCommits: o.mergeEveryCommits ?? 1000,
    mergeEveryBytes: DEFAULTS.mergeEveryBytes,
    mergeIdleMs: 0, // merges only where a test asks for them, as mergeEveryCommits above
    maxBatchesPerCommit: DEFAULTS.maxBatchesPerCommit,
    cachedItems: DEFAULTS.cachedItems,
    versionRetentionMs: DEFAULTS.versionRetentionMs,
    claimRetentionMs: DEFAULTS.claimRetentionMs,
    deletionRetentionMs: DEFAULTS.deletionRetentionMs,
    ...(o.hooks ? { hooks: o.hooks } : {}),
    ...(o.coordination ? { coordination: o.coordination } : {}),
    onClose: async () => {
      s3.destroy();
      ddb.destroy();
    },
  });
}
