/**
 * Snapshots on a local root (real Lance): the scenario of test/support/snapshot-scenario.ts, what
 * version clean-up keeps and drops around a snapshot's tag, and a snapshot that names the same
 * events after the layout moved.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { snapshotScenario } from './support/snapshot-scenario.ts';

/** The base dataset of p/e under `root`, on a handle of the test's own. */
async function baseOf(root: string): Promise<lancedb.Table> {
  const db = await lancedb.connect(path.join(root, 'datagen_checkpoints', 'p', 'e'));
  return db.openTable('log');
}

describe('snapshots on a local root', () => {
  it('a snapshot taken with two writers unmerged exports byte for byte as then, and reports the same counts, after appends, merges, maintenance and a purge', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-snapshot-'));
    const root = path.join(dir, 'root');
    const { log, baseVersion } = await snapshotScenario({ root, dir });
    try {
      // Clean-up pruned every version older than the tagged one but those of its last second
      // (lib/log/maintain/tagged.ts), and kept that one.
      const base = await baseOf(root);
      const all = await base.listVersions();
      const taggedAt = all.find((v) => v.version === baseVersion)!.timestamp.getTime();
      expect(all.filter((v) => v.version < baseVersion! && v.timestamp.getTime() < taggedAt - 1000).map((v) => v.version), 'versions older than a second before the tagged one').toEqual([]);
      expect(Object.values(await (await base.tags()).list()).map((t) => t.version)).toEqual([baseVersion]);

      // Dropped, its tag goes, and the next pass prunes its version.
      await log.dropSnapshot('s1');
      expect(await (await base.tags()).list()).toEqual({});
      expect(await log.snapshots()).toEqual([]);
      const m = await log.maintain();
      expect(m.failures).toEqual([]);
      expect((await base.listVersions()).map((v) => v.version)).toEqual([(await base.version())]);
      await expect(log.dropSnapshot('s1')).rejects.toMatchObject({ code: 'NOT_FOUND', message: expect.stringMatching(/the log has no snapshots$/) });
    } finally {
      await log.close();
    }
  });

  it('without the clamp at tagged versions, LanceDB refuses the whole clean-up (why maintenance holds it)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-snapshot-lance-'));
    const db = await lancedb.connect(dir);
    const t = await db.createTable('t', [{ id: 1 }]);
    await t.add([{ id: 2 }]);
    await (await t.tags()).create('kept', 2);
    await t.add([{ id: 3 }]);
    await t.add([{ id: 4 }]);
    await expect(t.optimize({ cleanupOlderThan: new Date(Date.now() + 1000) })).rejects.toThrow(/tagged version\(s\) have been marked for cleanup/);
    const at = await db.openTable('t');
    await at.checkout('kept');
    expect(await at.countRows()).toBe(2);
  });

  it('taking the same name again after a merge moved its rows (no new events) answers the same snapshot', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-snapshot-same-'));
    const log = await openLog({ root, pipeline: 'p', experiment: 'e', mergeIdleMs: 0, mergeEveryCommits: 10_000 });
    try {
      await log.append([{ itemId: 'x', runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: 1 } }]);
      await log.mergeOwnShard();
      await log.append([{ itemId: 'y', runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: 2 } }]);
      const st = await log.stats();
      const s = await log.snapshot('one');
      // No duplicates and no deletes here: every row is one event.
      expect(s).toMatchObject({ created: true, baseVersion: st.base.version, tailRows: st.shards[0]!.rows, events: st.base.rows + st.shards[0]!.rows });
      await log.mergeOwnShard();
      expect((await log.stats()).base.version).toBeGreaterThan(s.baseVersion!);
      expect(await log.snapshot('one')).toEqual({ ...s, created: false });
      await log.append([{ itemId: 'y', runId: 'r', terminal: 'completed' }]);
      await expect(log.snapshot('one')).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'name' });
    } finally {
      await log.close();
    }
  });
});
