/**
 * The report's step durations and failures over time, on a log written with a hand-moved clock
 * (event times are the writer's clock at each commit): a duration is measured within one run,
 * from an earlier commit, never from a FAILED; the failures line counts FAILED events.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { openLog } from '../lib/index.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { STEP_TIME } from '../lib/report/aggregate.ts';
import { report, type ReportResult } from '../lib/report/report.ts';
import type { CheckpointBatchInput } from '../lib/types.ts';

const T0 = 1_700_000_000_000;
const HOUR = 3_600_000;
const clock = new ManualClock(T0);
let log: CheckpointLog;
let r: ReportResult;
/** FAILED events written, and when. */
const failedAt: number[] = [];

/** One commit at T0 + `at` ms. */
async function at(ms: number, ...batches: CheckpointBatchInput[]): Promise<void> {
  clock.advance(T0 + ms - clock.nowMs());
  await log.append(batches);
  for (const b of batches) if (b.failed) failedAt.push(T0 + ms);
}

const step = (name: string, index: number) => ({ name, index });

beforeAll(async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-report-durations-'));
  // The clock jumps hours between runs: no lease may lapse meanwhile.
  log = await openLog({ root, pipeline: 'p', experiment: 'e', clock, leaseTtlMs: 24 * HOUR, mergeIdleMs: 0 });
  // Item a, run r1: its first step is written with its creation (nothing to measure it from).
  await at(0, { itemId: 'a', runId: 'r1', create: {}, step: step('load', 0) });
  await at(40, { itemId: 'a', runId: 'r1', step: step('generate', 1) });
  // score fails, then its retry completes in the same run: the wait before a retry is not step time.
  await at(100, { itemId: 'a', runId: 'r1', step: step('score', 2), failed: { errorType: 'Timeout' } });
  await at(5100, { itemId: 'a', runId: 'r1', step: step('score', 2), attempt: 2 });
  // Hours later, run r2 resumes: its first step is not measured from r1's last event.
  await at(3 * HOUR, { itemId: 'a', runId: 'r2', step: step('render', 3) });
  await at(3 * HOUR + 25, { itemId: 'a', runId: 'r2', step: step('judge', 4) });
  // Item b: created alone, then loaded 300 ms later in the same run.
  await at(3 * HOUR + 100, { itemId: 'b', runId: 'r2', create: {} });
  await at(3 * HOUR + 400, { itemId: 'b', runId: 'r2', step: step('load', 0) });
  // Item c: two steps committed together (one append): not measured either.
  await at(3 * HOUR + 500, { itemId: 'c', runId: 'r2', create: {}, step: step('load', 0) }, { itemId: 'c', runId: 'r2', step: step('generate', 1) });
  // Items d..f fail generate once each and pass on their retry: failures, but no item failed now.
  for (const [k, id] of ['d', 'e', 'f'].entries()) {
    const t = 4 * HOUR + k * 60_000;
    await at(t, { itemId: id, runId: 'r3', create: {}, step: step('load', 0) });
    await at(t + 10, { itemId: id, runId: 'r3', step: step('generate', 1), failed: { errorType: 'RateLimitError' } });
    await at(t + 20_000, { itemId: id, runId: 'r3', step: step('generate', 1), attempt: 2, terminal: 'completed' });
  }
  r = await report(log);
});

afterAll(async () => {
  await log.close();
});

describe('step durations', () => {
  const byName = () => new Map(r.data.steps.map((s) => [s.name, s.durationMs]));

  it('are measured from the previous event of the same run written earlier, never from a FAILED', () => {
    const d = byName();
    // load: b's 300 ms only (a and c were created with it, d..f too).
    expect(d.get('load')).toMatchObject({ count: 1, unmeasured: 5, p50: 300, max: 300 });
    // generate: a's 40 ms; c's was committed with its load; d..f's retries follow a FAILED.
    expect(d.get('generate')).toMatchObject({ count: 1, unmeasured: 4, p50: 40, max: 40 });
    expect(d.get('score')).toMatchObject({ count: 0, unmeasured: 1, p50: null, max: null });
    // render is r2's first step after r1's last event: the hours between runs are not step time.
    expect(d.get('render')).toMatchObject({ count: 0, unmeasured: 1, max: null });
    expect(d.get('judge')).toMatchObject({ count: 1, unmeasured: 0, p50: 25, max: 25 });
  });

  it('no step shows 0 ms by construction, and the page says how they are measured', () => {
    for (const s of r.data.steps) {
      expect(s.durationMs.count + s.durationMs.unmeasured, s.name).toBe(s.completions);
      if (s.durationMs.max !== null) expect(s.durationMs.max, s.name).toBeGreaterThan(0);
    }
    expect(r.data.stepTime).toBe(STEP_TIME);
    expect(r.html).toContain('id: \'step-time\'');
  });
});

describe('failures over time', () => {
  it('count FAILED events as they happen, also when every one was retried', () => {
    const p = r.data.progress;
    expect(r.data.status.failed).toBe(0);
    expect(failedAt).toHaveLength(4);
    expect(p.failures.at(-1)).toBe(4);
    // At each time point: the FAILED events up to then.
    p.t.forEach((t, i) => expect(p.failures[i], `at ${t - T0} ms`).toBe(failedAt.filter((f) => f <= t).length));
    // Non-decreasing, with steps at the failures' times.
    expect(p.failures.some((n) => n > 0 && n < 4)).toBe(true);
  });
});
