/**
 * The append handler on a standard SQS queue (docs/design/handlers.md: no MessageGroupId), which
 * delivers at least once and in no particular order: a step batch delivered after a later step of
 * its item (the earlier message delayed, or redelivered after a failed receive) is stored, not a
 * record failure that would fail the same way on every receive and end in the DLQ.
 */
import './support/env.ts';
import { afterAll, describe, expect, it } from 'vitest';
import { handler as appendHandler } from '../../functions/append.ts';
import { sqsEvent } from '../../functions/shared/events.ts';
import { logCache } from '../../functions/shared/logs.ts';
import { openLog } from '../../lib/index.ts';
import { createBatch, ctx, freshFileRoot, stepBatch } from './support/fixtures.ts';

const append = appendHandler as unknown as (event: unknown, context: ReturnType<typeof ctx>) => Promise<any>;

afterAll(async () => {
  await logCache.closeAll();
});

describe('append handler on a standard queue', () => {
  it('a step-1 message delivered after the step-2 message of its item is stored, not a record failure', async () => {
    freshFileRoot();
    const e = 'std';
    const msg = (b: Record<string, unknown>) => ({ pipeline: 'p', experiment: e, ...b });
    expect(await append(sqsEvent([msg(createBatch('x'))]), ctx())).toEqual({ batchItemFailures: [] });
    // The standard queue hands over step 2 first; step 1's message comes in a later receive.
    expect(await append(sqsEvent([msg(stepBatch('x', 2))]), ctx())).toEqual({ batchItemFailures: [] });
    const late = sqsEvent([msg(stepBatch('x', 1))], { messageIds: ['step1'] });
    const results = [];
    for (let receive = 1; receive <= 3; receive++) results.push(await append(late, ctx()));
    expect(results.at(-1)).toEqual({ batchItemFailures: [] });
    const log = await openLog({ root: process.env.DGCL_ROOT!, pipeline: 'p', experiment: e });
    try {
      expect((await log.trajectory('x')).filter((ev) => ev.eventType === 'STEP_COMPLETED').map((ev) => ev.stepIndex).sort()).toEqual([0, 1, 2]);
      expect((await log.fold('x')).cursor).toMatchObject({ stepIndex: 2 });
    } finally {
      await log.close();
    }
  });
});
