/**
 * Servers (leases on DynamoDB Local, local roots with real Lance).
 *
 * F3: the sentinel compares the log's location as spelled by the opener (`objects.baseUri`,
 *     `path.resolve` of a local root: symlinks are not resolved). The same log, on the same
 *     disk, opened once through a symlinked folder and once through its real path is taken for
 *     a copy of itself and refused for writing (CORRUPT), although both processes share every
 *     record. Expected: the log is written from either spelling (one first ack, then a
 *     duplicate). Proposed fix: compare `realpath` for local roots (S3 locations are canonical
 *     already), and name the location spelling in the CORRUPT message.
 * A maintainer on another lease table sealing a live writer (I1) is tested in
 *     test/lease-table-mismatch.servers.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { createBatch } from './support/batches.ts';
import { useTwoLeaseTables } from './support/two-tables.ts';

const t = useTwoLeaseTables('dgcl-rev15');

describe('a log opened through another spelling of its location', () => {
  it('one log opened through a symlinked root and through its real path is not a copy of itself', async () => {
    const top = realpathSync(mkdtempSync(path.join(tmpdir(), 'dgcl-rev15-')));
    t.dirs.push(top);
    const real = path.join(top, 'real');
    mkdirSync(real);
    const link = path.join(top, 'link');
    symlinkSync(real, link);
    const experiment = `e-${randomUUID().slice(0, 8)}`;
    const logs: CheckpointLog[] = [];
    const open = async (root: string, slot: number) => {
      const log = await openLog({ root, pipeline: 'p', experiment, owner: `o${slot}`, leases: t.leases, slots: 2, slot });
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
});
