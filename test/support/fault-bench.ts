/**
 * The fixture of the fault suites: an S3 fault proxy (the whole process's Lance goes through it,
 * as Lance reads AWS_ENDPOINT_URL_S3 from the environment), a DynamoDB fault proxy, a fresh
 * lease table, one root, and logs opened through both proxies (closed by `closeAll`).
 */
import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { createLeaseTable, DynamoLeaseStore } from '../../lib/lease/dynamo.ts';
import type { CheckpointLog } from '../../lib/api.ts';
import { classifyDynamo, dynamoErrorAnswer, startFaultProxy, type FaultProxy } from './fault-proxy.ts';
import { openFaultLog, type FaultLogOptions } from './fault-log.ts';
import { startS3FaultProxy } from './s3-proxy.ts';
import { servers } from './servers.ts';

/** Every client of a fault log gives up on a request after this long. */
export const REQUEST_TIMEOUT_MS = 2000;

/** Logs of one test, closed together (tests run side by side, each with its own). */
export interface FaultSession {
  /** A log of `experiment` through both proxies. */
  log(experiment: string, extra?: Partial<FaultLogOptions>): CheckpointLog;
  close(): Promise<void>;
}

export interface FaultBench {
  s3: FaultProxy;
  ddb: FaultProxy;
  root: string;
  table: string;
  session(): FaultSession;
  /** A lease store on the DynamoDB server itself (setting up lease states, never faulted). */
  leases: DynamoLeaseStore;
  stop(): Promise<void>;
}

export async function startFaultBench(prefix: string): Promise<FaultBench> {
  const s3Upstream = servers.s3Endpoint;
  const ddbUpstream = process.env.AWS_ENDPOINT_URL_DYNAMODB!;
  const s3 = await startS3FaultProxy(s3Upstream, REQUEST_TIMEOUT_MS * 2.5);
  const ddb = await startFaultProxy({ target: ddbUpstream, classify: classifyDynamo, errorAnswer: dynamoErrorAnswer, holdMs: REQUEST_TIMEOUT_MS * 2.5 });
  process.env.AWS_ENDPOINT_URL_S3 = s3.endpoint;
  const table = `dgcl-faults-${randomUUID().slice(0, 8)}`;
  const client = new DynamoDBClient({ endpoint: ddbUpstream });
  await createLeaseTable(client, table);
  const leases = new DynamoLeaseStore({ client, table });
  const root = `s3://${servers.bucket}/${prefix}-${randomUUID().slice(0, 8)}`;
  const sessions = new Set<FaultSession>();
  const session = (): FaultSession => {
    const open: CheckpointLog[] = [];
    const s: FaultSession = {
      log(experiment, extra = {}) {
        const l = openFaultLog({
          root,
          pipeline: 'p',
          experiment,
          s3Endpoint: s3.endpoint,
          dynamoEndpoint: ddb.endpoint,
          table,
          requestTimeoutMs: REQUEST_TIMEOUT_MS,
          ...extra,
        });
        open.push(l);
        return l;
      },
      async close() {
        sessions.delete(s);
        for (const l of open.splice(0)) await l.close().catch(() => undefined);
      },
    };
    sessions.add(s);
    return s;
  };
  return {
    s3,
    ddb,
    root,
    table,
    leases,
    session,
    async stop() {
      s3.disarm();
      ddb.disarm();
      for (const s of [...sessions]) await s.close();
      process.env.AWS_ENDPOINT_URL_S3 = s3Upstream;
      client.destroy();
      await s3.close();
      await ddb.close();
    },
  };
}
