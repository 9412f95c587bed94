/**
 * The append handler on a file:// root: direct invocations and SQS events built as Lambda
 * delivers them, against the real log (no mocks).
 */
import './support/env.ts';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { failRest, handler as appendHandler, orderQueues, parseRecord, type Outcome, type Rec } from '../../functions/append.ts';
import { readConfig } from '../../functions/shared/config.ts';
import { sqsEvent } from '../../functions/shared/events.ts';
import { logCache } from '../../functions/shared/logs.ts';
import { openLog } from '../../lib/index.ts';
import { LocalLeaseStore } from '../../lib/lease/local.ts';
import { parseWriterEpoch, slotKey } from '../../lib/lease/slots.ts';
import { leaseLogIdAt } from '../support/coord.ts';
import type { Ack } from '../../lib/types.ts';
import { createBatch, ctx, freshFileRoot, stepBatch, thrown, uniq } from './support/fixtures.ts';

const append = appendHandler as unknown as (event: unknown, context: ReturnType<typeof ctx>) => Promise<any>;

let dir: string;
beforeEach(() => {
  dir = freshFileRoot();
});
afterEach(async () => {
  delete process.env.DGCL_MERGE_EVERY_MS;
  await logCache.closeAll();
});
afterAll(async () => {
  await logCache.closeAll();
});

async function reader(experiment: string, pipeline = 'p') {
  return openLog({ root: process.env.DGCL_ROOT!, pipeline, experiment });
}

describe('append handler: direct invocation', () => {
  it('returns one ack per batch, and the same acks (duplicate) when invoked again; one copy is stored', async () => {
    const e = uniq('e');
    const batches = [createBatch('a'), createBatch('b'), stepBatch('a', 1)];
    const first = (await append({ pipeline: 'p', experiment: e, batches }, ctx())).acks as Ack[];
    expect(first.map((a) => [a.itemId, a.firstSeq, a.duplicate])).toEqual([
      ['a', 1, false],
      ['b', 1, false],
      ['a', 4, false],
    ]);
    const again = (await append({ pipeline: 'p', experiment: e, batches }, ctx())).acks as Ack[];
    expect(again).toEqual(first.map((a) => ({ ...a, duplicate: true })));

    const log = await reader(e);
    try {
      expect((await log.trajectory('a')).length).toBe(first[2]!.lastSeq);
      expect((await log.fold('a')).cursor?.stepIndex).toBe(1);
    } finally {
      await log.close();
    }
  });

  it('rejects an invalid batch with InvalidInputError naming the field, and writes nothing', async () => {
    const e = uniq('e');
    const err = await thrown(append({ pipeline: 'p', experiment: e, batches: [createBatch('ok'), { itemId: 'x', runId: 'r', create: {}, set: { bad: Number.NaN } }] }, ctx()));
    expect(err.name).toBe('InvalidInputError');
    expect(err.code).toBe('INVALID_INPUT');
    expect(err.message).toContain('batches[1].set.bad');
    const log = await reader(e);
    try {
      // Nothing was written: not even the log exists.
      await expect(log.items()).rejects.toMatchObject({ code: 'LOG_NOT_FOUND' });
    } finally {
      await log.close();
    }
  });

  it('rejects an item that was never created with ItemNotFoundError (an input error), writing none of the request', async () => {
    const e = uniq('e');
    const err = await thrown(append({ pipeline: 'p', experiment: e, batches: [createBatch('fine'), stepBatch('ghost', 1)] }, ctx()));
    expect(err.name).toBe('ItemNotFoundError');
    expect(err.code).toBe('ITEM_NOT_FOUND');
    const log = await reader(e);
    try {
      // Nothing was written: not even the log exists.
      await expect(log.items()).rejects.toMatchObject({ code: 'LOG_NOT_FOUND' });
    } finally {
      await log.close();
    }
  });

  it('rejects a malformed event before any I/O: bad names, unknown keys, missing batches', async () => {
    for (const [event, field] of [
      [{ pipeline: '../x', experiment: 'e', batches: [] }, 'event.pipeline'],
      [{ pipeline: 'p', experiment: 'e', batches: [], extra: 1 }, 'event'],
      [{ pipeline: 'p', experiment: 'e' }, 'event.batches'],
      [{ pipeline: 'p', experiment: 'e', batches: {} }, 'event.batches'],
    ] as const) {
      const err = await thrown(append(event, ctx()));
      expect(err.name, JSON.stringify(event)).toBe('InvalidInputError');
      expect(err.field, JSON.stringify(event)).toBe(field);
    }
    expect(existsSync(path.join(dir, 'datagen_checkpoints'))).toBe(false);
  });

  it('fails with ConfigurationError when DGCL_ROOT is missing', async () => {
    delete process.env.DGCL_ROOT;
    const err = await thrown(append({ pipeline: 'p', experiment: 'e', batches: [] }, ctx()));
    expect(err.name).toBe('ConfigurationError');
    expect(err.message).toContain('DGCL_ROOT');
  });
});

describe('append handler: SQS event', () => {
  const body = (experiment: string, batch: Record<string, unknown>, pipeline = 'p') => ({ pipeline, experiment, ...batch });

  it('reports only the invalid records in batchItemFailures; the others are written', async () => {
    const e1 = uniq('e');
    const e2 = uniq('e');
    const records = [
      body(e1, createBatch('a')),
      body(e1, { ...createBatch('bad-key'), colour: 'red' }), // unknown key
      body(e2, createBatch('b')),
      'not json at all',
      { experiment: e1, ...createBatch('no-pipeline') },
      body(e1, stepBatch('never-created', 1)), // invalid only against the log
      body(e1, createBatch('c')),
      body(e2, stepBatch('b', 1)),
    ];
    const ids = records.map((_, i) => `m-${i}`);
    const res = await append(sqsEvent(records, { messageIds: ids }), ctx());
    expect(res).toEqual({ batchItemFailures: ['m-1', 'm-3', 'm-4', 'm-5'].map((itemIdentifier) => ({ itemIdentifier })) });

    const l1 = await reader(e1);
    const l2 = await reader(e2);
    try {
      expect((await l1.items()).items.map((i) => i.itemId)).toEqual(['a', 'c']);
      expect((await l2.fold('b')).cursor?.stepIndex).toBe(1);
    } finally {
      await l1.close();
      await l2.close();
    }
  });

  it('is idempotent across duplicate deliveries: same ack, one copy', async () => {
    const e = uniq('e');
    const batches = [createBatch('d1'), stepBatch('d1', 1), createBatch('d2')];
    const event = sqsEvent(batches.map((b) => body(e, b)), { messageIds: ['x1', 'x2', 'x3'] });
    expect(await append(event, ctx())).toEqual({ batchItemFailures: [] });
    // The same messages again (a visibility timeout ran out, Lambda retried) ...
    expect(await append({ Records: event.Records.map((r) => ({ ...r, attributes: { ...r.attributes, ApproximateReceiveCount: '2' } })) }, ctx())).toEqual({ batchItemFailures: [] });
    // ... and the same bodies under new message ids, twice in one batch (a producer re-sent them).
    expect(await append(sqsEvent([...batches, ...batches].map((b) => body(e, b))), ctx())).toEqual({ batchItemFailures: [] });

    const log = await reader(e);
    try {
      const traj = await log.trajectory('d1');
      expect(traj.map((x) => x.itemSeq)).toEqual(traj.map((_, i) => i + 1));
      expect(traj.filter((x) => x.eventType === 'ITEM_CREATED')).toHaveLength(1);
      expect(traj.filter((x) => x.eventType === 'STEP_COMPLETED')).toHaveLength(2);
      // The ack a producer gets for the batch now is the one of the first delivery.
      const [ack] = (await append({ pipeline: 'p', experiment: e, batches: [batches[1]] }, ctx())).acks as Ack[];
      const stepEvents = traj.filter((x) => x.checkpointId === ack!.checkpointId);
      expect(ack).toMatchObject({ duplicate: true, firstSeq: stepEvents[0]!.itemSeq, lastSeq: stepEvents.at(-1)!.itemSeq });
      expect(ack!.eventIds).toEqual(stepEvents.map((x) => x.eventId));
    } finally {
      await log.close();
    }
  });

  it("appends an item's records in delivery order within one batch; an invalid one does not stop the item", async () => {
    const e = uniq('e');
    const records = [
      body(e, createBatch('o')),
      body(e, stepBatch('o', 1)),
      body(e, { ...stepBatch('o', 2), step: { name: 'step2', index: 'two' } }), // invalid
      body(e, stepBatch('o', 3)),
      body(e, createBatch('q')),
    ];
    const res = await append(sqsEvent(records, { messageIds: ['o0', 'o1', 'o2', 'o3', 'q0'], groupIds: ['o', 'o', 'o', 'o', 'q'] }), ctx());
    expect(res).toEqual({ batchItemFailures: [{ itemIdentifier: 'o2' }] });
    const log = await reader(e);
    try {
      const traj = await log.trajectory('o');
      expect(traj.filter((x) => x.eventType === 'STEP_COMPLETED').map((x) => x.stepIndex)).toEqual([0, 1, 3]);
      expect((await log.fold('o')).cursor?.stepIndex).toBe(3);
    } finally {
      await log.close();
    }
  });

  it('reports the records it had no time for, instead of timing out the whole batch', async () => {
    const e = uniq('e');
    await append({ pipeline: 'p', experiment: e, batches: [createBatch('warm')] }, ctx()); // log now cached
    // 400 ms left: less than the 500 ms reserve, so no record may be started.
    const res = await append(sqsEvent([body(e, createBatch('late1')), body(e, createBatch('late2'))], { messageIds: ['l1', 'l2'] }), ctx('append', 400));
    expect(res).toEqual({ batchItemFailures: [{ itemIdentifier: 'l1' }, { itemIdentifier: 'l2' }] });
    const log = await reader(e);
    try {
      expect((await log.items()).items.map((i) => i.itemId)).toEqual(['warm']);
    } finally {
      await log.close();
    }
  });

  it('fails the whole invocation only when a record cannot be identified (no messageId)', async () => {
    const event = sqsEvent([{ pipeline: 'p', experiment: 'e', ...createBatch('a') }]);
    const broken = { Records: [{ ...event.Records[0], messageId: undefined }] };
    const err = await thrown(append(broken, ctx()));
    expect(err.name).toBe('InvalidInputError');
    expect(err.field).toBe('Records[0].messageId');
  });
});

describe('append handler: warm container', () => {
  it('keeps its log and writer slot across invocations; the lease is bounded by the remaining time', async () => {
    const e = uniq('e');
    await append({ pipeline: 'p', experiment: e, batches: [createBatch('w1')] }, ctx('append', 20_000));
    const entry = await logCache.get(readConfig(), 'p', e, { leaseTtlMs: 60_000 });
    const epoch = entry.log.writerEpoch;
    expect(epoch).toMatch(/^s\d\d-e\d{6}$/);
    expect(entry.leaseTtlMs).toBeLessThanOrEqual(20_000);
    expect(entry.leaseTtlMs).toBeGreaterThan(15_000);

    await append(sqsEvent([{ pipeline: 'p', experiment: e, ...createBatch('w2') }]), ctx('append', 20_000));
    expect(entry.log.writerEpoch).toBe(epoch);
    expect(logCache.size).toBe(1);

    const leases = new LocalLeaseStore({ dir: path.join(dir, '.dgcl', 'leases') });
    try {
      const lease = await leases.read(slotKey('p', e, parseWriterEpoch(epoch!).slot, leaseLogIdAt(path.join(dir, 'datagen_checkpoints', 'p', e, 'log.lance'))));
      expect(lease?.epoch).toBe(parseWriterEpoch(epoch!).epoch);
      expect(lease!.expiresAtMs - Date.now()).toBeLessThanOrEqual(20_000);
    } finally {
      await leases.close();
    }
  });

  it('merges its own shard once the last merge is older than DGCL_MERGE_EVERY_MS', async () => {
    const e = uniq('e');
    await append({ pipeline: 'p', experiment: e, batches: [createBatch('m1'), createBatch('m2')] }, ctx());
    const log = await reader(e);
    try {
      expect((await log.stats()).shards.filter((s) => !s.retired).length).toBe(1);
      process.env.DGCL_MERGE_EVERY_MS = '1';
      await new Promise((r) => setTimeout(r, 5));
      await append({ pipeline: 'p', experiment: e, batches: [createBatch('m3')] }, ctx());
      const stats = await log.stats();
      expect(stats.shards.filter((s) => !s.retired && s.rows > 0)).toEqual([]);
      expect(stats.base.rows).toBeGreaterThan(0);
      expect((await log.items()).items.map((i) => i.itemId)).toEqual(['m1', 'm2', 'm3']);
    } finally {
      await log.close();
    }
  });
});

describe('append handler: background merges', () => {
  it('returns only once the merge its commits started in the background has committed (a frozen container must not hold one)', async () => {
    const e = uniq('e');
    // One commit per invocation: the 64th (mergeEveryCommits) rotates the generation and
    // starts its merge in the background, after the acks were answered.
    await append({ pipeline: 'p', experiment: e, batches: [createBatch('a')] }, ctx());
    const entry = await logCache.get(readConfig(), 'p', e, { leaseTtlMs: 60_000 });
    // White-box: what runs in the background of the cached log at the moment a handler returns.
    const writer = (entry.log as unknown as { writer: { merges: { merging: unknown }; running: unknown } }).writer;
    let mergeSeen = false;
    for (let i = 1; i < 64; i++) {
      await append({ pipeline: 'p', experiment: e, batches: [stepBatch('a', i)] }, ctx());
      expect([writer.merges.merging, writer.running], `background work when invocation ${i + 1} returned`).toEqual([null, null]);
      mergeSeen ||= (await entry.log.stats()).base.rows > 0;
    }
    expect(mergeSeen, 'the 64th commit started a merge').toBe(true);
    const log = await reader(e);
    try {
      const events = (await log.trajectory('a')).length;
      expect((await log.stats()).base.rows, 'every event of the rotated generation is in the base when the handler returned').toBe(events);
    } finally {
      await log.close();
    }
  });
});

describe('append handler: FIFO message groups', () => {
  // A real FIFO event shape (attributes.MessageGroupId = the root item id, as the stack's senders
  // set it): root r with its child item c in group r, and item s in its own group.
  const e = 'fifo';
  const bodies = [
    { pipeline: 'p', experiment: e, ...createBatch('r') },
    { pipeline: 'p', experiment: e, ...createBatch('s') },
    { pipeline: 'p', experiment: e, ...createBatch('c', { create: { rootItemId: 'r', parentItemId: 'r' } }) },
    { pipeline: 'p', experiment: e, ...stepBatch('r', 1) },
    { pipeline: 'p', experiment: e, ...stepBatch('s', 1) },
  ];
  const event = sqsEvent(bodies, { messageIds: ['r0', 's0', 'c0', 'r1', 's1'], groupIds: ['r', 's', 'r', 'r', 's'] });
  const recs = event.Records.map((r, i) => parseRecord(r, i, r.messageId));

  it('keeps a message group in one queue in delivery order, across its items', () => {
    expect(orderQueues(recs).map((q) => q.map((r) => r.messageId))).toEqual([
      ['r0', 'c0', 'r1'],
      ['s0', 's1'],
    ]);
    // Without a MessageGroupId (a standard queue) only an item's own records keep their order.
    const standard = sqsEvent(bodies).Records.map((r, i) => parseRecord(r, i, r.messageId));
    expect(orderQueues(standard).map((q) => q.map((r) => r.index))).toEqual([[0, 3], [1, 4], [2]]);
  });

  it("a failed record fails the later records of its group (other items too), and nothing of other groups", () => {
    const outcomes: Outcome[] = new Array(recs.length);
    const [groupR, groupS] = orderQueues(recs) as [Rec[], Rec[]];
    const first = groupR.shift()!; // r0 was tried and failed (not invalid)
    const error = { name: 'UnavailableError', code: 'UNAVAILABLE', message: 'storage did not answer', retryable: true };
    outcomes[first.index] = { kind: 'failed', error };
    failRest(groupR, error, outcomes);
    expect(groupR).toEqual([]);
    expect(groupS.map((r) => r.messageId)).toEqual(['s0', 's1']);
    expect(outcomes.map((o, i) => (o ? `${recs[i]!.messageId}:${o.kind}` : undefined))).toEqual(['r0:failed', undefined, 'c0:failed', 'r1:failed', undefined]);
    const c0 = outcomes[2] as { error: { message: string; retryable: boolean } };
    expect(c0.error.message).toMatch(/^not tried: an earlier record of message group "r" in this batch failed \(storage did not answer\)$/);
    expect(c0.error.retryable).toBe(true);
  });

  it('appends a FIFO batch through the handler: every record acknowledged, each group in order', async () => {
    const res = await append(event, ctx());
    expect(res).toEqual({ batchItemFailures: [] });
    const log = await reader(e);
    try {
      expect((await log.items()).items.map((i) => i.itemId)).toEqual(['c', 'r', 's']);
      expect((await log.fold('c')).rootItemId).toBe('r');
      expect((await log.fold('r')).cursor?.stepIndex).toBe(1);
      expect((await log.fold('s')).cursor?.stepIndex).toBe(1);
    } finally {
      await log.close();
    }
  });
});
