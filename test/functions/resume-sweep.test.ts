/**
 * The resume handler's sweep (`{pipeline, experiment, stalledForMs}`, direct or as an EventBridge
 * `detail`, as the stack's schedule sends it) on a file:// root, sending to a real SQS endpoint
 * (fauxqs, in-process, as test/functions/resume.test.ts does). The log is written beforehand
 * through openLog with a clock set hours back, so items are old or fresh by construction.
 */
import './support/env.ts';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { handler as resumeHandler } from '../../functions/resume.ts';
import { eventBridgeEvent } from '../../functions/shared/events.ts';
import { logCache } from '../../functions/shared/logs.ts';
import type { ResumeInstruction } from '../../functions/shared/resume-sink.ts';
import { ManualClock } from '../../lib/clock.ts';
import { openLog } from '../../lib/open.ts';
import { createBatch, ctx, freshFileRoot, stepBatch, thrown } from './support/fixtures.ts';
import { startLocalSqs, type LocalSqs } from './support/sqs.ts';

type Fn = (event: unknown, context: ReturnType<typeof ctx>) => Promise<any>;
const resume = resumeHandler as unknown as Fn;
const HOUR = 3_600_000;
const at = { pipeline: 'p', experiment: 'sweep' };

let sqs: LocalSqs;
let queueUrl: string;

beforeAll(async () => {
  freshFileRoot();
  sqs = await startLocalSqs();
  // Written three hours ago, and one item a minute ago.
  const clock = new ManualClock(Date.now() - 3 * HOUR);
  const log = await openLog({ root: process.env.DGCL_ROOT!, ...at, clock, leaseTtlMs: 4 * HOUR, mergeIdleMs: 0 });
  await log.append([
    createBatch('old-running'),
    stepBatch('old-running', 1),
    createBatch('old-failed'),
    { itemId: 'old-failed', runId: 'r1', step: { name: 'step1', index: 1 }, failed: { errorType: 'Timeout' } },
    createBatch('old-done', { terminal: 'completed' }),
  ]);
  clock.advance(3 * HOUR - 60_000);
  await log.append([createBatch('fresh')]);
  await log.close();
});
beforeEach(async () => {
  queueUrl = await sqs.newQueue();
  process.env.DGCL_RESUME_QUEUE_URL = queueUrl;
});
afterAll(async () => {
  await logCache.closeAll();
  await sqs?.stop();
});

const EXPECTED = [
  { ...at, itemId: 'old-failed', status: 'failed', cursor: expect.objectContaining({ stepName: 'load', stepIndex: 0 }), nextStepIndex: 1, resumeBy: 'index', attempt: 2, lastSeq: 4 },
  { ...at, itemId: 'old-running', status: 'in_progress', cursor: expect.objectContaining({ stepName: 'step1', stepIndex: 1 }), nextStepIndex: 2, resumeBy: 'index', attempt: 1, lastSeq: 5 },
];
const byId = <T extends { itemId: string }>(list: T[]) => [...list].sort((a, b) => (a.itemId < b.itemId ? -1 : 1));

describe('resume handler: sweep', () => {
  it('direct: sends every non-terminal item idle for more than stalledForMs, and says what it looked at', async () => {
    const res = await resume({ ...at, stalledForMs: HOUR }, ctx());
    expect(res.sent).toEqual(EXPECTED);
    expect([res.terminal, res.missing, res.failed]).toEqual([[], [], []]);
    expect(res.sweep).toEqual({ ...at, stalledForMs: HOUR, items: 4, terminal: 1, stalled: 2, moved: 0, complete: true });
    expect(byId((await sqs.drain(queueUrl)) as ResumeInstruction[])).toEqual(EXPECTED);
    // Shorter than the fresh item's idle time: it is stalled too.
    const all = await resume({ ...at, stalledForMs: 30_000 }, ctx());
    expect(all.sent.map((s: ResumeInstruction) => s.itemId)).toEqual(['fresh', 'old-failed', 'old-running']);
    // Longer than anything: nothing, and that is said.
    const none = await resume({ ...at, stalledForMs: 4 * HOUR }, ctx());
    expect(none.sent).toEqual([]);
    expect(none.sweep).toMatchObject({ items: 4, terminal: 1, stalled: 0, complete: true });
  });

  it('sending twice is harmless: the same (item, lastSeq) each time, and a FIFO queue keeps one of each', async () => {
    const first = await resume({ ...at, stalledForMs: HOUR }, ctx());
    const second = await resume({ ...at, stalledForMs: HOUR }, ctx());
    const keys = (r: { sent: ResumeInstruction[] }) => r.sent.map((s) => [s.itemId, s.lastSeq]);
    expect(keys(second)).toEqual(keys(first));
    expect(((await sqs.drain(queueUrl)) as ResumeInstruction[]).map((s) => s.itemId).sort()).toEqual(['old-failed', 'old-failed', 'old-running', 'old-running']);

    process.env.DGCL_RESUME_QUEUE_URL = await sqs.newQueue('dgcl-resume.fifo');
    await resume({ ...at, stalledForMs: HOUR }, ctx());
    await resume({ ...at, stalledForMs: HOUR }, ctx());
    expect(byId((await sqs.drain(process.env.DGCL_RESUME_QUEUE_URL)) as ResumeInstruction[])).toEqual(EXPECTED);
  });

  it('EventBridge: the detail is the sweep (what the schedule sends)', async () => {
    const res = await resume(eventBridgeEvent({ ...at, stalledForMs: HOUR }, { source: 'aws.events', detailType: 'Scheduled Event' }), ctx());
    expect(res.sent).toEqual(EXPECTED);
    expect(byId((await sqs.drain(queueUrl)) as ResumeInstruction[])).toEqual(EXPECTED);
  });

  it('limit and the deadline stop it early, reported as not complete', async () => {
    const limited = await resume({ ...at, stalledForMs: HOUR, limit: 1 }, ctx());
    expect(limited.sent).toEqual([EXPECTED[0]]);
    expect(limited.sweep).toMatchObject({ stalled: 1, complete: false });
    // An invocation whose deadline has passed sends nothing and says it did not finish.
    const late = await resume({ ...at, stalledForMs: HOUR }, ctx('dgcl-test', 1));
    expect(late.sent).toEqual([]);
    expect(late.sweep).toMatchObject({ stalled: 0, complete: false });
    expect(await sqs.drain(queueUrl)).toEqual([EXPECTED[0]]);
  });

  it('refuses a malformed sweep naming the field, and a log that does not exist', async () => {
    for (const [event, field] of [
      [{ ...at, stalledForMs: 0 }, 'event.stalledForMs'],
      [{ ...at, stalledForMs: '1h' }, 'event.stalledForMs'],
      [{ ...at, stalledForMs: 1.5 }, 'event.stalledForMs'],
      [{ ...at, stalledForMs: HOUR, limit: 0 }, 'event.limit'],
      [{ ...at, stalledForMs: HOUR, itemIds: ['old-running'] }, 'event'],
      [eventBridgeEvent({ ...at, stalledForMs: HOUR, itemId: 'old-running' }), 'event.detail.stalledForMs'],
      [eventBridgeEvent({ pipeline: 'p', stalledForMs: HOUR }), 'event.detail.experiment'],
    ] as const) {
      const e = await thrown(resume(event, ctx()));
      expect(e.name, JSON.stringify(event)).toBe('InvalidInputError');
      expect(e.field, JSON.stringify(event)).toBe(field);
    }
    const missing = await thrown(resume({ pipeline: 'p', experiment: 'no-such', stalledForMs: HOUR }, ctx()));
    expect(missing.name).toBe('LogNotFoundError');
    expect(await sqs.drain(queueUrl)).toEqual([]);
  });
});
