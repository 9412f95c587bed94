/**
 * review16 (servers: leases on DynamoDB Local, local roots with real Lance): adversarial review
 * of the review15 fixes (c65d964, 2443719).
 *
 * F1 (I1): the review15 F4 fix (maintain() resolves the coordination store before it takes the
 *     maintainer lease) only stops a maintainer on another lease table when the log keeps its
 *     records in the table: the sentinel is the only thing that ties a log to a table. A log kept
 *     on objects (every log with data from before 0.2.0, and every log created while the fleet
 *     runs with DGCL_COORDINATION=objects, as README "Limits" tells an upgrade to do) has no
 *     sentinel: `ctx.coord()` answers the objects store whatever table the maintainer has. The
 *     maintainer then takes the "orphan" slot in ITS table (free there), seals the live writer's
 *     epoch in the log, and the writer, whose epoch check reads the right table, acks a batch
 *     committed above the seal that no read ever shows. A writer opened with another table does
 *     the same (its slot is free in its table; sealPredecessors seals the live epoch). Expected
 *     (as for table logs): the process on the wrong table stops with CORRUPT before it writes
 *     anything, and the ack stays visible.
 *     Proposed fix: tie every log opened with a DynamoDB lease store to its table, not only table
 *     logs: e.g. a choice record `objects <id>` whose sentinel `_dgcl/log` is put in the lease
 *     table like a table log's (a legacy log without a record gets it from its first 0.2.0
 *     writer or maintainer), checked by the same code before any slot is taken.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLeaseTable, DynamoLeaseStore, openLog } from '../lib/index.ts';
import { slotKey } from '../lib/lease/slots.ts';
import type { LanceCheckpointLog } from '../lib/log/log.ts';
import { createBatch, stepBatch } from './support/batches.ts';

const ddb = new DynamoDBClient({});
const table = `dgcl-rev16-${randomUUID().slice(0, 8)}`;
const otherTable = `dgcl-rev16b-${randomUUID().slice(0, 8)}`;
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

describe('review16 (servers)', () => {
  it('F1: a maintainer opened with another lease table does not seal a live writer of a log kept on objects (I1)', async () => {
    const rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'dgcl-rev16-')));
    dirs.push(rootDir);
    const root = `file://${rootDir}`;
    const experiment = `e-${randomUUID().slice(0, 8)}`;
    const logs: LanceCheckpointLog[] = [];
    try {
      // An upgrade in progress: the fleet writes new logs on objects (README "Limits").
      const w = await openLog({ root, pipeline: 'p', experiment, owner: 'w', leases, slots: 1, coordination: 'objects' });
      logs.push(w);
      const [a1] = await w.append([createBatch('i1')]);
      expect(a1!.duplicate).toBe(false);
      const choice = readFileSync(path.join(rootDir, 'datagen_checkpoints', 'p', experiment, 'log.lance', '_dgcl', 'coordination'), 'utf8');
      expect(choice).toMatch(/^objects [0-9a-f-]{36}$/);
      // The other table has seen this slot before (its epoch counter is ahead of the log's).
      for (let i = 0; i < 3; i++) await otherLeases.release(await otherLeases.acquire(slotKey('p', experiment, 0), 'elsewhere', 60_000));
      const m = await openLog({ root, pipeline: 'p', experiment, owner: 'm', leases: otherLeases, slots: 1, coordination: 'objects' });
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
  it('F1 (writers too): a writer opened with another lease table does not seal a live writer of a log kept on objects (I1)', async () => {
    const rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'dgcl-rev16-')));
    dirs.push(rootDir);
    const root = `file://${rootDir}`;
    const experiment = `e-${randomUUID().slice(0, 8)}`;
    const logs: LanceCheckpointLog[] = [];
    try {
      const w = await openLog({ root, pipeline: 'p', experiment, owner: 'w', leases, slots: 1, coordination: 'objects' });
      logs.push(w);
      const [a1] = await w.append([createBatch('i1')]);
      expect(a1!.duplicate).toBe(false);
      for (let i = 0; i < 3; i++) await otherLeases.release(await otherLeases.acquire(slotKey('p', experiment, 0), 'elsewhere', 60_000));
      // Another process, configured with another table, writes another item of the log.
      const x = await openLog({ root, pipeline: 'p', experiment, owner: 'x', leases: otherLeases, slots: 1, coordination: 'objects' });
      logs.push(x);
      const other = await x.append([createBatch('i2')]).catch((e: unknown) => e);
      const [a2] = await w.append([stepBatch('i1', 1)]);
      expect(a2!.duplicate).toBe(false);
      const reader = await openLog({ root, pipeline: 'p', experiment, owner: 'r', leases, slots: 1 });
      logs.push(reader);
      const state = await reader.fold('i1');
      expect({ lastSeq: state.lastSeq, other: other instanceof Error ? other.name : 'acked' }).toEqual({ lastSeq: a2!.lastSeq, other: 'CorruptError' });
    } finally {
      for (const l of logs) await l.close().catch(() => undefined);
    }
  });
});
