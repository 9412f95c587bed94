/**
 * The handlers on an s3:// root (Ceph RGW) with leases in DynamoDB (DynamoDB Local) and the
 * resume queue on fauxqs, all real endpoints: what must hold in the deployed shape.
 * Run through `npm test` (scripts/test.sh starts RGW and DynamoDB Local).
 */
import './support/env.ts';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handler as appendHandler } from '../../functions/append.ts';
import { handler as foldHandler } from '../../functions/fold.ts';
import { handler as maintenanceHandler, type MaintenanceResult } from '../../functions/maintenance.ts';
import { handler as resumeHandler } from '../../functions/resume.ts';
import { sqsEvent } from '../../functions/shared/events.ts';
import { logCache } from '../../functions/shared/logs.ts';
import { ManualClock } from '../../lib/clock.ts';
import { openLog } from '../../lib/index.ts';
import type { Ack } from '../../lib/types.ts';
import { servers, useLeaseTable } from '../support/servers.ts';
import { createBatch, ctx, stepBatch, thrown, uniq } from './support/fixtures.ts';
import { startLocalSqs, type LocalSqs } from './support/sqs.ts';

const { bucket } = servers;

type Fn = (event: unknown, context: ReturnType<typeof ctx>) => Promise<any>;
const append = appendHandler as unknown as Fn;
const fold = foldHandler as unknown as Fn;
const resume = resumeHandler as unknown as Fn;
const maintenance = maintenanceHandler as unknown as (event: unknown, context: ReturnType<typeof ctx>) => Promise<MaintenanceResult>;

const table = useLeaseTable('dgcl-fn-leases');
let sqs: LocalSqs;

beforeAll(async () => {
  process.env.DGCL_ROOT = `s3://${bucket}/fn-${randomUUID().slice(0, 8)}`;
  process.env.DGCL_LEASE_TABLE = table;
  sqs = await startLocalSqs();
});
afterAll(async () => {
  await logCache.closeAll();
  await sqs?.stop();
});

const body = (experiment: string, batch: Record<string, unknown>) => ({ pipeline: 'p', experiment, ...batch });

describe('handlers on s3:// with DynamoDB leases', () => {
  it('append (SQS): an invalid record is reported alone, duplicates deliver the same ack and one copy', async () => {
    const e = uniq('e');
    const records = [body(e, createBatch('a')), body(e, { ...createBatch('b'), oops: true }), body(e, createBatch('c')), body(e, stepBatch('a', 1))];
    const event = sqsEvent(records, { messageIds: ['r0', 'r1', 'r2', 'r3'] });
    expect(await append(event, ctx())).toEqual({ batchItemFailures: [{ itemIdentifier: 'r1' }] });
    // Lambda re-delivers the whole batch (e.g. after a timeout): the valid records are duplicates now.
    expect(await append(event, ctx())).toEqual({ batchItemFailures: [{ itemIdentifier: 'r1' }] });

    const { acks } = (await append({ pipeline: 'p', experiment: e, batches: [createBatch('a'), stepBatch('a', 1)] }, ctx())) as { acks: Ack[] };
    expect(acks.map((a) => a.duplicate)).toEqual([true, true]);
    const traj = await fold({ pipeline: 'p', experiment: e, itemId: 'a', trajectory: true }, ctx());
    expect(traj.map((x: { itemSeq: number }) => x.itemSeq)).toEqual(traj.map((_: unknown, i: number) => i + 1));
    expect(acks[1]!.lastSeq).toBe(traj.length);
    expect(acks[1]!.eventIds).toEqual(traj.filter((x: { checkpointId: string }) => x.checkpointId === acks[1]!.checkpointId).map((x: { eventId: string }) => x.eventId));
    expect((await fold({ pipeline: 'p', experiment: e }, ctx())).items.map((i: { itemId: string }) => i.itemId)).toEqual(['a', 'c']);
    expect((await thrown(fold({ pipeline: 'p', experiment: e, itemId: 'b' }, ctx()))).name).toBe('NotFoundError');
  });

  it('resume: completed items are not resumed, failed ones retry the step with attempt + 1, running ones go on', async () => {
    const e = uniq('e');
    await append(
      {
        pipeline: 'p',
        experiment: e,
        batches: [
          createBatch('done'),
          stepBatch('done', 1, { terminal: 'completed' }),
          createBatch('failed'),
          { itemId: 'failed', runId: 'r1', step: { name: 'step1', index: 1 }, failed: { errorType: 'Timeout' } },
          createBatch('running'),
          stepBatch('running', 1),
        ],
      },
      ctx(),
    );
    const queueUrl = await sqs.newQueue();
    process.env.DGCL_RESUME_QUEUE_URL = queueUrl;
    const res = await resume(sqsEvent([{ pipeline: 'p', experiment: e, itemIds: ['done', 'failed', 'running'] }], { messageIds: ['t'] }), ctx());
    expect(res.batchItemFailures).toEqual([]);
    expect(res.terminal).toEqual([{ pipeline: 'p', experiment: e, itemId: 'done', status: 'completed' }]);
    const got = ((await sqs.drain(queueUrl)) as Array<{ itemId: string }>).sort((x, y) => (x.itemId < y.itemId ? -1 : 1));
    expect(got).toEqual([
      { pipeline: 'p', experiment: e, itemId: 'failed', status: 'failed', cursor: expect.objectContaining({ stepName: 'load', stepIndex: 0 }), nextStepIndex: 1, resumeBy: 'index', attempt: 2, lastSeq: 4 },
      { pipeline: 'p', experiment: e, itemId: 'running', status: 'in_progress', cursor: expect.objectContaining({ stepName: 'step1', stepIndex: 1 }), nextStepIndex: 2, resumeBy: 'index', attempt: 1, lastSeq: 5 },
    ]);
  });

  it('resume sweep: sends the old non-terminal items, from the base and from a live shard alike', async () => {
    const e = uniq('sweep');
    // Written three hours ago (the writer's clock), part merged into the base, part left in its shard.
    const clock = new ManualClock(Date.now() - 3 * 3_600_000);
    const writer = await openLog({ root: process.env.DGCL_ROOT!, pipeline: 'p', experiment: e, clock, leaseTtlMs: 4 * 3_600_000, mergeIdleMs: 0 });
    try {
      await writer.append([createBatch('in-base'), createBatch('done', { terminal: 'completed' })]);
      await writer.mergeOwnShard();
      await writer.append([createBatch('in-shard')]);
      clock.advance(3 * 3_600_000 - 60_000);
      await writer.append([createBatch('fresh')]);
      const queueUrl = await sqs.newQueue();
      process.env.DGCL_RESUME_QUEUE_URL = queueUrl;
      const res = await resume({ pipeline: 'p', experiment: e, stalledForMs: 3_600_000 }, ctx());
      expect(res.sent.map((x: { itemId: string; lastSeq: number }) => [x.itemId, x.lastSeq])).toEqual([
        ['in-base', 3],
        ['in-shard', 3],
      ]);
      expect(res.sweep).toMatchObject({ items: 4, terminal: 1, stalled: 2, moved: 0, complete: true });
      expect(((await sqs.drain(queueUrl)) as Array<{ itemId: string }>).map((m) => m.itemId).sort()).toEqual(['in-base', 'in-shard']);
    } finally {
      await writer.close();
    }
  });

  it("maintenance: two concurrent invocations merge a dead writer's shard once (the lease lives in DynamoDB)", async () => {
    const e = uniq('dead');
    const writer = await openLog({
      root: process.env.DGCL_ROOT!,
      pipeline: 'p',
      experiment: e,
      leaseTtlMs: 1_000,
      mergeEveryCommits: 1_000,
      hooks: {
        beforeMergeStep: () => {
          throw new Error('crash');
        },
      },
    });
    const acks = await writer.append([createBatch('d1'), createBatch('d2'), stepBatch('d1', 1)]);
    const events = acks.reduce((n, a) => n + a.eventIds.length, 0);
    await writer.close().catch(() => undefined); // dies mid-merge: no seal, no release
    await new Promise((r) => setTimeout(r, 1_100));

    const [a, b] = await Promise.all([maintenance({ pipeline: 'p', experiment: e }, ctx('maintenance', 900_000)), maintenance({ pipeline: 'p', experiment: e }, ctx('maintenance', 900_000))]);
    const runs = [a.experiments[0]!, b.experiments[0]!] as Array<Record<string, any>>;
    const workers = runs.filter((r) => r.ran && r.mergedShards.length > 0);
    expect(workers).toHaveLength(1);
    expect(workers[0]!.mergedRows).toBe(events);
    const other = runs.find((r) => r !== workers[0])!;
    expect(other.mergedRows).toBe(0);
    if (!other.ran) expect(other.heldBy).toEqual(expect.any(String));

    const reader = await openLog({ root: process.env.DGCL_ROOT!, pipeline: 'p', experiment: e });
    try {
      const stats = await reader.stats();
      expect(stats.shards.filter((s) => !s.retired)).toEqual([]);
      expect(stats.base.rows).toBe(events);
      expect((await reader.fold('d1')).cursor?.stepIndex).toBe(1);
    } finally {
      await reader.close();
    }

    // Scheduled run over the whole root: S3 listing (ListObjectsV2 with a delimiter) finds it.
    const all = await maintenance({}, ctx('maintenance', 900_000));
    expect(all.experiments.map((x) => x.experiment)).toContain(`p/${e}`);
    expect(all.summary.failed).toBe(0);
  });
});
