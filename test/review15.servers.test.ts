/**
 * review15 (servers: leases on DynamoDB Local, local roots with real Lance).
 *
 * F3: the sentinel compares the log's location as spelled by the opener (`objects.baseUri`,
 *     `path.resolve` of a local root: symlinks are not resolved). The same log, on the same
 *     disk, opened once through a symlinked folder and once through its real path is taken for
 *     a copy of itself and refused for writing (CORRUPT), although both processes share every
 *     record. Expected: the log is written from either spelling (one first ack, then a
 *     duplicate). Proposed fix: compare `realpath` for local roots (S3 locations are canonical
 *     already), and name the location spelling in the CORRUPT message.
 * F4: the sentinel guards writers against "another lease table" (review14 F2), but maintain()
 *     looks at it only in its `claims` step, near the end, and then only reports a failed step.
 *     Before it, a maintainer opened with another lease table takes "orphan" slots in ITS table
 *     (free there) and seals the live writer's epoch in the log; the writer, whose epoch check
 *     reads the right table, keeps committing above the seal and acks batches no read ever
 *     shows (I1). Proposed fix: maintain() resolves the coordination store (the sentinel check)
 *     before it takes the maintainer lease, and a CORRUPT / INVALID_INPUT there ends the pass
 *     with nothing written.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLeaseTable, DynamoLeaseStore, openLog } from '../lib/index.ts';
import { slotKey } from '../lib/lease/slots.ts';
import type { LanceCheckpointLog } from '../lib/log/log.ts';
import { createBatch, stepBatch } from './support/batches.ts';

const ddb = new DynamoDBClient({});
const table = `dgcl-rev15-${randomUUID().slice(0, 8)}`;
const otherTable = `dgcl-rev15b-${randomUUID().slice(0, 8)}`;
let leases: DynamoLeaseStore;
let otherLeases: DynamoLeaseStore;
const dirs: string[] = [];
beforeAll(async () => {
  await createLeaseTable(ddb, table);
  leases = new DynamoLeaseStore({ client: ddb, table });
  await createLeaseTable(ddb, otherTable);
  otherLeases = new DynamoLeaseStore({ client: ddb, table: otherTable });
});
afterAll(async () => {
  for (const t of [table, otherTable]) await ddb.send(new DeleteTableCommand({ TableName: t })).catch(() => undefined);
  ddb.destroy();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('review15 (servers)', () => {
  it('F3: one log opened through a symlinked root and through its real path is not a copy of itself', async () => {
    const top = realpathSync(mkdtempSync(path.join(tmpdir(), 'dgcl-rev15-')));
    dirs.push(top);
    const real = path.join(top, 'real');
    mkdirSync(real);
    const link = path.join(top, 'link');
    symlinkSync(real, link);
    const experiment = `e-${randomUUID().slice(0, 8)}`;
    const logs: LanceCheckpointLog[] = [];
    const open = async (root: string, slot: number) => {
      const log = await openLog({ root, pipeline: 'p', experiment, owner: `o${slot}`, leases, slots: 2, slot });
      logs.push(log);
      return log;
    };
    try {
      const a = await open(`file://${link}`, 0);
      const [first] = await a.append([createBatch('i1')]);
      expect(first!.duplicate).toBe(false);
      // Another process of the same machine, configured with the real path of the same folder.
      const b = await open(real, 1);
      const [again] = await b.append([createBatch('i1')]);
      expect(again).toEqual({ ...first, duplicate: true });
    } finally {
      for (const l of logs) await l.close().catch(() => undefined);
    }
  });

  it('F4: a maintainer opened with another lease table does not seal a live writer of the log (I1)', async () => {
    const rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'dgcl-rev15-')));
    dirs.push(rootDir);
    const root = `file://${rootDir}`;
    const experiment = `e-${randomUUID().slice(0, 8)}`;
    const logs: LanceCheckpointLog[] = [];
    try {
      const w = await openLog({ root, pipeline: 'p', experiment, owner: 'w', leases, slots: 1 });
      logs.push(w);
      const [a1] = await w.append([createBatch('i1')]);
      expect(a1!.duplicate).toBe(false);
      // The other table has seen this slot before (its epoch counter is ahead of the log's).
      for (let i = 0; i < 3; i++) await otherLeases.release(await otherLeases.acquire(slotKey('p', experiment, 0), 'elsewhere', 60_000));
      const m = await openLog({ root, pipeline: 'p', experiment, owner: 'm', leases: otherLeases, slots: 1 });
      logs.push(m);
      const report = await m.maintain().catch((e: unknown) => e);
      // The writer goes on: its epoch check reads its own (the log's) table.
      const [a2] = await w.append([stepBatch('i1', 1)]);
      expect(a2!.duplicate).toBe(false);
      const reader = await openLog({ root, pipeline: 'p', experiment, owner: 'r', leases, slots: 1 });
      logs.push(reader);
      const state = await reader.fold('i1');
      expect({ lastSeq: state.lastSeq, maintain: report instanceof Error ? report.name : 'ran' }).toEqual({ lastSeq: a2!.lastSeq, maintain: 'CorruptError' });
    } finally {
      for (const l of logs) await l.close().catch(() => undefined);
    }
  });
});
