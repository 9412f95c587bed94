/**
 * The demo's report page in a real browser: Debian's headless Chromium (/usr/bin/chromium;
 * scripts/test.sh installs it) driven by playwright-core. No console errors, every chart has data
 * marks, the search and the status filter narrow the items table, a drill-down shows the item's
 * real trajectory and where it resumes; a report with `where` says which filter and lists only
 * the selected items. The test writes docs/report-demo.png.
 */
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLog, parseWhere } from '../lib/index.ts';
import { report } from '../lib/report/report.ts';
import type { ReportData } from '../lib/report/model.ts';
import type { ItemState, TrajectoryEvent } from '../lib/types.ts';
import { dgcl } from './support/proc.ts';

const CHROMIUM = process.env.DGCL_CHROMIUM ?? '/usr/bin/chromium';
const SCREENSHOT = path.resolve(import.meta.dirname, '..', 'docs', 'report-demo.png');

let browser: Browser;
let page: Page;
const errors: string[] = [];
let states: ItemState[];
const trajectories = new Map<string, TrajectoryEvent[]>();
let data: ReportData;
let demo: { root: string; experiment: string };

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: scripts/test.sh installs Debian's chromium (apt-get install chromium)`);
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-report-demo-'));
  const r = await dgcl(['demo', '--root', root, '--json']);
  expect(r.code, r.stderr).toBe(0);
  const summary = JSON.parse(r.stdout.split('\n').at(-1)!) as { report: string; experiment: string };
  expect(summary.report).toBe(path.join(root, `${summary.experiment}-report.html`));
  demo = { root, experiment: summary.experiment };
  const log = await openLog({ root, pipeline: 'demo', experiment: summary.experiment });
  states = await log.allStates();
  for (const id of ['doc-000', 'doc-001']) trajectories.set(id, await log.trajectory(id));
  await log.close();

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    // The machine has no network but the package registries: no background connections.
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage({ viewport: { width: 1300, height: 900 } });
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  // Any request at all would be a page that is not self-contained.
  page.on('request', (req) => {
    if (!req.url().startsWith('file:')) errors.push(`request to ${req.url()}`);
  });
  await page.goto(pathToFileURL(summary.report).href);
  await page.waitForFunction(() => (window as unknown as { dgclReport?: unknown }).dgclReport !== undefined);
  data = (await page.evaluate(() => (window as unknown as { dgclReport: { data: unknown } }).dgclReport.data)) as ReportData;
}, 240_000);

afterAll(async () => {
  await browser?.close();
});

const visibleRows = () => page.locator('#items-table tbody tr:visible');

describe('the demo report in Chromium', () => {
  it('loads without console errors or network requests', () => {
    expect(errors).toEqual([]);
    expect(data.itemCount).toBe(states.length);
  });

  it('every chart has data marks', async () => {
    const charts = await page.evaluate(() => {
      const Chart = (window as unknown as { Chart: { getChart(c: HTMLCanvasElement): { data: { datasets: { data: unknown[] }[] }; getDatasetMeta(i: number): { data: { x: number; y: number }[]; hidden: boolean | null } } } }).Chart;
      return [...document.querySelectorAll<HTMLCanvasElement>('canvas[data-chart]')].map((c) => {
        const ch = Chart.getChart(c)!;
        const marks = ch.data.datasets.map((d, i) => ({
          points: d.data.length,
          nulls: d.data.filter((v) => v === null).length,
          drawn: ch.getDatasetMeta(i).data.filter((el, j) => d.data[j] !== null && Number.isFinite(el.x) && Number.isFinite(el.y)).length,
          nonZero: d.data.filter((v) => v !== null && (typeof v === 'number' ? v : (v as { y: number }).y) > 0).length,
        }));
        return { id: c.id, width: c.width, marks };
      });
    });
    expect(charts.map((c) => c.id)).toEqual(['chart-progress', 'chart-status', 'chart-steps', 'chart-durations', 'chart-failures']);
    // The data behind the charts is the log's: status counts equal the folded states'.
    const folded = { completed: 0, filtered: 0, failed: 0, in_progress: 0 };
    for (const s of states) folded[s.status]++;
    expect(data.status).toEqual(folded);
    // Each chart's datasets: as many points as the report data has, and exactly its non-zero ones.
    const marksOf = (...series: number[][]) => series.map((v) => ({ points: v.length, nonZero: v.filter((x) => x > 0).length }));
    const p = data.progress;
    const st = data.steps;
    const expected: Record<string, Array<{ points: number; nonZero: number }>> = {
      'chart-progress': marksOf(p.created, p.completed, p.filtered, p.failures),
      'chart-status': marksOf((['completed', 'filtered', 'failed', 'in_progress'] as const).map((k) => data.status[k])),
      'chart-steps': marksOf(st.map((s) => s.itemsPassed), st.map((s) => s.failures), st.map((s) => s.retriedCompletions)),
      'chart-durations': marksOf(st.map((s) => s.durationMs.p50 ?? 0), st.map((s) => s.durationMs.p95 ?? 0)),
      'chart-failures': marksOf(data.failures.map((f) => f.events), data.failures.map((f) => f.failedNow)),
    };
    // A step duration is measured or absent, never 0 by construction.
    for (const s of st) expect(s.durationMs.p50 === null || s.durationMs.p50 > 0, s.name).toBe(true);
    for (const c of charts) {
      expect(c.width, c.id).toBeGreaterThan(100);
      // Every data point has a drawn element (a step without measured durations has no point: null).
      for (const m of c.marks) expect(m.drawn, c.id).toBe(m.points - m.nulls);
      expect(c.marks.map((m) => ({ points: m.points, nonZero: m.nonZero })), c.id).toEqual(expected[c.id]);
    }
  });

  it('the search and the status filter narrow the table', async () => {
    expect(await visibleRows().count()).toBe(states.length);
    await page.fill('#item-search', 'doc-001');
    const want = states.filter((s) => s.itemId.includes('doc-001')).map((s) => s.itemId);
    expect(want.length).toBe(3); // doc-001 and its two children
    expect(await visibleRows().evaluateAll((rs) => rs.map((r) => r.getAttribute('data-item')))).toEqual(want);
    await page.fill('#item-search', '');
    await page.selectOption('#status-filter', 'filtered');
    const filtered = states.filter((s) => s.status === 'filtered').map((s) => s.itemId);
    expect(filtered.length).toBeGreaterThan(0);
    expect(await visibleRows().evaluateAll((rs) => rs.map((r) => r.getAttribute('data-item')))).toEqual(filtered);
    await page.selectOption('#status-filter', '');
    expect(await visibleRows().count()).toBe(states.length);
  });

  it("a drill-down shows the item's trajectory and where it resumes", async () => {
    for (const id of ['doc-001', 'doc-000']) {
      await page.click(`#items-table tbody tr[data-item="${id}"]`);
      const shown = await page.locator('#trajectory-table tbody tr').evaluateAll((rs) => rs.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)));
      const want = trajectories.get(id)!;
      expect(shown.map((cells) => [Number(cells[0]), cells[1]])).toEqual(want.map((e) => [e.itemSeq, e.eventType]));
      const blobRow = shown.find((cells) => cells[4]?.startsWith('image'));
      const blobEvent = want.find((e) => e.fieldName === 'image')!;
      expect(blobRow?.[4]).toBe(`image (blob, ${(blobEvent.value as { $blobRef: { size: number } }).$blobRef.size.toLocaleString('en-US')} bytes)`);
      const status = states.find((s) => s.itemId === id)!.status;
      expect(await page.textContent('#drill-resume')).toContain(`not resumed (${status})`);
    }
  });

  it('writes the screenshot', async () => {
    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.setViewportSize({ width: 1300, height: 900 });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(existsSync(SCREENSHOT)).toBe(true);
  });

  it('a report with where names its filter in the header and lists only the selected items', async () => {
    const out = path.join(demo.root, 'failed-report.html');
    const log = await openLog({ root: demo.root, pipeline: 'demo', experiment: demo.experiment });
    try {
      await report(log, { out, where: parseWhere('status != completed') });
    } finally {
      await log.close();
    }
    const selected = states.filter((s) => s.status !== 'completed').map((s) => s.itemId);
    expect(selected.length, 'the demo has items that are not completed').toBeGreaterThanOrEqual(1);
    expect(selected.length).toBeLessThan(states.length);
    const other = await browser.newPage({ viewport: { width: 1300, height: 900 } });
    const otherErrors: string[] = [];
    other.on('pageerror', (e) => otherErrors.push(String(e)));
    other.on('console', (m) => {
      if (m.type() === 'error') otherErrors.push(m.text());
    });
    await other.goto(pathToFileURL(out).href);
    await other.waitForSelector('#where');
    expect(await other.locator('#where').textContent()).toBe('Only items where status != "completed" (every figure below counts only them)');
    const ids = await other.locator('#items-table tbody tr:visible td:first-child').allTextContents();
    expect(ids.map((t) => t.split(/\s/)[0]).sort()).toEqual(selected.sort());
    expect(otherErrors).toEqual([]);
    await other.close();
  });

  it('a report of a snapshot names it in the header with its time and base version', async () => {
    const out = path.join(demo.root, 'snapshot-report.html');
    const log = await openLog({ root: demo.root, pipeline: 'demo', experiment: demo.experiment });
    let s;
    try {
      s = await log.snapshot('browser-test');
      await report(log, { out, snapshot: 'browser-test' });
    } finally {
      await log.close();
    }
    const other = await browser.newPage({ viewport: { width: 1300, height: 900 } });
    const otherErrors: string[] = [];
    other.on('pageerror', (e) => otherErrors.push(String(e)));
    await other.goto(pathToFileURL(out).href);
    await other.waitForSelector('#snapshot');
    expect(await other.locator('#snapshot').textContent()).toMatch(
      new RegExp(`^Snapshot browser-test, taken .+ \\(base version ${s.baseVersion} \\+ ${s.tailRows} unmerged rows\\): the log as it was then$`),
    );
    expect(await other.locator('h1').textContent()).toMatch(/\(snapshot browser-test\)$/);
    expect(await other.locator('#status-cards .card .n').first().textContent()).toBe(String(states.length));
    expect(otherErrors).toEqual([]);
    await other.close();
  });
});
