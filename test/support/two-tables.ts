/**
 * Two lease tables on DynamoDB Local for one test file (a log's own and "another" one), made
 * before its tests and dropped after, with the temp folders the tests register.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll } from 'vitest';
import { createLeaseTable, DynamoLeaseStore } from '../../lib/index.ts';

export interface TwoTables {
  leases: DynamoLeaseStore;
  otherLeases: DynamoLeaseStore;
  /** Folders removed after the file's tests. */
  dirs: string[];
}

export function useTwoLeaseTables(prefix: string): TwoTables {
  const ddb = new DynamoDBClient({});
  const names = [`${prefix}-${randomUUID().slice(0, 8)}`, `${prefix}b-${randomUUID().slice(0, 8)}`] as const;
  const t = { dirs: [] } as unknown as TwoTables;
  beforeAll(async () => {
    for (const n of names) await createLeaseTable(ddb, n);
    t.leases = new DynamoLeaseStore({ client: ddb, table: names[0] });
    t.otherLeases = new DynamoLeaseStore({ client: ddb, table: names[1] });
  });
  afterAll(async () => {
    for (const n of names) await ddb.send(new DeleteTableCommand({ TableName: n })).catch(() => undefined);
    ddb.destroy();
    for (const d of t.dirs) rmSync(d, { recursive: true, force: true });
  });
  return t;
}
