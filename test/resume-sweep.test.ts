/**
 * Stalled items and sending them resume instructions (lib/resume-sweep.ts) on a real local log
 * whose events are written at chosen times: the log takes an injected clock (ManualClock), so
 * each item's last event is at a known minute and nothing sleeps. Some items' rows are merged
 * into the base, the others stay in the writer's shard: both places are read.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { InvalidInputError, LogNotFoundError } from '../lib/errors.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { readsOf } from '../lib/log/reads.ts';
import { parseWhere } from '../lib/select/parse.ts';
import { openLog } from '../lib/open.ts';
import type { ResumeInstruction } from '../lib/resume.ts';
import { sendResumes, stalledItems, type ResumeSender, type StalledItem, type StalledOptions } from '../lib/resume-sweep.ts';
import type { ItemQuery } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';

const MIN = 60_000;
const T0 = 1_800_000_000_000;
const root = mkdtempSync(path.join(tmpdir(), 'dgcl-sweep-'));
const clock = new ManualClock(T0);
let log: CheckpointLog;

/** Minute of each item's last event (after T0), for the items that are not terminal. */
const LAST_AT: Record<string, number> = {};
const TERMINAL = ['done', 'dropped', 'late-done'];
const NOW = T0 + 60 * MIN;

async function at(minute: number, batches: Record<string, unknown>[]): Promise<void> {
  clock.advance(T0 + minute * MIN - clock.nowMs());
  await log.append(batches);
  for (const b of batches) {
    const id = b.itemId as string;
    if (TERMINAL.includes(id)) delete LAST_AT[id];
    else LAST_AT[id] = minute;
  }
}

/** The non-terminal items whose last event is more than `minutes` before `now`. */
function expected(minutes: number, now = NOW): string[] {
  return Object.entries(LAST_AT)
    .filter(([, m]) => now - (T0 + m * MIN) > minutes * MIN)
    .map(([id]) => id)
    .sort();
}

async function sweepIds(o: Partial<StalledOptions> & { stalledForMs: number }): Promise<string[]> {
  const ids: string[] = [];
  for await (const s of stalledItems(log, { now: NOW, ...o })) ids.push(s.itemId);
  return ids;
}

beforeAll(async () => {
  // A lease far longer than the clock moves: the writer keeps its slot throughout.
  log = await openLog({ root, pipeline: 'p', experiment: 'sweep', clock, leaseTtlMs: 24 * 60 * MIN, mergeIdleMs: 0 });
  await at(0, [
    createBatch('idle-0'),
    createBatch('failed-10'),
    createBatch('done', { terminal: 'completed' }),
    createBatch('stepped-50'),
    createBatch('deleted'),
    createBatch('dropped'),
  ]);
  await at(5, [{ itemId: 'dropped', runId: 'r1', terminal: 'filtered' }]);
  await at(10, [{ itemId: 'failed-10', runId: 'r1', step: { name: 'step1', index: 1 }, failed: { errorType: 'Timeout' } }]);
  await log.deleteItem('deleted');
  delete LAST_AT.deleted;
  // What is written so far goes to the base; what follows stays in the shard.
  await log.mergeOwnShard();
  await at(20, [createBatch('late-done')]);
  await at(21, [stepBatch('late-done', 1, { terminal: 'completed' })]);
  await at(30, [createBatch('boundary-30')]);
  // Twenty more, one a minute, for paging.
  for (let m = 31; m <= 50; m++) await at(m, [createBatch(`many-${String(m - 31).padStart(2, '0')}`), ...(m === 50 ? [stepBatch('stepped-50', 1)] : [])]);
  await at(59, [createBatch('fresh-59')]);
  clock.advance(NOW - clock.nowMs());
});
afterAll(async () => {
  await log?.close();
});

describe('stalledItems', () => {
  it('lists exactly the non-terminal items idle for more than the duration, in id order', async () => {
    for (const minutes of [1, 9, 10, 15, 29, 30, 45, 55, 59, 60]) {
      expect(await sweepIds({ stalledForMs: minutes * MIN }), `${minutes} min`).toEqual(expected(minutes));
    }
    // Spelled out for two of them, so the expectation itself is checked.
    expect(await sweepIds({ stalledForMs: 45 * MIN })).toEqual(['failed-10', 'idle-0']);
    expect(await sweepIds({ stalledForMs: 15 * MIN })).toEqual(['boundary-30', 'failed-10', 'idle-0', ...Array.from({ length: 14 }, (_, i) => `many-${String(i).padStart(2, '0')}`)]);
    expect(await sweepIds({ stalledForMs: 61 * MIN })).toEqual([]);
  });

  it('is strict at the boundary: exactly the duration idle is not stalled, one millisecond more is', async () => {
    expect(await sweepIds({ stalledForMs: 30 * MIN })).not.toContain('boundary-30');
    expect(await sweepIds({ stalledForMs: 30 * MIN, now: NOW + 1 })).toContain('boundary-30');
    expect(await sweepIds({ stalledForMs: MIN })).not.toContain('fresh-59');
    expect(await sweepIds({ stalledForMs: MIN - 1 })).toContain('fresh-59');
  });

  it('never lists terminal or deleted items, however short the duration', async () => {
    const all = await sweepIds({ stalledForMs: 1 });
    expect(all).toEqual(Object.keys(LAST_AT).sort());
    for (const id of [...TERMINAL, 'deleted']) expect(all).not.toContain(id);
  });

  it('gives each item its status, cursor, last seq and the time of its last event', async () => {
    const got: StalledItem[] = [];
    for await (const s of stalledItems(log, { stalledForMs: 40 * MIN, now: NOW })) got.push(s);
    expect(got).toEqual([
      {
        itemId: 'failed-10',
        status: 'failed',
        cursor: expect.objectContaining({ stepName: 'load', stepIndex: 0 }),
        lastSeq: 4,
        lastEventAt: new Date(T0 + 10 * MIN).toISOString().replace('Z', '000Z'),
        idleMs: 50 * MIN,
      },
      {
        itemId: 'idle-0',
        status: 'in_progress',
        cursor: expect.objectContaining({ stepName: 'load', stepIndex: 0 }),
        lastSeq: 3,
        lastEventAt: new Date(T0).toISOString().replace('Z', '000Z'),
        idleMs: 60 * MIN,
      },
    ]);
  });

  it('with a --where filter, only the stalled items it selects', async () => {
    const all = await sweepIds({ stalledForMs: 15 * MIN });
    const failed = new Set((await log.items({ status: 'failed' })).items.map((i) => i.itemId));
    const ids = await sweepIds({ stalledForMs: 15 * MIN, where: parseWhere('status = failed') });
    expect(ids).toEqual(all.filter((id) => failed.has(id)));
    // The fixture's one failed item idle for more than 15 minutes, out of the 17 stalled.
    expect(ids).toEqual(['failed-10']);
    expect(all).toHaveLength(17);
  });

  it('pages through the listing: each stalled item exactly once, whatever the page size, one page in memory at a time', async () => {
    // Every item the listing shows: the stalled candidates and the terminal ones (not the deleted one).
    const visible = Object.keys(LAST_AT).length + TERMINAL.length;
    expect((await log.items()).items.length).toBe(visible);
    for (const pageSize of [1, 2, 3, 7, 1000]) {
      const queries: ItemQuery[] = [];
      const recording = { items: (q: ItemQuery) => (queries.push(q), log.items(q)), scanEvents: readsOf(log).scanEvents.bind(readsOf(log)) };
      const sweep = stalledItems(recording, { stalledForMs: 15 * MIN, now: NOW, pageSize });
      const ids: string[] = [];
      for await (const s of sweep) ids.push(s.itemId);
      expect(ids, `page size ${pageSize}`).toEqual(expected(15));
      expect(new Set(ids).size).toBe(ids.length);
      expect(queries.every((q) => q.limit === pageSize)).toBe(true);
      expect(queries.length, `pages of ${pageSize}`).toBe(Math.ceil(visible / pageSize));
      expect(sweep.counts).toEqual({ pages: queries.length, items: visible, terminal: TERMINAL.length, stalled: ids.length });
    }
  });

  it('takes a predicate (a --where filter) and a limit', async () => {
    expect(await sweepIds({ stalledForMs: MIN, predicate: (s) => s.status === 'failed' })).toEqual(['failed-10']);
    expect(await sweepIds({ stalledForMs: MIN, predicate: async (s) => s.itemId.startsWith('many-0') && s.idleMs > 25 * MIN })).toEqual(['many-00', 'many-01', 'many-02', 'many-03']);
    expect(await sweepIds({ stalledForMs: MIN, limit: 3, pageSize: 2 })).toEqual(expected(1).slice(0, 3));
  });

  it('refuses bad options at the call, naming them', () => {
    for (const [o, field] of [
      [{ stalledForMs: 0 }, 'stalledForMs'],
      [{ stalledForMs: 1.5 }, 'stalledForMs'],
      [{ stalledForMs: MIN, pageSize: 0 }, 'pageSize'],
      [{ stalledForMs: MIN, pageSize: 10_001 }, 'pageSize'],
      [{ stalledForMs: MIN, limit: 0 }, 'limit'],
    ] as const) {
      let err: unknown;
      try {
        stalledItems(log, o);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(o)).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).field).toBe(field);
    }
  });

  it('a log that does not exist is LOG_NOT_FOUND, not an empty sweep', async () => {
    const other = await openLog({ root, pipeline: 'p', experiment: 'no-such' });
    try {
      const run = async () => {
        for await (const _ of stalledItems(other, { stalledForMs: MIN })) void _;
      };
      await expect(run()).rejects.toBeInstanceOf(LogNotFoundError);
    } finally {
      await other.close();
    }
  });
});

/** A sender that keeps what it was given and sends all of it, or fails the items named. */
function recordingSender(failing: readonly string[] = []): ResumeSender & { messages: ResumeInstruction[] } {
  const messages: ResumeInstruction[] = [];
  return {
    messages,
    async send(instructions) {
      const ok = instructions.filter((i) => !failing.includes(i.itemId));
      messages.push(...ok);
      return {
        sent: ok,
        failed: instructions.filter((i) => failing.includes(i.itemId)).map((instruction) => ({ instruction, error: { name: 'UnavailableError', code: 'UNAVAILABLE', message: 'queue down', retryable: true } })),
      };
    },
  };
}

async function* fromArray<T>(xs: readonly T[]): AsyncGenerator<T> {
  yield* xs;
}

describe('sendResumes', () => {
  const where = { pipeline: 'p', experiment: 'sweep' };

  it('sends one instruction per stalled item, the same one each time it is run', async () => {
    const runs: ResumeInstruction[][] = [];
    for (let run = 0; run < 2; run++) {
      const sender = recordingSender();
      const results = [];
      for await (const r of sendResumes(log, stalledItems(log, { stalledForMs: 45 * MIN, now: NOW }), sender, { ...where, chunk: 1 })) results.push(r);
      expect(results.map((r) => [r.item.itemId, r.sent, r.reason])).toEqual([
        ['failed-10', true, undefined],
        ['idle-0', true, undefined],
      ]);
      runs.push(sender.messages);
    }
    expect(runs[0]).toEqual([
      { ...where, itemId: 'failed-10', status: 'failed', cursor: expect.objectContaining({ stepIndex: 0 }), nextStepIndex: 1, resumeBy: 'index', attempt: 2, lastSeq: 4 },
      { ...where, itemId: 'idle-0', status: 'in_progress', cursor: expect.objectContaining({ stepIndex: 0 }), nextStepIndex: 1, resumeBy: 'index', attempt: 1, lastSeq: 3 },
    ]);
    // Sending twice: the same (item, lastSeq), so a FIFO queue keeps one and a worker drops the second.
    expect(runs[1]).toEqual(runs[0]);
  });

  it('does not send items that moved, ended or went away since the sweep saw them; reports failed sends', async () => {
    const clock2 = new ManualClock(NOW - 60 * MIN);
    const other = await openLog({ root, pipeline: 'p', experiment: 'sweep-send', clock: clock2, leaseTtlMs: 24 * 60 * MIN, mergeIdleMs: 0 });
    try {
      await other.append(['a-moves', 'b-ends', 'c-deleted', 'd-fails', 'e-sent'].map((id) => createBatch(id)));
      clock2.advance(60 * MIN);
      const stalled: StalledItem[] = [];
      for await (const s of stalledItems(other, { stalledForMs: 30 * MIN, now: NOW })) stalled.push(s);
      expect(stalled.map((s) => s.itemId)).toEqual(['a-moves', 'b-ends', 'c-deleted', 'd-fails', 'e-sent']);
      // Between the sweep and the send:
      await other.append([stepBatch('a-moves', 1), { itemId: 'b-ends', runId: 'r1', terminal: 'completed' }]);
      await other.deleteItem('c-deleted');
      const sender = recordingSender(['d-fails']);
      const results = [];
      for await (const r of sendResumes(other, fromArray(stalled), sender, { pipeline: 'p', experiment: 'sweep-send', chunk: 2 })) results.push(r);
      expect(results.map((r) => ({ id: r.item.itemId, sent: r.sent, reason: r.reason, code: r.error?.code, status: r.status }))).toEqual([
        { id: 'a-moves', sent: false, reason: 'moved', code: undefined, status: undefined },
        { id: 'b-ends', sent: false, reason: 'terminal', code: undefined, status: 'completed' },
        { id: 'c-deleted', sent: false, reason: 'missing', code: undefined, status: undefined },
        { id: 'd-fails', sent: false, reason: 'failed', code: 'UNAVAILABLE', status: undefined },
        { id: 'e-sent', sent: true, reason: undefined, code: undefined, status: undefined },
      ]);
      expect(sender.messages.map((m) => m.itemId)).toEqual(['e-sent']);
    } finally {
      await other.close();
    }
  });

  it('a sender that throws fails its chunk only', async () => {
    let calls = 0;
    const sender: ResumeSender = {
      async send(instructions) {
        if (++calls === 1) throw Object.assign(new Error('no route to queue'), { name: 'UnavailableError', code: 'UNAVAILABLE', retryable: true });
        return { sent: instructions, failed: [] };
      },
    };
    const results = [];
    for await (const r of sendResumes(log, stalledItems(log, { stalledForMs: 45 * MIN, now: NOW }), sender, { pipeline: 'p', experiment: 'sweep', chunk: 1 })) results.push(r);
    expect(results.map((r) => [r.item.itemId, r.sent, r.error?.message])).toEqual([
      ['failed-10', false, 'no route to queue'],
      ['idle-0', true, undefined],
    ]);
  });
});
