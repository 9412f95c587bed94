/**
 * Memory of `dgcl export` and `dgcl report` on a large log: a synthetic log of
 * --events events (default 10^6; 10 events per item: create, 7 fields, a step, a terminal) is
 * bulk-loaded into the base (the append path would take long at this size) and maintained, then
 * each operation runs in a fresh child process that prints its peak RSS.
 *
 *   npm run bench:export [-- --events 1000000]
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseBatch, toRows } from '../lib/batch.ts';
import { exportItems } from '../lib/export/export.ts';
import { openLog } from '../lib/index.ts';
import { LanceTables } from '../lib/log/tables.ts';
import { report } from '../lib/report/report.ts';
import { rowsToArrow } from '../lib/schema.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import type { EventRow } from '../lib/types.ts';
import { peakRssBytes } from './common.ts';

const PER_ITEM = 10;
const args = process.argv.slice(2);

function item(k: number, t0: number): EventRow[] {
  const itemId = `item-${String(k).padStart(8, '0')}`;
  const terminal = k % 10 === 0 ? 'filtered' : 'completed';
  const b = parseBatch({
    itemId,
    runId: 'bench',
    create: {},
    step: { name: 'gen', index: 0 },
    set: { prompt: `write about topic ${k}`, answer: `answer ${k} `.repeat(8), tokens: k % 997, score: (k % 100) / 100, ok: k % 3 === 0, meta: { k, tags: ['a', 'b'] }, lang: 'en' },
    terminal,
  });
  return toRows(b, { firstSeq: 1, writerEpoch: 's00-e000001', eventTsUs: (t0 + k) * 1000 });
}

async function build(root: string, events: number): Promise<void> {
  const lg = await openLog({ root, pipeline: 'b', experiment: 'export' });
  const tables = new LanceTables(lg.uri, undefined, new LocalObjectStore(lg.uri));
  const base = await tables.ensureBase();
  const items = Math.ceil(events / PER_ITEM);
  const t0 = 1_760_000_000_000;
  for (let s = 0; s < items; s += 10_000) {
    const rows: EventRow[] = [];
    for (let k = s; k < Math.min(items, s + 10_000); k++) rows.push(...item(k, t0));
    await base.add(rowsToArrow(rows) as never);
  }
  await lg.maintain();
  tables.close();
  await lg.close();
}

async function child(mode: string, root: string, out: string): Promise<void> {
  const lg = await openLog({ root, pipeline: 'b', experiment: 'export' });
  const t = performance.now();
  let detail: Record<string, unknown>;
  if (mode === 'report') {
    const r = await report(lg, { out });
    detail = { items: r.data.itemCount, events: r.data.events, bytes: statSync(out).size };
  } else {
    const r = await exportItems(lg, { out, status: 'any', format: mode as 'jsonl' | 'parquet' });
    detail = { rows: r.rows, ranges: r.ranges, bytes: statSync(out).size };
  }
  const seconds = (performance.now() - t) / 1000;
  await lg.close();
  process.stdout.write(`${JSON.stringify({ mode, seconds, maxRssBytes: peakRssBytes(), ...detail })}\n`);
}

if (args[0] === 'child') {
  await child(args[1]!, args[2]!, args[3]!);
} else {
  const i = args.indexOf('--events');
  const events = i >= 0 ? Number(args[i + 1]) : 1_000_000;
  const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-bench-export-'));
  try {
    const t = performance.now();
    await build(path.join(dir, 'root'), events);
    process.stderr.write(`built ${events} events in ${((performance.now() - t) / 1000).toFixed(1)} s\n`);
    for (const mode of ['jsonl', 'parquet', 'report']) {
      const out = path.join(dir, mode === 'report' ? 'report.html' : `export.${mode}`);
      const r = spawnSync(process.execPath, [...process.execArgv, new URL(import.meta.url).pathname, 'child', mode, path.join(dir, 'root'), out], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`${mode} child failed: ${r.stderr}`);
      const res = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { seconds: number; maxRssBytes: number };
      process.stdout.write(`${mode.padEnd(8)} ${events} events: ${res.seconds.toFixed(1)} s, peak RSS ${(res.maxRssBytes / 2 ** 20).toFixed(0)} MiB  ${JSON.stringify(res)}\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
