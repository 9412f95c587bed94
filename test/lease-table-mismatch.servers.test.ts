/**
 * Servers (leases on DynamoDB Local, local roots with real Lance): a maintainer or writer opened
 * with another lease table than the log's.
 *
 * I1: the earlier fix (maintain() resolves the coordination store before it takes the
 *     maintainer lease) only stops a maintainer on another lease table when the log keeps its
 *     records in the table: the sentinel is the only thing that ties a log to a table. A log kept
 *     on objects (every log with data from before 0.2.0, and every log created while the fleet
 *     runs with DGCL_COORDINATION=objects, as docs/operations.md "Upgrades and migrations" tells an
 *     upgrade to do) has no sentinel: `ctx.coord()` answers the objects store whatever table the maintainer has. The
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
import { mkdtempSync, readFileSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { slotKey } from '../lib/lease/slots.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { useTwoLeaseTables } from './support/two-tables.ts';

const t = useTwoLeaseTables('dgcl-rev16');

describe('a process opened with another lease table', () => {
  // A log kept in the table and one kept on objects, for a maintainer and a writer.
  for (const [other, coordination] of [['maintainer', 'table'], ['maintainer', 'objects'], ['writer', 'table'], ['writer', 'objects']] as const) {
    it(`a ${other} opened with another lease table does not seal a live writer of a log kept on ${coordination} (I1)`, async () => {
      const rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'dgcl-rev16-')));
      t.dirs.push(rootDir);
      const root = `file://${rootDir}`;
      const experiment = `e-${randomUUID().slice(0, 8)}`;
      const logs: CheckpointLog[] = [];
      try {
        // On objects: an upgrade in progress, the fleet writes new logs on objects (docs/operations.md "Upgrades and migrations").
        const w = await openLog({ root, pipeline: 'p', experiment, owner: 'w', leases: t.leases, slots: 1, coordination });
        logs.push(w);
        const [a1] = await w.append([createBatch('i1')]);
        expect(a1!.duplicate).toBe(false);
        const choice = readFileSync(path.join(rootDir, 'datagen_checkpoints', 'p', experiment, 'log.lance', '_dgcl', 'coordination'), 'utf8');
        // A log kept in the table scopes its leases by its id; one on objects (older versions write it) does not.
        expect(choice).toMatch(new RegExp(`^${coordination} [0-9a-f-]{36}${coordination === 'table' ? ' v2' : ''}$`));
        const scope = coordination === 'table' ? choice.split(' ')[1]! : null;
        // The other table has seen this slot before (its epoch counter is ahead of the log's).
        for (let i = 0; i < 3; i++) await t.otherLeases.release(await t.otherLeases.acquire(slotKey('p', experiment, 0, scope), 'elsewhere', 60_000));
        const x = await openLog({ root, pipeline: 'p', experiment, owner: 'x', leases: t.otherLeases, slots: 1, coordination });
        logs.push(x);
        // A maintenance pass, or another item written, by the process on the other table.
        const outcome = await (other === 'maintainer' ? x.maintain() : x.append([createBatch('i2')])).catch((e: unknown) => e);
        // The writer goes on: its epoch check reads its own (the log's) table.
        const [a2] = await w.append([stepBatch('i1', 1)]);
        expect(a2!.duplicate).toBe(false);
        const reader = await openLog({ root, pipeline: 'p', experiment, owner: 'r', leases: t.leases, slots: 1 });
        logs.push(reader);
        const state = await reader.fold('i1');
        expect({ lastSeq: state.lastSeq, other: outcome instanceof Error ? outcome.name : 'ran' }).toEqual({ lastSeq: a2!.lastSeq, other: 'CorruptError' });
      } finally {
        for (const l of logs) await l.close().catch(() => undefined);
      }
    });
  }
});
