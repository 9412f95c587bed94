/**
 * How snapshot attempts meet each other and what they leave: two processes taking the same name
 * at once (one snapshot, no leftovers), leftovers of attempts that died (swept by the next
 * snapshot, drop or maintenance pass, unless a young attempt marker protects them), a snapshot
 * waiting for a maintenance pass, and a snapshot of a log that has no base yet. Real Lance
 * datasets in temp folders.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { exportItems, LocalLeaseStore, openLog } from '../lib/index.ts';
import { acquireMaintainer } from '../lib/lease/slots.ts';
import { pruneCutoffMs } from '../lib/log/maintain/tagged.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';

const batch = (itemId: string) => ({ itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: itemId } });
const logDir = (root: string) => path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance');
const ls = (dir: string) => {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
};

async function baseOf(root: string): Promise<lancedb.Table> {
  return (await lancedb.connect(path.join(root, 'datagen_checkpoints', 'p', 'e'))).openTable('log');
}
const snapTags = async (root: string) => Object.keys(await (await (await baseOf(root)).tags()).list()).sort();

describe('snapshot attempts', () => {
  it('two processes taking the same name at once make one snapshot: one created, the other the same state; nothing is left over', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-snap-race-'));
    const w = await openLog({ root, pipeline: 'p', experiment: 'e', mergeIdleMs: 0 });
    await w.append([batch('a'), batch('b')]);
    await w.mergeOwnShard();
    await w.append([batch('c')]); // unmerged: both attempts copy it
    const a = await openLog({ root, pipeline: 'p', experiment: 'e', owner: 'taker-a' });
    const b = await openLog({ root, pipeline: 'p', experiment: 'e', owner: 'taker-b' });
    try {
      const [ra, rb] = await Promise.all([a.snapshot('same'), b.snapshot('same')]);
      expect([ra.created, rb.created].sort()).toEqual([false, true]);
      expect({ ...ra, created: true }).toEqual({ ...rb, created: true });
      const record = JSON.parse(readFileSync(path.join(logDir(root), '_dgcl/snapshots/records/same.json'), 'utf8')) as { nonce: string; tail: string };
      expect(await snapTags(root)).toEqual([`dgcl-snap-${record.nonce}`]);
      expect(ls(path.join(logDir(root), '_dgcl/snapshots/tails'))).toEqual([`${record.tail}.lance`]);
      expect(ls(path.join(logDir(root), '_dgcl/snapshots/attempts'))).toEqual([]);
    } finally {
      await Promise.all([a.close(), b.close(), w.close()]);
    }
  });

  it("leftovers of attempts that died are swept by the next snapshot or drop; a young attempt's are kept until its marker is old", async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-snap-leftovers-'));
    const log = await openLog({ root, pipeline: 'p', experiment: 'e', versionRetentionMs: 0 });
    try {
      await log.append([batch('a')]);
      await log.mergeOwnShard();
      const base = await baseOf(root);
      const v = await base.version();
      // A drop that died after deleting its record: tag and tail, no marker.
      const dead = '00000000000000d1';
      // An attempt still running: its marker is young.
      const young = '00000000000000a2';
      const tails = await lancedb.connect(path.join(logDir(root), '_dgcl/snapshots/tails'));
      for (const n of [dead, young]) {
        await (await base.tags()).create(`dgcl-snap-${n}`, v);
        await tails.createTable(`${n}-1`, [{ x: 1 }]);
      }
      const attempts = path.join(logDir(root), '_dgcl/snapshots/attempts');
      mkdirSync(attempts, { recursive: true });
      writeFileSync(path.join(attempts, `${young}.json`), JSON.stringify({ name: 'x', startedAtMs: Date.now() }));
      // Somebody else's tag: never touched.
      await (await base.tags()).create('release-1', v);

      const s = await log.snapshot('first');
      const nonce = (await snapTags(root)).find((t) => t.startsWith('dgcl-snap-') && !t.endsWith(young))!.slice('dgcl-snap-'.length);
      expect(await snapTags(root)).toEqual([`dgcl-snap-${young}`, `dgcl-snap-${nonce}`, 'release-1'].sort());
      expect(ls(path.join(logDir(root), '_dgcl/snapshots/tails'))).toEqual([`${young}-1.lance`]); // `first` has no unmerged rows
      expect(s.tailRows).toBe(0);

      // The young attempt's marker grows old (it died): the next drop sweeps it.
      writeFileSync(path.join(attempts, `${young}.json`), JSON.stringify({ name: 'x', startedAtMs: Date.now() - 7 * 3600 * 1000 }));
      await log.dropSnapshot('first');
      expect(await snapTags(root)).toEqual(['release-1']);
      expect(ls(path.join(logDir(root), '_dgcl/snapshots/tails'))).toEqual([]);
      expect(ls(attempts)).toEqual([]);
      // Maintenance clamps at any tag, not only ours.
      expect((await log.maintain()).failures).toEqual([]);
      // (versions of the last second before the tagged one stay too: lib/log/maintain/tagged.ts)
      const all = await base.listVersions();
      const taggedAt = all.find((x) => x.version === v)!.timestamp.getTime();
      expect(all.filter((x) => x.version < v && x.timestamp.getTime() < taggedAt - 1000).map((x) => x.version)).toEqual([]);
      expect(all.map((x) => x.version)).toContain(v);
    } finally {
      await log.close();
    }
  });

  it("maintenance sweeps a dead attempt's tag (no record, its marker old) so the clean-up cutoff moves past it; a young attempt's tag and tail are kept", async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-snap-maintain-sweep-'));
    const log = await openLog({ root, pipeline: 'p', experiment: 'e', mergeIdleMs: 0, versionRetentionMs: 0 });
    try {
      const base = async () => baseOf(root);
      const store = new LocalObjectStore(logDir(root));
      const attempts = path.join(logDir(root), '_dgcl/snapshots/attempts');
      mkdirSync(attempts, { recursive: true });
      const tails = await lancedb.connect(path.join(logDir(root), '_dgcl/snapshots/tails'));
      const hour = 3600 * 1000;
      /** An attempt that tagged version `v` and filled its tail, then stopped before its record; its marker `ageMs` old. */
      const attempt = async (nonce: string, v: number, ageMs: number) => {
        writeFileSync(path.join(attempts, `${nonce}.json`), JSON.stringify({ name: 'x', startedAtMs: Date.now() - ageMs }));
        await (await (await base()).tags()).create(`dgcl-snap-${nonce}`, v);
        await tails.createTable(`${nonce}-1`, [{ x: 1 }]);
      };
      await log.append([batch('a')]);
      await log.mergeOwnShard();
      const deadAt = await (await base()).version();
      const dead = '00000000000000d3';
      await attempt(dead, deadAt, 7 * hour); // older than any attempt takes (6 h)
      // Lance's version times are its own clock's: the versions before the young attempt's must
      // be more than the cutoff's margin (a second) after the dead tag's to be prunable.
      await new Promise((r) => setTimeout(r, 1_100));
      await log.append([batch('b')]);
      await log.mergeOwnShard();
      const youngAt = await (await base()).version();
      const young = '00000000000000a4';
      await attempt(young, youngAt, 5 * hour); // may still be running
      const times = new Map((await (await base()).listVersions()).map((x) => [x.version, x.timestamp.getTime()]));
      expect(await pruneCutoffMs(await base(), store, Date.now())).toBe(times.get(deadAt)! - 1000);

      const r = await log.maintain();
      expect(r.failures).toEqual([]);
      expect(r.sweptSnapshotAttempts).toEqual([dead]);
      expect(await snapTags(root)).toEqual([`dgcl-snap-${young}`]);
      expect(ls(path.join(logDir(root), '_dgcl/snapshots/tails'))).toEqual([`${young}-1.lance`]);
      expect(ls(attempts)).toEqual([`${young}.json`]);
      // The cutoff now stops below the young attempt's version: the dead one's version is pruned.
      expect(await pruneCutoffMs(await base(), store, Date.now())).toBe(times.get(youngAt)! - 1000);
      expect(times.get(youngAt)! - times.get(deadAt)!).toBeGreaterThan(1000);
      const left = (await (await base()).listVersions()).map((x) => x.version);
      expect(left).not.toContain(deadAt);
      expect(left).toContain(youngAt);
    } finally {
      await log.close();
    }
  });

  it('a snapshot waits for a maintenance pass holding the maintainer lease, then answers LEASE_HELD naming its holder', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-snap-lease-'));
    const clock = new ManualClock(Date.now());
    const leases = new LocalLeaseStore({ dir: path.join(root, '.leases'), clock });
    const log = await openLog({ root, pipeline: 'p', experiment: 'e', leases, clock });
    try {
      await log.append([batch('a')]);
      await acquireMaintainer(leases, { pipeline: 'p', experiment: 'e', owner: 'busy-maintainer', ttlMs: 3_600_000 });
      const t0 = clock.nowMs();
      await expect(log.snapshot('s')).rejects.toMatchObject({
        code: 'LEASE_HELD',
        message: 'a maintenance pass of p/e holds the maintainer lease (busy-maintainer); a snapshot is taken between passes: retry once it ends',
      });
      // It waited (on the log's clock) before giving up.
      expect(clock.nowMs() - t0).toBeGreaterThanOrEqual(28_000);
      expect(await log.snapshots()).toEqual([]);
      expect(ls(path.join(logDir(root), '_dgcl/snapshots/attempts'))).toEqual([]);
    } finally {
      await log.close();
    }
  });

  it('a snapshot of a log with no base yet holds its rows in its tail, and reads them after they were merged', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-snap-nobase-'));
    const log = await openLog({ root, pipeline: 'p', experiment: 'e', mergeIdleMs: 0 });
    try {
      await log.append([batch('a'), batch('b')]);
      const st = await log.stats();
      expect(st.base.version).toBe(0);
      const s = await log.snapshot('early');
      expect(s).toMatchObject({ baseVersion: null, tailRows: st.shards[0]!.rows, events: st.shards[0]!.rows });
      const then = path.join(root, 'then.jsonl');
      await exportItems(log, { out: then, status: 'any' });
      await log.mergeOwnShard();
      await log.append([batch('c')]);
      const now = path.join(root, 'now.jsonl');
      await exportItems(log, { out: now, status: 'any', snapshot: 'early' });
      expect(readFileSync(now)).toEqual(readFileSync(then));
    } finally {
      await log.close();
    }
  });
});
