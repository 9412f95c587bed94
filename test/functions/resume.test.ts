/**
 * The resume handler on a file:// root, sending to a real SQS endpoint (fauxqs, in-process):
 * direct, SQS-triggered and EventBridge invocations; what arrives on the queue is asserted by
 * receiving it. The SQS sink's retry of failed entries runs against the same endpoint.
 */
import './support/env.ts';
import { SendMessageBatchCommand, type SendMessageBatchCommandOutput } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { handler as appendHandler } from '../../functions/append.ts';
import { createResumeHandler, handler as resumeHandler } from '../../functions/resume.ts';
import { eventBridgeEvent, sqsEvent } from '../../functions/shared/events.ts';
import { logCache } from '../../functions/shared/logs.ts';
import { MemoryResumeSink, SqsResumeSink, type ResumeInstruction, type ResumeSink } from '../../functions/shared/resume-sink.ts';
import { resumePoint } from '../../lib/resume.ts';
import type { Cursor, ItemState } from '../../lib/types.ts';
import { createBatch, ctx, freshFileRoot, stepBatch, thrown } from './support/fixtures.ts';
import { startLocalSqs, type LocalSqs } from './support/sqs.ts';

type Fn = (event: unknown, context: ReturnType<typeof ctx>) => Promise<any>;
const append = appendHandler as unknown as Fn;
const resume = resumeHandler as unknown as Fn;
const at = { pipeline: 'p', experiment: 'e' };

let sqs: LocalSqs;
let queueUrl: string;

beforeAll(async () => {
  freshFileRoot();
  sqs = await startLocalSqs();
  const fail = (itemId: string, index: number, attempt: number) => ({
    itemId,
    runId: 'r1',
    step: { name: `step${index}`, index },
    attempt,
    failed: { errorType: 'RateLimitError', errorDump: '{}', traceback: `attempt ${attempt}` },
  });
  await append(
    {
      ...at,
      batches: [
        createBatch('done'),
        stepBatch('done', 1, { terminal: 'completed' }),
        createBatch('filtered'),
        { itemId: 'filtered', runId: 'r1', terminal: 'filtered' },
        createBatch('failed'),
        stepBatch('failed', 1),
        fail('failed', 2, 1),
        createBatch('failed-twice'),
        fail('failed-twice', 1, 1),
        fail('failed-twice', 1, 2),
        createBatch('running'),
        stepBatch('running', 1),
        stepBatch('running', 2),
        { itemId: 'new', runId: 'r1', create: {} },
        // A pipeline that names its steps but does not number them: resume goes by name.
        { itemId: 'by-name', runId: 'r1', create: {}, step: { name: 'load', instanceId: 'load#1' } },
        { itemId: 'by-name', runId: 'r1', step: { name: 'generate', instanceId: 'gen#2', iteration: 3 } },
        { itemId: 'by-name-failed', runId: 'r1', create: {}, step: { name: 'load' } },
        { itemId: 'by-name-failed', runId: 'r1', step: { name: 'generate' }, failed: { errorType: 'Timeout', errorDump: '{}', traceback: 't' } },
      ],
    },
    ctx(),
  );
});
beforeEach(async () => {
  queueUrl = await sqs.newQueue();
  process.env.DGCL_RESUME_QUEUE_URL = queueUrl;
});
afterAll(async () => {
  await logCache.closeAll();
  await sqs?.stop();
});

const cursor = (stepIndex: number) => expect.objectContaining({ stepIndex, stepName: stepIndex === 0 ? 'load' : `step${stepIndex}` });

/**
 * What the contract says each item resumes with: the step after the cursor by index when the
 * cursor has one (0 with no cursor); by the cursor's step name when it has none.
 */
const EXPECTED: Record<string, unknown> = {
  failed: { ...at, itemId: 'failed', status: 'failed', cursor: cursor(1), nextStepIndex: 2, resumeBy: 'index', attempt: 2, lastSeq: 6 },
  'failed-twice': { ...at, itemId: 'failed-twice', status: 'failed', cursor: cursor(0), nextStepIndex: 1, resumeBy: 'index', attempt: 3, lastSeq: 5 },
  running: { ...at, itemId: 'running', status: 'in_progress', cursor: cursor(2), nextStepIndex: 3, resumeBy: 'index', attempt: 1, lastSeq: 7 },
  new: { ...at, itemId: 'new', status: 'in_progress', cursor: null, nextStepIndex: 0, resumeBy: 'index', attempt: 1, lastSeq: 1 },
  'by-name': {
    ...at,
    itemId: 'by-name',
    status: 'in_progress',
    cursor: expect.objectContaining({ stepName: 'generate', stepIndex: null, stepInstanceId: 'gen#2', iteration: 3 }),
    nextStepIndex: null,
    resumeBy: 'name',
    attempt: 1,
    lastSeq: 3,
  },
  'by-name-failed': {
    ...at,
    itemId: 'by-name-failed',
    status: 'failed',
    cursor: expect.objectContaining({ stepName: 'load', stepIndex: null, stepInstanceId: null }),
    nextStepIndex: null,
    resumeBy: 'name',
    attempt: 2,
    lastSeq: 3,
  },
};

const byId = (list: Array<{ itemId: string }>) => [...list].sort((a, b) => (a.itemId < b.itemId ? -1 : 1));

describe('resume handler', () => {
  it('direct: sends one instruction per resumable item, reports terminal and missing ones', async () => {
    const res = await resume({ ...at, itemIds: ['done', 'filtered', 'failed', 'failed-twice', 'running', 'new', 'by-name', 'by-name-failed', 'ghost', 'running'] }, ctx());
    expect(byId(res.sent)).toEqual(byId(Object.values(EXPECTED) as Array<{ itemId: string }>));
    expect(byId(res.terminal)).toEqual([
      { ...at, itemId: 'done', status: 'completed' },
      { ...at, itemId: 'filtered', status: 'filtered' },
    ]);
    expect(res.missing).toEqual([{ ...at, itemId: 'ghost' }]);
    expect(res.failed).toEqual([]);
    // What the queue holds is exactly what was reported sent: one message per item.
    const got = (await sqs.drain(queueUrl)) as Array<{ itemId: string }>;
    expect(byId(got)).toEqual(byId(res.sent));
    expect(got).toHaveLength(6);
  });

  it('SQS trigger: an invalid message is reported alone; the other items are resumed', async () => {
    const bodies = [
      { ...at, itemId: 'failed' },
      { ...at, itemId: 'done' },
      { ...at, itemIds: ['running', 'new'], traceId: 'extra keys are fine in messages' },
      { ...at }, // names no item
      'garbage',
      { ...at, itemId: 'ghost' },
    ];
    const res = await resume(sqsEvent(bodies, { messageIds: ['t0', 't1', 't2', 't3', 't4', 't5'] }), ctx());
    expect(res.batchItemFailures).toEqual([{ itemIdentifier: 't3' }, { itemIdentifier: 't4' }]);
    expect(res.failed.map((f: { messageId: string; error: { name: string } }) => [f.messageId, f.error.name])).toEqual([
      ['t3', 'InvalidInputError'],
      ['t4', 'InvalidInputError'],
    ]);
    expect(res.terminal.map((t: { itemId: string }) => t.itemId)).toEqual(['done']);
    expect(res.missing.map((t: { itemId: string }) => t.itemId)).toEqual(['ghost']);
    const got = (await sqs.drain(queueUrl)) as Array<{ itemId: string }>;
    expect(byId(got)).toEqual(byId([EXPECTED.failed, EXPECTED.running, EXPECTED.new] as Array<{ itemId: string }>));
  });

  it('EventBridge event: detail names the items', async () => {
    const res = await resume(eventBridgeEvent({ ...at, itemId: 'running' }), ctx());
    expect(res.sent).toEqual([EXPECTED.running]);
    expect(await sqs.drain(queueUrl)).toEqual([EXPECTED.running]);
    const err = await thrown(resume(eventBridgeEvent({ pipeline: 'p', itemId: 'x' }), ctx()));
    expect(err.name).toBe('InvalidInputError');
    expect(err.field).toBe('event.detail.experiment');
  });

  it('fails with ConfigurationError when DGCL_RESUME_QUEUE_URL is missing, and InvalidInputError for bad input', async () => {
    delete process.env.DGCL_RESUME_QUEUE_URL;
    const err = await thrown(resume({ ...at, itemIds: ['running'] }, ctx()));
    expect(err.name).toBe('ConfigurationError');
    expect(err.message).toContain('DGCL_RESUME_QUEUE_URL');
    process.env.DGCL_RESUME_QUEUE_URL = queueUrl;
    for (const [event, field] of [
      [{ ...at, itemIds: [] }, 'event.itemIds'],
      [{ ...at, itemId: 'x' }, 'event'],
      [{ ...at, itemIds: ['a'], pipeline: 'bad/name' }, 'event.pipeline'],
    ] as const) {
      const e = await thrown(resume(event, ctx()));
      expect(e.name, JSON.stringify(event)).toBe('InvalidInputError');
      expect(e.field, JSON.stringify(event)).toBe(field);
    }
    expect(await sqs.drain(queueUrl)).toEqual([]);
  });

  it('a send failure fails only the records naming that item (SQS), or the invocation after sending the rest (direct)', async () => {
    const memory = new MemoryResumeSink();
    const flaky: ResumeSink = {
      async send(instructions) {
        const ok = instructions.filter((i) => i.itemId !== 'new');
        const sent = await memory.send(ok);
        return {
          sent: sent.sent,
          failed: instructions
            .filter((i) => i.itemId === 'new')
            .map((instruction) => ({ instruction, error: { name: 'UnavailableError', code: 'UNAVAILABLE', message: 'queue unavailable', retryable: true } })),
        };
      },
    };
    const h = createResumeHandler({ sink: () => flaky }) as unknown as Fn;
    const res = await h(sqsEvent([{ ...at, itemId: 'running' }, { ...at, itemId: 'new' }], { messageIds: ['a', 'b'] }), ctx());
    expect(res.batchItemFailures).toEqual([{ itemIdentifier: 'b' }]);
    expect(memory.messages.map((m) => m.itemId)).toEqual(['running']);

    const err = await thrown(h({ ...at, itemIds: ['running', 'new'] }, ctx()));
    expect(err.name).toBe('UnavailableError');
    expect(err.message).toContain('new');
    expect(memory.messages.map((m) => m.itemId)).toEqual(['running', 'running']);
  });
});

describe('SqsResumeSink', () => {
  const instruction = (i: number): ResumeInstruction => ({ ...at, itemId: `it-${String(i).padStart(2, '0')}`, status: 'in_progress', cursor: null, nextStepIndex: 0, resumeBy: 'index', attempt: 1, lastSeq: 1 });

  it('sends in chunks of 10 and retries the entries SQS failed on its side, until each is sent once', async () => {
    const calls: number[] = [];
    let dropped = 0;
    // In front of the real endpoint: on first sight, the entries with an odd id are not forwarded
    // and are reported as failed by the server (SenderFault false), as SQS does under load.
    const seen = new Set<string>();
    const client = {
      async send(cmd: SendMessageBatchCommand): Promise<SendMessageBatchCommandOutput> {
        const entries = cmd.input.Entries ?? [];
        calls.push(entries.length);
        const drop = entries.filter((e) => {
          const body = e.MessageBody!;
          const first = !seen.has(body);
          seen.add(body);
          return first && Number(e.Id) % 2 === 1;
        });
        const forward = entries.filter((e) => !drop.includes(e));
        dropped += drop.length;
        const res = forward.length > 0 ? await sqs.client.send(new SendMessageBatchCommand({ ...cmd.input, Entries: forward })) : { Successful: [], Failed: [], $metadata: {} };
        return {
          ...res,
          Failed: [...(res.Failed ?? []), ...drop.map((e) => ({ Id: e.Id!, SenderFault: false, Code: 'InternalError', Message: 'try again' }))],
        } as SendMessageBatchCommandOutput;
      },
    };
    const sink = new SqsResumeSink({ client, queueUrl, backoffMs: 1 });
    const all = Array.from({ length: 25 }, (_, i) => instruction(i));
    const out = await sink.send(all);
    expect(out.failed).toEqual([]);
    expect(out.sent).toHaveLength(25);
    expect(dropped).toBe(12); // ids 1,3,5,7,9 of the two full chunks, 1,3 of the last
    expect(calls).toEqual([10, 5, 10, 5, 5, 2]);
    const got = (await sqs.drain(queueUrl)) as ResumeInstruction[];
    expect(got.map((g) => g.itemId).sort()).toEqual(all.map((a) => a.itemId));
  });

  it('does not retry an entry the sender is at fault for, and reports it failed', async () => {
    let calls = 0;
    const client = {
      async send(cmd: SendMessageBatchCommand): Promise<SendMessageBatchCommandOutput> {
        calls++;
        const [bad, ...rest] = cmd.input.Entries ?? [];
        const res = await sqs.client.send(new SendMessageBatchCommand({ ...cmd.input, Entries: rest }));
        return { ...res, Failed: [{ Id: bad!.Id!, SenderFault: true, Code: 'InvalidMessageContents', Message: 'no' }] } as SendMessageBatchCommandOutput;
      },
    };
    const out = await new SqsResumeSink({ client, queueUrl, backoffMs: 1 }).send([instruction(0), instruction(1)]);
    expect(calls).toBe(1);
    expect(out.sent.map((s) => s.itemId)).toEqual(['it-01']);
    expect(out.failed).toEqual([{ instruction: instruction(0), error: expect.objectContaining({ name: 'InvalidInputError', retryable: false }) }]);
  });

  it('gives up after maxAttempts when the endpoint keeps failing, reporting every message', async () => {
    const client = {
      async send(): Promise<SendMessageBatchCommandOutput> {
        throw Object.assign(new Error('boom'), { name: 'ServiceUnavailable', $fault: 'server' });
      },
    };
    const out = await new SqsResumeSink({ client, queueUrl, backoffMs: 1, maxAttempts: 3 }).send([instruction(0), instruction(1)]);
    expect(out.sent).toEqual([]);
    expect(out.failed.map((f) => [f.instruction.itemId, f.error.name])).toEqual([
      ['it-00', 'UnavailableError'],
      ['it-01', 'UnavailableError'],
    ]);
  });

  it('sets MessageGroupId and MessageDeduplicationId on a FIFO queue: one message per item and last seq', async () => {
    const fifo = await sqs.newQueue('dgcl-resume.fifo');
    const later = { ...instruction(1), lastSeq: 2 };
    // Same item and last seq, another body (a sender that saw it differently): still the same message.
    const sameSeq = { ...instruction(0), attempt: 2 };
    const out = await new SqsResumeSink({ client: sqs.client, queueUrl: fifo }).send([instruction(0), instruction(0), sameSeq, instruction(1), later]);
    expect(out.failed).toEqual([]);
    const got = (await sqs.drain(fifo)) as ResumeInstruction[];
    expect(got.map((g) => [g.itemId, g.lastSeq, g.attempt]).sort()).toEqual([
      ['it-00', 1, 1],
      ['it-01', 1, 1],
      ['it-01', 2, 1],
    ]);
  });
});

describe('resumePoint', () => {
  const cursorOf = (c: Partial<Cursor>): Cursor => ({ stepName: 's', stepIndex: null, stepInstanceId: null, iteration: null, attempt: 1, checkpointId: 'c', ...c });
  const state = (s: Partial<ItemState>): ItemState => ({
    itemId: 'x',
    rootItemId: 'x',
    parentItemId: null,
    status: 'in_progress',
    fields: {},
    cursor: null,
    lastSeq: 3,
    attempts: 1,
    failures: [],
    violations: [],
    ...s,
  });
  const failure = (attempt: number) => ({ stepName: 'gen', attempt, errorType: 'E', errorDump: null, traceback: null, seq: 3 });

  it('a cursor without a step index resumes by name after that step, never back at step 0', () => {
    const c = cursorOf({ stepName: 'generate', stepInstanceId: 'gen#2' });
    expect(resumePoint(state({ cursor: c }))).toEqual({ itemId: 'x', status: 'in_progress', cursor: c, nextStepIndex: null, resumeBy: 'name', attempt: 1, resumable: true });
    expect(resumePoint(state({ cursor: c, status: 'failed', failures: [failure(1), failure(2)] }))).toMatchObject({ nextStepIndex: null, resumeBy: 'name', attempt: 3, resumable: true });
  });

  it('an indexed cursor resumes at the next index; no cursor at 0; both by index', () => {
    expect(resumePoint(state({ cursor: cursorOf({ stepIndex: 0 }) }))).toMatchObject({ nextStepIndex: 1, resumeBy: 'index', resumable: true });
    expect(resumePoint(state({ cursor: cursorOf({ stepIndex: 4 }), status: 'failed', failures: [failure(1)] }))).toMatchObject({ nextStepIndex: 5, resumeBy: 'index', attempt: 2 });
    expect(resumePoint(state({ cursor: null }))).toMatchObject({ nextStepIndex: 0, resumeBy: 'index', resumable: true });
  });

  it('terminal items are not resumed, with or without an index', () => {
    for (const status of ['completed', 'filtered'] as const) {
      for (const c of [cursorOf({ stepIndex: 2 }), cursorOf({}), null]) {
        expect(resumePoint(state({ status, cursor: c }))).toMatchObject({ nextStepIndex: null, resumeBy: null, resumable: false });
      }
    }
  });
});
