/**
 * The compared report (`report(log, {compare})`) in Chromium: the source e (six items, two failed
 * at judge, a numeric field `score`) and a fork f of three of them, moved on after the fork and
 * through a step `polish` e never ran, failing at judge with a second error type on the way.
 * What a user sees: the title and the note naming both experiments, the Compare table with one
 * row per status and per step holding both sides' figures ("-" for a step one side never ran),
 * the score distribution rows, the failures by error type of both sides, only the forked cohort
 * in the items table, and no script error. Without a field the table has no distribution rows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLog, report, type CheckpointLog } from '../lib/index.ts';
import type { ReportData } from '../lib/report/model.ts';
import { launchChromium, openReport } from './support/chromium.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-report-compare-browser-'));
const root = path.join(dir, 'root');
const open = (experiment: string) => openLog({ root, pipeline: 'p', experiment, leaseTtlMs: 3_600_000, mergeIdleMs: 0 });
const judge = { name: 'judge', index: 1 };

let browser: Browser;
let source: CheckpointLog;
let fork: CheckpointLog;
let withField: { page: Page; errors: string[] };
let withoutField: { page: Page; errors: string[] };
let forkPage: { page: Page; errors: string[] };
let noFailures: { page: Page; errors: string[] };
let clean: CheckpointLog;

beforeAll(async () => {
  source = await open('e');
  // a0..a5: gen sets score 10, 20, ..., 60; a0 and a1 fail at judge; a2 and a3 complete; a4, a5 pass judge.
  for (let i = 0; i < 6; i++) {
    const itemId = `a${i}`;
    await source.append([{ itemId, runId: 'r1', create: {}, step: { name: 'gen', index: 0 }, set: { score: 10 * (i + 1) } }]);
    if (i < 2) await source.append([{ itemId, runId: 'r1', step: judge, failed: { errorType: 'Timeout' } }]);
    else await source.append([{ itemId, runId: 'r1', step: judge, set: { verdict: 'ok' }, ...(i < 4 ? { terminal: 'completed' as const } : {}) }]);
  }
  await source.fork({ itemIds: ['a0', 'a1', 'a2'], fromStep: 'judge', to: { experiment: 'f' } });
  // The fork moves on: a0 fails judge once with ParseError, then passes it (score 100) and
  // completes; a1 fails judge twice more with Timeout; a2 passes judge (score 5) and then polish,
  // a step e never ran.
  fork = await open('f');
  await fork.append([{ itemId: 'a0', runId: 'r2', step: judge, failed: { errorType: 'ParseError' } }]);
  await fork.append([{ itemId: 'a0', runId: 'r2', step: judge, attempt: 2, set: { score: 100 }, terminal: 'completed' }]);
  await fork.append([{ itemId: 'a1', runId: 'r2', step: judge, failed: { errorType: 'Timeout' } }]);
  await fork.append([{ itemId: 'a1', runId: 'r2', step: judge, attempt: 2, failed: { errorType: 'Timeout' } }]);
  await fork.append([{ itemId: 'a2', runId: 'r2', step: judge, set: { score: 5 } }]);
  await fork.append([{ itemId: 'a2', runId: 'r2', step: { name: 'polish', index: 2 }, set: { text: 'done' } }]);

  const out = path.join(dir, 'compare-score.html');
  await report(source, { out, compare: { log: fork, field: 'score' } });
  const outPlain = path.join(dir, 'compare.html');
  await report(source, { out: outPlain, compare: { log: fork } });
  const outFork = path.join(dir, 'fork.html');
  await report(fork, { out: outFork });
  // g: a fork of a2 alone, which never failed on either side.
  await source.fork({ itemIds: ['a2'], fromStep: 'judge', to: { experiment: 'g' } });
  clean = await open('g');
  const outClean = path.join(dir, 'compare-clean.html');
  await report(source, { out: outClean, compare: { log: clean } });
  browser = await launchChromium();
  withField = await openReport(browser, out);
  withoutField = await openReport(browser, outPlain);
  forkPage = await openReport(browser, outFork);
  noFailures = await openReport(browser, outClean);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await source?.close();
  await fork?.close();
  await clean?.close();
  rmSync(dir, { recursive: true, force: true });
});

const cells = (page: Page, selector: string) =>
  page.locator(selector).evaluateAll((rs) => rs.map((r) => [...r.querySelectorAll('th, td')].map((c) => c.textContent)));

/** Rows every compared page shows: items, the four statuses, and each step of either side. */
const COHORT_ROWS = [
  ['items', '3', '3'],
  ['completed', '1', '1'],
  ['filtered', '0', '0'],
  ['failed', '2', '1'],
  ['in progress', '0', '1'],
  // passed (rate of the cohort's 3 items) / FAILED events
  ['step gen: passed (rate) / failures', '3 (100%) / 0', '3 (100%) / 0'],
  ['step judge: passed (rate) / failures', '1 (33.3%) / 2', '2 (66.7%) / 3'],
  ['step polish: passed (rate) / failures', '-', '1 (33.3%) / 0'],
];

describe('the compared report in Chromium', () => {
  it('loads without console errors, script errors or network requests', async () => {
    expect(withField.errors).toEqual([]);
    expect(withoutField.errors).toEqual([]);
    const data = (await withField.page.evaluate(() => (window as unknown as { dgclReport?: { data: unknown } }).dgclReport?.data)) as ReportData | undefined;
    expect(data?.compare?.fork.experiment).toBe('f');
  });

  it('the header names both experiments and the fork it was compared with', async () => {
    const { page } = withField;
    expect(await page.locator('h1').textContent()).toBe('dgcl report: p / e (compared with fork f)');
    const note = await page.locator('#compare-note').textContent();
    expect(note).toMatch(/^Only the items fork f was made from: e \(this report\) compared with f \(.+\/datagen_checkpoints\/p\/f\/log\.lance\)$/);
    expect(await page.locator('#compare h2').textContent()).toBe('Compare: e vs f');
  });

  it('the Compare table has a row per status and per step with both sides\' figures, then the score distribution', async () => {
    const { page } = withField;
    expect(await cells(page, '#compare-table thead tr')).toEqual([['', 'e', 'f']]);
    expect(await cells(page, '#compare-table tbody tr')).toEqual([
      ...COHORT_ROWS,
      // e's final scores of a0..a2: 10, 20, 30; f's: 100, 20, 5.
      ['score count', '3', '3'],
      ['score missing', '0', '0'],
      ['score min', '10', '5'],
      ['score p50', '20', '20'],
      ['score p90', '30', '100'],
      ['score max', '30', '100'],
      ['score mean', '20', '41.6667'],
    ]);
  });

  it('the Compare section shows both sides\' failures by error type: FAILED events, items, items failed now', async () => {
    for (const { page } of [withField, withoutField]) {
      expect(await cells(page, '#compare-failures thead tr')).toEqual([
        ['', 'e', 'f'],
        ['error type', 'FAILED events', 'items', 'failed now', 'FAILED events', 'items', 'failed now'],
      ]);
      // e: a0 and a1 failed judge once each with Timeout and are failed now. f: a1 kept no failure
      // from e (forked before judge) and failed twice more with Timeout; a0 failed once with
      // ParseError, then completed (not failed now). Rows by FAILED events of both sides.
      expect(await cells(page, '#compare-failures tbody tr')).toEqual([
        ['Timeout', '2', '2', '2', '2', '1', '1'],
        ['ParseError', '0', '0', '0', '1', '1', '0'],
      ]);
      const types = await page.locator('#compare-failures tbody tr').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-error-type')));
      expect(types).toEqual(['Timeout', 'ParseError']);
    }
  });

  it('a cohort that never failed on either side says so instead of an empty failures table', async () => {
    const { page, errors } = noFailures;
    expect(await page.locator('#compare-failures').count()).toBe(0);
    expect(await page.textContent('#compare-failures-none')).toBe('No FAILED events on either side.');
    expect(errors).toEqual([]);
  });

  it('the rest of the page counts only the forked cohort on the source side', async () => {
    const { page } = withField;
    const ids = await page.locator('#items-table tbody tr').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-item')));
    expect(ids).toEqual(['a0', 'a1', 'a2']);
    const statusCards = await page.locator('#status-cards .card').evaluateAll((cs) => cs.map((c) => [c.getAttribute('data-status'), c.querySelector('.n')!.textContent]));
    expect(statusCards).toEqual([[null, '3'], ['completed', '1'], ['filtered', '0'], ['failed', '2'], ['in_progress', '0']]);
  });

  it('without a field the table has the status and step rows and no distribution rows', async () => {
    const { page } = withoutField;
    expect(await cells(page, '#compare-table tbody tr')).toEqual(COHORT_ROWS);
  });

  it("the fork's own report says, in an item's drill-down, where the item was forked from", async () => {
    const { page, errors } = forkPage;
    await page.click('#items-table tbody tr[data-item="a1"]');
    // a1 kept its gen batch (seqs 1..lastKeptSeq), not its failed judge attempt.
    const kept = (await fork.fold('a1')).forkedFrom!.lastKeptSeq;
    expect(kept).toBe((await source.trajectory('a1')).filter((e) => e.stepName === 'gen').at(-1)!.itemSeq);
    expect(await page.textContent('#drill-forked')).toBe(`Forked from p / e, item a1, events through seq ${kept}`);
    expect(errors).toEqual([]);
  });
});
