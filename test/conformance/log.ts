/**
 * ONE suite for the log store, run on every kind of root (file:// in the fast project, s3://
 * on RGW in the servers project). The target only says how to make a fresh root.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../lib/clock.ts';
import { FencedError } from '../../lib/errors.ts';
import { openLog, type OpenLogOptions } from '../../lib/index.ts';
import type { CheckpointLog } from '../../lib/api.ts';
import type { MergeStep } from '../../lib/log/maintain/merge.ts';
import { LogReader } from '../../lib/log/read/reader.ts';
import type { Ack } from '../../lib/types.ts';
import { createBatch, itemOf, loopBatchEvents, stepBatch } from '../support/batches.ts';
import { startTs } from '../support/proc.ts';

export interface LogTarget {
  /** A fresh, empty root and the environment that reaches it (also for child processes). */
  newRoot(): Promise<{ root: string; env: Record<string, string> }>;
}

/**
 * Hooks shared by two writers so that both read the item before either commits: each waits
 * in beforeCommit until the other one gets there too.
 */
function bothReadBeforeEitherCommits() {
  let arrived = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  return {
    beforeCommit: async () => {
      if (++arrived === 2) release();
      await gate;
    },
  };
}

export function logStoreConformance(name: string, target: LogTarget): void {
  describe(`log store conformance: ${name}`, () => {
    const open: CheckpointLog[] = [];
    let rootInfo: { root: string; env: Record<string, string> };
    const experiment = () => `e-${randomUUID().slice(0, 8)}`;

    async function newLog(extra: Partial<OpenLogOptions> & { experiment?: string } = {}) {
      const log = await openLog({
        root: rootInfo.root,
        pipeline: 'p',
        experiment: extra.experiment ?? 'e',
        env: { ...process.env, ...rootInfo.env },
        ...extra,
      });
      open.push(log);
      return log;
    }

    async function fresh() {
      rootInfo = await target.newRoot();
    }

    afterEach(async () => {
      for (const l of open.splice(0)) await l.close().catch(() => undefined);
    });

    /** Everything a reader can observe about the experiment, for before/after comparisons. */
    async function snapshot(log: CheckpointLog) {
      const states = await log.allStates();
      const trajectories = await Promise.all(states.map((s) => log.trajectory(s.itemId)));
      return { states, trajectories: trajectories.map((t) => t.map((e) => ({ ...e }))) };
    }

    it('folds appended batches: set replaces, append accumulates, completion moves the cursor', async () => {
      await fresh();
      const log = await newLog();
      await log.append([createBatch('a')]);
      await log.append([{ itemId: 'a', runId: 'r1', step: { name: 'gen', index: 1, iteration: 0 }, set: { n: 1 }, append: { msgs: ['x', 'y'] } }]);
      await log.append([{ itemId: 'a', runId: 'r1', step: { name: 'gen', index: 1, iteration: 1 }, set: { n: 2 }, append: { msgs: ['z'] } }]);
      const s = await log.fold('a');
      expect(s.fields.n).toBe(2);
      expect(s.fields.msgs).toEqual(['x', 'y', 'z']);
      expect(s.cursor).toMatchObject({ stepName: 'gen', stepIndex: 1, iteration: 1 });
      expect(s.status).toBe('in_progress');
      await log.append([{ itemId: 'a', runId: 'r1', step: { name: 'judge', index: 2 }, failed: { errorType: 'Boom', traceback: 'tb' } }]);
      const f = await log.fold('a');
      expect(f.status).toBe('failed');
      expect(f.cursor).toEqual(s.cursor);
      expect(f.failures).toEqual([expect.objectContaining({ errorType: 'Boom', traceback: 'tb', stepName: 'judge' })]);
      await log.append([{ itemId: 'a', runId: 'r1', step: { name: 'judge', index: 2 }, attempt: 2, terminal: 'filtered' }]);
      const t = await log.fold('a');
      expect(t.status).toBe('filtered');
      expect(t.attempts).toBe(2);
      const traj = await log.trajectory('a');
      expect(traj.map((e) => e.itemSeq)).toEqual(traj.map((_, i) => i + 1));
    });

    it('listings read no value columns and agree with full folds on everything but fields', async () => {
      await fresh();
      const log = await newLog();
      await log.append([createBatch('l1', { set: { big: 'x'.repeat(10_000) } }), createBatch('l2')]);
      await log.append([{ itemId: 'l2', runId: 'r1', step: { name: 'gen', index: 1 }, failed: { errorType: 'E', traceback: 'tb' } }]);
      const spy = vi.spyOn(LogReader.prototype, 'scan');
      const summaries = await log.allStates({ fields: false });
      const columns = spy.mock.calls.map((c) => c[1]).flat();
      spy.mockRestore();
      expect(columns).not.toContain('value_str');
      expect(columns).not.toContain('value_json');
      const full = await log.allStates();
      expect(summaries).toEqual(full.map((s) => ({ ...s, fields: {} })));
      expect((await log.failures()).map((f) => [f.itemId, f.traceback])).toEqual([['l2', 'tb']]);
    });

    it('rejects a batch for an item that was not created, or after TERMINAL, writing nothing', async () => {
      await fresh();
      const log = await newLog();
      await expect(log.append([stepBatch('ghost', 1)])).rejects.toMatchObject({ code: 'ITEM_NOT_FOUND' });
      await log.append([createBatch('t', { terminal: 'completed' })]);
      const before = await snapshot(log);
      await expect(log.append([stepBatch('t', 1)])).rejects.toThrow(/terminal/);
      // a request is all-or-nothing: the valid first batch of it is not written either
      await expect(log.append([createBatch('ok'), stepBatch('ghost', 1)])).rejects.toMatchObject({ code: 'ITEM_NOT_FOUND' });
      expect(await snapshot(log)).toEqual(before);
    });

    it('the same batch sent twice, sequentially and concurrently, gives one copy and identical acks', async () => {
      await fresh();
      const log = await newLog();
      const b = createBatch('d', { set: { x: 1, blob: { $blob: Buffer.from('abc').toString('base64') } } });
      const [first] = await log.append([b]);
      const [again] = await log.append([b]);
      expect(first!.duplicate).toBe(false);
      expect(again).toEqual({ ...first, duplicate: true });
      const b2 = stepBatch('d', 1);
      const both = (await Promise.all([log.append([b2]), log.append([b2])])).flat();
      expect(both.map((a) => a.duplicate).sort()).toEqual([false, true]);
      expect({ ...both[0], duplicate: null }).toEqual({ ...both[1], duplicate: null });
      const traj = await log.trajectory('d');
      expect(new Set(traj.map((e) => e.eventId)).size).toBe(traj.length);
      expect(traj.length).toBe(first!.eventIds.length + both[0]!.eventIds.length);
    });

    it('the same batch through two writers at once: one copy, identical acks, one duplicate', async () => {
      await fresh();
      const a = await newLog({ owner: 'writer-a' });
      const b = await newLog({ owner: 'writer-b' });
      await a.append([createBatch('x')]);
      const hooks = bothReadBeforeEitherCommits();
      const a2 = await newLog({ owner: 'writer-a2', hooks });
      const b2 = await newLog({ owner: 'writer-b2', hooks });
      const batch = stepBatch('x', 1);
      const acks = (await Promise.all([a2.append([batch]), b2.append([batch])])).flat();
      expect(acks.map((k) => k.duplicate).sort()).toEqual([false, true]);
      expect({ ...acks[0], duplicate: null }).toEqual({ ...acks[1], duplicate: null });
      const s = await b.fold('x');
      expect(s.violations).toEqual([]);
      const traj = await a.trajectory('x');
      expect(traj.filter((e) => e.checkpointId === acks[0]!.checkpointId)).toHaveLength(acks[0]!.eventIds.length);
    });

    it('the same batch from two processes at once: both commit it, one copy is visible, identical acks', async () => {
      await fresh();
      const log = await newLog();
      await log.append([createBatch('p2')]);
      // Both processes stop after reading the item and before committing; only when both got
      // there are they released, so each commits without having seen the other's commit.
      const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-barrier-'));
      const batch = stepBatch('p2', 1, { append: { log: ['l1', 'l2'] } });
      const procs = ['a', 'b'].map((name) =>
        startTs('test/support/writer-proc.ts', [], {
          ...rootInfo.env,
          DGCL_TEST_TASK: JSON.stringify({ root: rootInfo.root, pipeline: 'p', experiment: 'e', mode: 'batches', batches: [batch], barrier: { dir, name } }),
        }),
      );
      const arrived = (name: string) => existsSync(path.join(dir, `arrived-${name}`));
      const exited = procs.map(() => false);
      procs.forEach((p, i) => void p.exit.then(() => (exited[i] = true)));
      for (let waited = 0; !(arrived('a') && arrived('b')); waited += 10) {
        // a process that exits before arriving failed: stop waiting and show why
        if (exited.some(Boolean) || waited > 120_000) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      expect({ a: arrived('a'), b: arrived('b') }, 'both processes read the item before either committed').toEqual({ a: true, b: true });
      writeFileSync(path.join(dir, 'release'), '');
      const results = await Promise.all(procs.map((p) => p.exit));
      for (const r of results) expect(r.code, r.stderr).toBe(0);
      const acks = procs.map((p) => JSON.parse(p.lines.find((l) => l.startsWith('ack '))!.slice(4)) as Ack);
      expect(acks.map((a) => a.duplicate).sort()).toEqual([false, true]);
      expect({ ...acks[0], duplicate: null }).toEqual({ ...acks[1], duplicate: null });
      const traj = await log.trajectory('p2');
      expect(traj.filter((e) => e.checkpointId === acks[0]!.checkpointId).map((e) => [e.eventId, e.itemSeq])).toEqual(
        acks[0]!.eventIds.map((id, i) => [id, acks[0]!.firstSeq + i]),
      );
      const s = await log.fold('p2');
      expect(s.violations).toEqual([]);
      expect(s.lastSeq).toBe(acks[0]!.lastSeq);
      expect(traj.map((e) => e.itemSeq)).toEqual(Array.from({ length: s.lastSeq }, (_, i) => i + 1));
    });

    it('an item moving between writers and back continues its seqs (no stale copy of it is trusted)', async () => {
      await fresh();
      const a = await newLog({ owner: 'mover-a' });
      const b = await newLog({ owner: 'mover-b' });
      await a.append([createBatch('mv')]);
      await a.append([stepBatch('mv', 1)]); // a now holds the item's state in memory
      const [fromB] = await b.append([stepBatch('mv', 2)]);
      const [backToA] = await a.append([stepBatch('mv', 3)]);
      expect(backToA!.firstSeq).toBe(fromB!.lastSeq + 1);
      const [again] = await a.append([stepBatch('mv', 2)]); // B's batch, redelivered to A
      expect(again).toEqual({ ...fromB, duplicate: true });
      const s = await b.fold('mv');
      expect(s.violations).toEqual([]);
      expect(s.cursor?.stepIndex).toBe(3);
      expect(s.lastSeq).toBe(backToA!.lastSeq);
    });

    it('two writers racing on one item without item ownership produce a reported violation', async () => {
      await fresh();
      const seed = await newLog({ owner: 'seed' });
      await seed.append([createBatch('race')]);
      const hooks = bothReadBeforeEitherCommits();
      const a = await newLog({ owner: 'racer-a', hooks });
      const b = await newLog({ owner: 'racer-b', hooks });
      const [[ackA], [ackB]] = await Promise.all([a.append([stepBatch('race', 1)]), b.append([stepBatch('race', 2)])]);
      expect(ackA!.firstSeq).toBe(ackB!.firstSeq);
      const s = await seed.fold('race');
      expect(s.violations.length).toBeGreaterThan(0);
      expect(s.violations[0]).toMatchObject({ kind: 'seq_conflict', seq: ackA!.firstSeq });
      expect(s.violations[0]!.eventIds).toEqual(expect.arrayContaining([ackA!.eventIds[0], ackB!.eventIds[0]]));
    });

    it('a checkpoint batch is all-or-nothing for readers when the writer process is SIGKILLed', async () => {
      await fresh();
      for (let round = 0; round < 3; round++) {
        const exp = experiment();
        const task = { root: rootInfo.root, pipeline: 'p', experiment: exp, mode: 'loop', inFlight: 6 };
        const proc = startTs('test/support/writer-proc.ts', [], { ...rootInfo.env, DGCL_TEST_TASK: JSON.stringify(task) });
        const killAt = 10 + round * 17;
        const acked: Ack[] = [];
        proc.onLine((l) => {
          if (!l.startsWith('ack ')) return;
          acked.push(JSON.parse(l.slice(4)) as Ack);
          if (acked.length === killAt) proc.child.kill('SIGKILL');
        });
        const r = await proc.exit;
        expect(r.signal, r.stderr).toBe('SIGKILL');
        const log = await newLog({ experiment: exp });
        const states = await log.allStates();
        // every acknowledged batch is there, and every batch there is whole
        const have = new Set(states.map((s) => s.itemId));
        for (const a of acked) expect(have.has(a.itemId)).toBe(true);
        for (const s of states) {
          const i = Number(s.itemId.slice(2));
          expect(s.itemId).toBe(itemOf(i));
          expect(s.lastSeq).toBe(loopBatchEvents(i));
          expect(s.cursor?.stepName).toBe('load');
          expect(s.violations).toEqual([]);
        }
      }
    });

    it('reads are the same before and after a merge, and after a crash at every step of it', async () => {
      const steps: MergeStep[] = ['read', 'base-commit', 'retire-marker', 'delete-data', 'delete-marker'];
      for (const step of steps) {
        await fresh();
        const clock = new ManualClock(Date.now());
        let crashAt: MergeStep | null = null;
        const hooks = {
          beforeMergeStep: (s: MergeStep) => {
            if (s === crashAt) throw new Error(`crash before ${s}`);
          },
        };
        const w = await newLog({ clock, hooks, mergeEveryCommits: 1000, leaseTtlMs: 30_000 });
        await w.append([createBatch('m1', { set: { img: { $blob: Buffer.from('pixels').toString('base64') } } })]);
        await w.append([createBatch('m2'), stepBatch('m1', 1)]);
        const reader = await newLog({ clock });
        const before = await snapshot(reader);
        crashAt = step;
        await expect(w.mergeOwnShard()).rejects.toThrow(`crash before ${step}`);
        expect(await snapshot(reader), `after a crash before ${step}`).toEqual(before);
        expect(Buffer.from(await reader.blob('m1', 'img')).toString()).toBe('pixels');
        // The crashed writer is gone; once its lease expires the maintainer finishes the work.
        crashAt = null;
        clock.advance(31_000);
        const m = await newLog({ clock, owner: 'maintainer' });
        const report = await m.maintain();
        expect(report.ran).toBe(true);
        expect(await snapshot(reader), `after maintenance following a crash before ${step}`).toEqual(before);
        const stats = await reader.stats();
        expect(stats.shards.filter((s) => !s.retired)).toEqual([]);
        expect(stats.base.rows).toBeGreaterThan(0);
        expect(Buffer.from(await reader.blob('m1', 'img')).toString()).toBe('pixels');
      }
    });

    it('a clean merge keeps reads identical and empties the shard', async () => {
      await fresh();
      const w = await newLog({ mergeEveryCommits: 1000 });
      for (let i = 0; i < 5; i++) await w.append([createBatch(`c${i}`)]);
      const before = await snapshot(w);
      const r = await w.mergeOwnShard();
      expect(r.mergedRows).toBeGreaterThan(0);
      expect(await snapshot(w)).toEqual(before);
      expect((await w.stats()).shards).toEqual([]);
      // merging again is a no-op
      expect((await w.mergeOwnShard()).mergedRows).toBe(0);
    });

    it('fold and trajectory never read blob bytes; a blob ref loads the exact bytes after merge and compaction', async () => {
      await fresh();
      const w = await newLog({ mergeEveryCommits: 1000 });
      const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 31) % 256));
      await w.append([createBatch('b', { set: { image: { $blob: bytes.toString('base64') } } })]);
      const spy = vi.spyOn(LogReader.prototype, 'scan');
      try {
        const s = await w.fold('b');
        await w.trajectory('b');
        await w.items();
        await w.failures();
        expect(spy.mock.calls.length).toBeGreaterThan(0);
        for (const call of spy.mock.calls) expect(call[1]).not.toContain('value_blob');
        expect(s.fields.image).toEqual({ $blobRef: expect.objectContaining({ size: bytes.length }) });
      } finally {
        spy.mockRestore();
      }
      expect(Buffer.from(await w.blob('b', 'image')).equals(bytes)).toBe(true);
      await w.mergeOwnShard();
      expect(Buffer.from(await w.blob('b', 'image')).equals(bytes)).toBe(true);
      for (let i = 0; i < 4; i++) {
        await w.append([createBatch(`filler${i}`)]);
        await w.mergeOwnShard();
      }
      const report = await w.maintain();
      expect(report.ran).toBe(true);
      expect(report.compacted?.fragmentsRemoved).toBeGreaterThan(0);
      expect(Buffer.from(await w.blob('b', 'image')).equals(bytes)).toBe(true);
    });

    it('zombie writer: after a takeover its appends are fenced and invisible, its acked batches stay', async () => {
      await fresh();
      const clock = new ManualClock(Date.now());
      const a = await newLog({ clock, owner: 'zombie-a', slot: 0, leaseTtlMs: 60_000, mergeEveryCommits: 1000 });
      const acked = await a.append([createBatch('z1'), createBatch('z2')]);
      await a.append([stepBatch('z1', 1)]);
      expect(a.writerEpoch).toMatch(/^s00-e/);
      clock.advance(61_000); // A pauses; its lease expires
      const b = await newLog({ clock, owner: 'successor-b', slot: 0, leaseTtlMs: 60_000 });
      await b.append([stepBatch('z2', 1)]); // takes slot 0 with a new epoch, sealing A's
      expect(b.writerEpoch).not.toBe(a.writerEpoch);
      await expect(a.append([stepBatch('z1', 2)])).rejects.toBeInstanceOf(FencedError);
      const reader = await newLog({ clock });
      const z1 = await reader.fold('z1');
      expect(z1.fields.out2).toBeUndefined();
      expect(z1.lastSeq).toBe(acked[0]!.lastSeq + 2); // create batch + one step batch acked before the takeover
      const traj = await reader.trajectory('z1');
      expect(traj.every((e) => e.itemSeq <= z1.lastSeq)).toBe(true);
      // B continues the same items with no violation
      await b.append([stepBatch('z1', 2)]);
      const after = await reader.fold('z1');
      expect(after.fields.out2).toBe('result 2 of z1');
      expect(after.violations).toEqual([]);
      // and maintenance merges A's sealed shard without its zombie rows
      const m = await newLog({ clock, owner: 'maint' });
      await m.maintain();
      const final = await reader.fold('z1');
      expect(final).toEqual(after);
    });

    it('refuses a slot epoch at or below a sealed one (a reset lease counter) and writes nothing', async () => {
      await fresh();
      const w = await newLog({ slot: 1, owner: 'w' });
      await w.append([createBatch('s1')]);
      await w.close();
      // closing sealed s01-e000001; pretend the lease record vanished (DynamoDB TTL) and the
      // counter restarts at 1: the next writer of slot 1 must refuse rather than hide its rows
      const { LocalLeaseStore } = await import('../../lib/lease/local.ts');
      const leases = new LocalLeaseStore({ dir: path.join(tmpdir(), `dgcl-reset-${randomUUID()}`) });
      const again = await newLog({ slot: 1, owner: 'w2', leases, experiment: 'e' });
      // A log on a DynamoDB lease table refuses another kind of lease store even before that
      // (lib/coord/choose.ts); the same reset within one table: test/coord-choice.servers.test.ts.
      const onTable = /^s3:/.test(rootInfo.root);
      await expect(again.append([createBatch('s2')])).rejects.toMatchObject({ code: onTable ? 'INVALID_INPUT' : 'CORRUPT' });
      expect((await again.items()).items.map((i) => i.itemId)).toEqual(['s1']);
    });

    it('many batches in flight from one writer are grouped into fewer commits and all acknowledged', async () => {
      await fresh();
      const w = await newLog({ mergeEveryCommits: 1_000_000 });
      const acks = await Promise.all(Array.from({ length: 60 }, (_, i) => w.append([createBatch(`g${i}`)])));
      expect(acks.flat()).toHaveLength(60);
      const stats = await w.stats();
      expect(stats.shards).toHaveLength(1);
      expect(stats.shards[0]!.version - 1).toBeLessThan(60);
      expect(stats.shards[0]!.rows).toBe(60 * 3); // create, set, completion
    });
  });
}
