/**
 * A shard generation whose writer is gone (killed: its local holder process is dead; or its
 * lease expired) is labelled `abandoned` by stats(), `dgcl stats` and the report page, which
 * say to run maintenance; a live writer's stays `live`. Real processes and logs, the report
 * page in Debian's Chromium.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { openLog, report } from '../lib/index.ts';
import { createBatch } from './support/batches.ts';
import { dgcl, startTs } from './support/proc.ts';

const CHROMIUM = process.env.DGCL_CHROMIUM ?? '/usr/bin/chromium';
const HINT = /^1 unmerged generation of writers that are gone \(slot 0\): run `dgcl maintain` \(or log\.maintain\(\)\) to merge them$/;

/** A writer process that acked one batch and was then SIGKILLed (its slot 0 lease unexpired). */
async function killedWriter(root: string): Promise<void> {
  const p = startTs('test/support/slot-holder.ts', [], { DGCL_TEST_TASK: JSON.stringify({ root, pipeline: 'p', experiment: 'e', slots: 1, leaseTtlMs: 600_000, itemId: 'held' }) });
  await new Promise<void>((resolve, reject) => {
    p.onLine((l) => l.startsWith('acked ') && resolve());
    void p.exit.then((r) => reject(new Error(`the writer exited before its ack: ${r.stderr}`)));
  });
  p.child.kill('SIGKILL');
  await p.exit;
}

describe('abandoned shard generations', () => {
  it('a killed writer\'s generation is abandoned in stats(), dgcl stats and the report page, which say to run maintenance; maintenance merges it', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-abandoned-'));
    await killedWriter(root);
    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    const stats = await log.stats();
    expect(stats.shards.map((s) => [s.slot, s.state])).toEqual([[0, 'abandoned']]);
    expect(stats.hint).toMatch(HINT);

    const cli = await dgcl(['stats', '--root', root, '--pipeline', 'p', '--experiment', 'e']);
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toMatch(/\n {2}s00-e000001-g\d+ {2}v\d+ {2}\d+ rows {2}abandoned \(its writer is gone; maintenance merges it\)\n/);
    expect(cli.stdout.split('\n').at(-1)).toMatch(/^note {5}1 unmerged generation of writers that are gone \(slot 0\): run `dgcl maintain`/);

    const out = path.join(root, 'page.html');
    await report(log, { out });
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
    try {
      const page = await browser.newPage();
      await page.goto(pathToFileURL(out).href);
      await page.waitForFunction(() => (window as unknown as { dgclReport?: unknown }).dgclReport !== undefined);
      const cells = await page.locator('#shards-table tbody tr td:last-child').allTextContents();
      expect(cells).toEqual(['abandoned (its writer is gone; maintenance merges it)']);
      expect(await page.locator('.shards-hint').textContent()).toMatch(HINT);
    } finally {
      await browser.close();
    }

    const m = await log.maintain();
    expect(m.failures).toEqual([]);
    const after = await log.stats();
    expect(after.shards.filter((s) => !s.retired)).toEqual([]);
    expect(after.hint).toBeNull();
    expect((await log.fold('held')).lastSeq).toBe(3);
    await log.close();
  }, 120_000);

  it('a live writer\'s generation is live; once its lease expired (the writer stopped renewing) it is abandoned', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-expired-'));
    const clock = new ManualClock(Date.now());
    const writer = await openLog({ root, pipeline: 'p', experiment: 'e', clock, leaseTtlMs: 60_000, slots: 1 });
    await writer.append([createBatch('w')]);
    const reader = await openLog({ root, pipeline: 'p', experiment: 'e', clock });
    const live = await reader.stats();
    expect(live.shards.map((s) => s.state)).toEqual(['live']);
    expect(live.hint).toBeNull();
    clock.advance(120_000);
    const expired = await reader.stats();
    expect(expired.shards.map((s) => s.state)).toEqual(['abandoned']);
    expect(expired.hint).toMatch(HINT);
    await reader.close();
    await writer.close();
  });
});
