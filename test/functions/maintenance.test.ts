/**
 * The maintenance handler on a file:// root: discovery of experiments, narrowing, the time
 * guard, and the election: two concurrent invocations do each experiment's work once.
 */
import './support/env.ts';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { handler as maintenanceHandler, passOutcome, stepFailures, type MaintenanceEntry, type MaintenanceResult } from '../../functions/maintenance.ts';
import type { MaintenanceReport } from '../../lib/api.ts';
import { emptyMaintenanceReport } from '../../lib/log/maintain/maintain.ts';
import { eventBridgeEvent } from '../../functions/shared/events.ts';
import { logCache } from '../../functions/shared/logs.ts';
import { openLog } from '../../lib/index.ts';
import { LocalLeaseStore } from '../../lib/lease/local.ts';
import { maintainerKey } from '../../lib/lease/slots.ts';
import { leaseLogIdAt } from '../support/coord.ts';
import { createBatch, ctx, freshFileRoot, stepBatch, thrown } from './support/fixtures.ts';

const maintenance = maintenanceHandler as unknown as (event: unknown, context: ReturnType<typeof ctx>) => Promise<MaintenanceResult>;

let dir: string;
beforeEach(() => {
  dir = freshFileRoot();
});
afterAll(async () => {
  await logCache.closeAll();
});

/** A writer that appended and closed cleanly (its shard is merged and sealed). */
async function cleanWriter(pipeline: string, experiment: string, items: string[]): Promise<void> {
  const log = await openLog({ root: process.env.DGCL_ROOT!, pipeline, experiment });
  await log.append(items.map((i) => createBatch(i)));
  await log.close();
}

/**
 * A writer that appended and then died: its merge crashes, it never seals or releases, and its
 * 1 s lease lapses. Its shard is left for the maintainer (take over the slot, seal, merge).
 */
async function crashedWriter(pipeline: string, experiment: string, items: string[]): Promise<number> {
  const log = await openLog({
    root: process.env.DGCL_ROOT!,
    pipeline,
    experiment,
    leaseTtlMs: 1_000,
    mergeEveryCommits: 1_000,
    hooks: {
      beforeMergeStep: () => {
        throw new Error('crash');
      },
    },
  });
  const acks = await log.append([...items.map((i) => createBatch(i)), ...items.map((i) => stepBatch(i, 1))]);
  await log.close().catch(() => undefined);
  await new Promise((r) => setTimeout(r, 1_100));
  return acks.reduce((n, a) => n + a.eventIds.length, 0);
}

const entryOf = (r: MaintenanceResult, experiment: string) => r.experiments.find((x) => x.experiment === experiment) as MaintenanceEntry & Record<string, any>;

describe('maintenance handler', () => {
  it('maintains every experiment with a log under the root, skipping other folders', async () => {
    await cleanWriter('p1', 'a', ['x']);
    await cleanWriter('p1', 'b', ['y']);
    await cleanWriter('p2', 'c', ['z']);
    mkdirSync(path.join(dir, 'datagen_checkpoints', 'p1', 'no-log-here'), { recursive: true });
    mkdirSync(path.join(dir, 'datagen_checkpoints', 'not a name'), { recursive: true });
    const res = await maintenance({}, ctx('maintenance', 900_000));
    expect(res.experiments.map((x) => x.experiment).sort()).toEqual(['p1/a', 'p1/b', 'p2/c']);
    expect(res.summary).toEqual({ experiments: 3, ran: 3, leaseHeld: 0, skipped: 0, failed: 0 });
    for (const x of res.experiments) {
      expect(x).toMatchObject({ ran: true, mergedShards: [], indexes: expect.arrayContaining([expect.any(String)]) });
    }
  });

  it('narrows to a pipeline or one experiment; rejects bad narrowing', async () => {
    await cleanWriter('p1', 'a', ['x']);
    await cleanWriter('p2', 'c', ['z']);
    expect((await maintenance({ pipeline: 'p2' }, ctx('maintenance', 900_000))).experiments.map((x) => x.experiment)).toEqual(['p2/c']);
    expect((await maintenance({ pipeline: 'p1', experiment: 'a' }, ctx('maintenance', 900_000))).experiments.map((x) => x.experiment)).toEqual(['p1/a']);
    // A rule without an input hands over the Scheduled Event itself: its detail narrows.
    const scheduled = eventBridgeEvent({}, { detailType: 'Scheduled Event', source: 'aws.events', resources: ['arn:aws:events:us-east-1:123456789012:rule/dgcl'] });
    expect((await maintenance(scheduled, ctx('maintenance', 900_000))).summary.ran).toBe(2);
    expect((await thrown(maintenance({ pipeline: 'p1', experiment: 'nope' }, ctx()))).name).toBe('NotFoundError');
    const bad = await thrown(maintenance({ experiment: 'a' }, ctx()));
    expect([bad.name, bad.field]).toEqual(['InvalidInputError', 'event.experiment']);
    const typo = await thrown(maintenance({ pipelines: 'p1' }, ctx()));
    expect([typo.name, typo.field]).toEqual(['InvalidInputError', 'event']);
  });

  it('reports that another maintainer holds the lease, and does nothing', async () => {
    await cleanWriter('p', 'e', ['x']);
    const leases = new LocalLeaseStore({ dir: path.join(dir, '.dgcl', 'leases') });
    try {
      const held = await leases.acquire(maintainerKey('p', 'e', leaseLogIdAt(path.join(dir, 'datagen_checkpoints', 'p', 'e', 'log.lance'))), 'someone-else', 60_000);
      const res = await maintenance({}, ctx('maintenance', 900_000));
      expect(res.experiments).toEqual([expect.objectContaining({ experiment: 'p/e', ran: false, heldBy: 'someone-else', mergedShards: [] })]);
      expect(res.summary.leaseHeld).toBe(1);
      await leases.release(held);
      expect((await maintenance({}, ctx('maintenance', 900_000))).experiments[0]).toMatchObject({ ran: true });
    } finally {
      await leases.close();
    }
  });

  it('does not start an experiment with less than 30 s left; reports it skipped', async () => {
    await cleanWriter('p', 'e', ['x']);
    const res = await maintenance({}, ctx('maintenance', 20_000));
    expect(res.experiments).toEqual([{ experiment: 'p/e', pipeline: 'p', experimentName: 'e', ran: false, skipped: 'time' }]);
  });

  it('two concurrent invocations merge a dead writer\'s shard once: one does it, the other is held off or finds nothing', async () => {
    const events = await crashedWriter('p', 'dead', ['d1', 'd2', 'd3']);
    await cleanWriter('p', 'clean', ['c1']);
    const reader = await openLog({ root: process.env.DGCL_ROOT!, pipeline: 'p', experiment: 'dead' });
    try {
      const before = await reader.allStates();
      expect((await reader.stats()).shards.filter((s) => !s.retired && s.rows > 0)).toHaveLength(1);

      const [a, b] = await Promise.all([maintenance({}, ctx('maintenance', 900_000)), maintenance({}, ctx('maintenance', 900_000))]);
      const runs = [entryOf(a, 'p/dead'), entryOf(b, 'p/dead')];
      const workers = runs.filter((r) => r.ran && r.mergedShards.length > 0);
      expect(workers).toHaveLength(1);
      expect(workers[0]!.mergedShards).toHaveLength(1);
      expect(workers[0]!.mergedRows).toBe(events);
      const other = runs.find((r) => r !== workers[0])!;
      if (other.ran) {
        // it took the lease after the first had released it: nothing was left to do
        expect(other).toMatchObject({ mergedShards: [], mergedRows: 0 });
      } else {
        expect(other).toMatchObject({ heldBy: expect.any(String), mergedShards: [], mergedRows: 0 });
      }
      for (const r of [entryOf(a, 'p/clean'), entryOf(b, 'p/clean')]) expect(r.mergedRows).toBe(0);

      const stats = await reader.stats();
      expect(stats.shards.filter((s) => !s.retired)).toEqual([]);
      expect(stats.base.rows).toBe(events);
      expect(await reader.allStates()).toEqual(before);
    } finally {
      await reader.close();
    }
  });
});

describe('what the handler logs and counts, end to end', () => {
  /** The handler's log lines (level, message, experiment) and step-failure metric, from one invocation. */
  async function observed(event: unknown) {
    const lines: Array<[string, string, unknown]> = [];
    const spies = (['info', 'warn', 'error'] as const).map((level) =>
      vi.spyOn(Logger.prototype, level).mockImplementation(function (this: Logger, message: unknown, ...extra: unknown[]) {
        const first = extra[0] as { experiment?: unknown } | undefined;
        lines.push([level, String(message), first?.experiment]);
      }),
    );
    const metrics = new Map<string, number>();
    const metric = vi.spyOn(Metrics.prototype, 'addMetric').mockImplementation(function (this: Metrics, name: string, _unit: unknown, value: number) {
      metrics.set(name, value);
      return this;
    });
    try {
      const res = await maintenance(event, ctx('maintenance', 900_000)).catch((e: unknown) => e);
      return { res, lines: lines.filter(([, m]) => !m.startsWith('maintenance done') && !m.startsWith('maintenance failed for')), metrics };
    } finally {
      for (const s of [...spies, metric]) s.mockRestore();
    }
  }

  it('a maintained pass, a held lease and a failed step each get their line, and only the failure counts', async () => {
    await cleanWriter('p', 'ok', ['x']);
    await cleanWriter('p', 'held', ['y']);
    await cleanWriter('p', 'bad', ['z']);
    // A real failure of the projection step: its index's name is taken by a folder.
    mkdirSync(path.join(dir, 'datagen_checkpoints', 'p', 'bad', 'log.lance', '_dgcl', 'projection', 'items.json'), { recursive: true });
    const leases = new LocalLeaseStore({ dir: path.join(dir, '.dgcl', 'leases') });
    try {
      const held = await leases.acquire(maintainerKey('p', 'held', leaseLogIdAt(path.join(dir, 'datagen_checkpoints', 'p', 'held', 'log.lance'))), 'someone-else', 60_000);
      const { lines, metrics } = await observed({});
      await leases.release(held);
      expect(lines.sort((a, b) => String(a[2]).localeCompare(String(b[2])))).toEqual([
        ['error', 'maintenance steps failed; the next run retries them', 'p/bad'],
        ['info', 'another maintainer holds the lease; nothing done', 'p/held'],
        ['info', 'maintained', 'p/ok'],
      ]);
      expect(Object.fromEntries(['MaintainedExperiments', 'MaintenanceLeaseHeld', 'MaintenanceStepFailures', 'MaintenanceOvertaken', 'MaintenanceFailures'].map((k) => [k, metrics.get(k)]))).toEqual({
        MaintainedExperiments: 2,
        MaintenanceLeaseHeld: 1,
        MaintenanceStepFailures: 1,
        MaintenanceOvertaken: 0,
        MaintenanceFailures: 0,
      });
    } finally {
      await leases.close();
    }
  });
});

describe('how a pass is logged and counted', () => {
  const report = (over: Partial<MaintenanceReport>): MaintenanceReport => ({ ...emptyMaintenanceReport('p/e'), ran: true, ...over });
  type Step = MaintenanceReport['failures'][number]['step'];
  const skipped = (step: Step, code: 'FENCED' | 'UNAVAILABLE') => ({ step, code, message: 'skipped: ...', skipped: true as const });

  it('an overtaken pass is a WARN and no step failure; a real failure beside it is still an ERROR', () => {
    const overtaken = report({ stoppedBy: 'FENCED', failures: [skipped('claims', 'FENCED'), skipped('meta', 'FENCED')] });
    const withFailure = report({ stoppedBy: 'FENCED', failures: [{ step: 'compaction', code: 'UNAVAILABLE', message: 'x' }, skipped('meta', 'FENCED')] });
    expect([overtaken, withFailure, report({}), report({ ran: false, heldBy: 'm' })].map(passOutcome)).toEqual(['overtaken', 'failed', 'maintained', 'held']);
    expect([overtaken, withFailure].map(stepFailures)).toEqual([0, 1]);
  });

  it('a pass stopped for an unanswering lease store counts once, however many steps it skipped', () => {
    const stopped = report({ stoppedBy: 'UNAVAILABLE', failures: (['compaction', 'indexes', 'projection', 'claims', 'meta'] as const).map((step) => skipped(step, 'UNAVAILABLE')) });
    // a step that failed by itself with the same code is still a step failure
    const withFailure = report({ stoppedBy: 'UNAVAILABLE', failures: [{ step: 'merge', code: 'UNAVAILABLE', message: 'x' }, skipped('meta', 'UNAVAILABLE')] });
    expect([stopped, withFailure].map(passOutcome)).toEqual(['stopped', 'failed']);
    expect([stopped, withFailure].map(stepFailures)).toEqual([1, 2]);
  });
});
