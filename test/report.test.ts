/**
 * report(): its figures agree with fold (lib/fold.ts) item by item, over a log spread across the
 * base and an unmerged shard; it reads light columns only; the page is self-contained.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidInputError } from '../lib/errors.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { REPORT_COLUMNS } from '../lib/report/aggregate.ts';
import { report, type ReportResult } from '../lib/report/report.ts';
import { TRAJECTORY_COLUMNS } from '../lib/report/trajectories.ts';
import { resumePoint } from '../lib/resume.ts';
import { SUMMARY_COLUMNS } from '../lib/schema.ts';
import type { ItemState, TrajectoryEvent } from '../lib/types.ts';
import { BLOB, buildExperiment } from './support/report-log.ts';

let dir: string;
let log: CheckpointLog;
let states: ItemState[];
let traj: Map<string, TrajectoryEvent[]>;
let r: ReportResult;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'dgcl-report-'));
  log = await buildExperiment(path.join(dir, 'root'));
  states = await log.allStates();
  traj = new Map();
  for (const s of states) traj.set(s.itemId, await log.trajectory(s.itemId));
  r = await report(log, { out: path.join(dir, 'out', 'report.html'), clock: { nowMs: () => 1_800_000_000_000, sleep: async () => {} } });
});

afterAll(async () => {
  await log.close();
});

describe('report', () => {
  it('reads no value or blob column: only columns of the listings set (SUMMARY_COLUMNS)', () => {
    for (const c of [...REPORT_COLUMNS, ...TRAJECTORY_COLUMNS]) expect(SUMMARY_COLUMNS as readonly string[]).toContain(c);
  });

  it('status counts and items agree with fold', () => {
    const d = r.data;
    expect(d.itemCount).toBe(states.length);
    expect(d.events).toBe([...traj.values()].reduce((a, t) => a + t.length, 0));
    const count = (st: string) => states.filter((s) => s.status === st).length;
    expect(d.status).toEqual({ in_progress: count('in_progress'), failed: count('failed'), completed: count('completed'), filtered: count('filtered') });
    expect(d.items.map((i) => i.id)).toEqual(states.map((s) => s.itemId));
    for (const s of states) {
      const row = d.items.find((i) => i.id === s.itemId)!;
      expect(row.status).toBe(s.status);
      expect(row.attempts).toBe(s.attempts);
      expect(row.events).toBe(traj.get(s.itemId)!.length);
      expect(row.cursor).toBe(s.cursor ? `${s.cursor.stepIndex}:${s.cursor.stepName} (attempt ${s.cursor.attempt})` : null);
      const rp = resumePoint(s);
      if (!rp.resumable) expect(row.resume).toBe(`not resumed (${s.status})`);
      else if (s.status === 'failed') expect(row.resume).toBe(`retry ${s.failures.at(-1)!.stepName} with attempt ${rp.attempt}`);
      else expect(row.resume).toBe(`step index ${rp.nextStepIndex}, after ${s.cursor!.stepName}`);
      const last = Math.max(...traj.get(s.itemId)!.map((e) => Date.parse(e.eventTs)));
      expect(Math.floor(row.lastMs)).toBe(last);
    }
    expect(d.items.find((i) => i.id === 'late-step')!.cursor, 'a step written late does not move the cursor back').toBe('1:generate (attempt 1)');
    // The progress series ends at every item counted once.
    const p = d.progress;
    expect(p.created.at(-1)).toBe(states.length);
    expect(p.completed.at(-1)).toBe(count('completed'));
    expect(p.filtered.at(-1)).toBe(count('filtered'));
    // Failures over time count FAILED events, not items failed now.
    expect(p.failures.at(-1)).toBe([...traj.values()].flat().filter((e) => e.eventType === 'FAILED').length);
  });

  it('per-step and per-error figures agree with the trajectories', () => {
    const all = [...traj.values()].flat();
    for (const step of r.data.steps) {
      const done = all.filter((e) => e.eventType === 'STEP_COMPLETED' && e.stepName === step.name);
      expect(step.completions).toBe(done.length);
      expect(step.itemsPassed).toBe(new Set(done.map((e) => e.itemId)).size);
      expect(step.failures).toBe(all.filter((e) => e.eventType === 'FAILED' && e.stepName === step.name).length);
      expect(step.retriedCompletions).toBe(done.filter((e) => e.attempt > 1).length);
      expect(step.durationMs.count + step.durationMs.unmeasured).toBe(done.length);
    }
    expect(r.data.steps.map((s) => s.name)).toEqual(['load', 'score', 'generate']);
    const failed = all.filter((e) => e.eventType === 'FAILED');
    const types = [...new Set(failed.map((e) => e.errorType!))];
    expect(r.data.failures.map((f) => f.errorType).sort()).toEqual(types.sort());
    for (const g of r.data.failures) {
      const mine = failed.filter((e) => e.errorType === g.errorType);
      expect(g.events).toBe(mine.length);
      expect(g.items).toBe(new Set(mine.map((e) => e.itemId)).size);
      expect(g.failedNow).toBe(states.filter((s) => s.status === 'failed' && s.failures.at(-1)!.errorType === g.errorType).length);
      const latest = mine.sort((a, b) => Date.parse(a.eventTs) - Date.parse(b.eventTs) || (a.eventId < b.eventId ? -1 : 1)).at(-1)!;
      expect(g.latest.traceback).toBe(latest.traceback);
      expect(g.steps).toEqual(['generate']);
    }
  });

  it('trajectories are the light columns of the real ones: blob sizes, no values', () => {
    for (const s of states) {
      const want = traj.get(s.itemId)!.map((e) => ({
        seq: e.itemSeq,
        type: e.eventType,
        field: e.fieldName ?? null,
        size: e.valueKind === 'blob' ? BLOB.length : null,
        errorType: e.errorType ?? null,
      }));
      expect(r.data.trajectories[s.itemId]!.map((e) => ({ seq: e.seq, type: e.type, field: e.field, size: e.size, errorType: e.errorType }))).toEqual(want);
    }
    expect(JSON.stringify(r.data.trajectories)).not.toContain('title "'); // no field values
  });

  it('writes one self-contained page', () => {
    const html = readFileSync(path.join(dir, 'out', 'report.html'), 'utf8');
    expect(html).toBe(r.html);
    expect(r.out).toBe(path.join(dir, 'out', 'report.html'));
    expect(html).toContain('Chart.js v4.6.1');
    expect(html).not.toMatch(/<(script|link|img)[^>]+(src|href)=/i); // nothing fetched
    const json = /<script type="application\/json" id="dgcl-data">([^]*?)<\/script>/.exec(html)![1]!;
    expect(JSON.parse(json)).toEqual(r.data);
    expect(r.data.stats.shards.length).toBeGreaterThanOrEqual(1);
    expect(r.data.generatedAtMs).toBe(1_800_000_000_000);
  });

  it('lists failed and in-progress items first when they do not all fit', async () => {
    const small = await report(log, { maxItems: 4 });
    const rank = (s: string) => (s === 'failed' ? 0 : s === 'in_progress' ? 1 : 2);
    const want = [...states]
      .sort((a, b) => rank(a.status) - rank(b.status) || (a.itemId < b.itemId ? -1 : 1))
      .slice(0, 4)
      .map((s) => s.itemId)
      .sort();
    expect(small.data.items.map((i) => i.id)).toEqual(want);
    expect(small.data.itemsOmitted).toBe(states.length - 4);
    expect(Object.keys(small.data.trajectories).sort()).toEqual(want);
  });

  it('rejects bad options with a typed error and writes nothing', async () => {
    const out = path.join(dir, 'bad.html');
    for (const [o, field] of [
      [{ maxItems: -1, out }, 'maxItems'],
      [{ out: 's3://bucket' }, 'out'],
    ] as const) {
      const e = await report(log, o).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).field).toBe(field);
    }
    expect(existsSync(out)).toBe(false);
  });

  it('refuses a log object openLog did not return (a wrapper around one): INVALID_INPUT naming `log`, nothing written', async () => {
    const out = path.join(dir, 'wrapped.html');
    const wrapper: CheckpointLog = Object.create(log) as CheckpointLog;
    const e = await report(wrapper, { out }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InvalidInputError);
    expect((e as InvalidInputError).field).toBe('log');
    expect(existsSync(out)).toBe(false);
  });
});
