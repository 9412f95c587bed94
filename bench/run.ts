/**
 * Benchmarks of the embedded default (local folder). Prints figures and ratios against a
 * baseline measured in the same run; asserts nothing.
 *
 *   npm run bench              # all
 *   npm run bench -- fold      # one section: ack | throughput | fold
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { toRows, parseBatch } from '../lib/batch.ts';
import { openLog } from '../lib/index.ts';
import { EVENT_SCHEMA, rowsToArrow, rowsFromArrow } from '../lib/schema.ts';
import { LanceTables } from '../lib/log/tables.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import type { EventRow } from '../lib/types.ts';

const sections = process.argv.slice(2);
const want = (s: string) => sections.length === 0 || sections.includes(s);
const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-bench-'));

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const ms = (x: number) => `${x.toFixed(2)} ms`;
const now = () => performance.now();

/** A 10-event batch: create + 8 fields + completion. */
function tenEventBatch(itemId: string): Record<string, unknown> {
  const set: Record<string, unknown> = {};
  for (let f = 0; f < 8; f++) set[`f${f}`] = f % 2 ? f * 1.5 : `value ${f} of ${itemId}`;
  return { itemId, runId: 'bench', create: {}, step: { name: 'gen', index: 0 }, set };
}

async function ackLatency(): Promise<void> {
  const n = 200;
  const log = await openLog({ root: path.join(dir, 'ack'), pipeline: 'b', experiment: 'ack' });
  await log.append([tenEventBatch('warm')]);
  const lat: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = now();
    await log.append([tenEventBatch(`i${i}`)]);
    lat.push(now() - t);
  }
  await log.close();
  // Baseline: a bare Lance add() of the same 10 rows to a plain table.
  const db = await lancedb.connect(path.join(dir, 'raw'));
  const t0 = await db.createEmptyTable('raw', EVENT_SCHEMA);
  const rows = toRows(parseBatch(tenEventBatch('x')), { firstSeq: 1, writerEpoch: 's00-e000001', eventTsUs: Date.now() * 1000 });
  const raw: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = now();
    await t0.add(rowsToArrow(rows.map((r) => ({ ...r, event_id: `${r.event_id}${i}` }))) as never);
    raw.push(now() - t);
  }
  console.log(`ack latency, 10-event batch, one at a time (n=${n})`);
  console.log(`  dgcl append:        p50 ${ms(pct(lat, 50))}  p99 ${ms(pct(lat, 99))}`);
  console.log(`  bare Lance add():   p50 ${ms(pct(raw, 50))}  p99 ${ms(pct(raw, 99))}`);
  console.log(`  ratio p50:          ${(pct(lat, 50) / pct(raw, 50)).toFixed(2)}x (item marker, claim and epoch check on top of the commit)`);
}

async function throughput(): Promise<void> {
  const batches = 2000;
  const run = async (inFlight: number, name: string) => {
    const log = await openLog({ root: path.join(dir, name), pipeline: 'b', experiment: name, mergeEveryCommits: 64 });
    await log.append([tenEventBatch('warm')]);
    let next = 0;
    const t = now();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < batches) {
          const i = next++;
          await log.append([tenEventBatch(`i${i}`)]);
        }
      }),
    );
    const secs = (now() - t) / 1000;
    await log.close();
    return (batches * 10) / secs;
  };
  const one = await run(1, 'tp1');
  const many = await run(64, 'tp64');
  console.log(`\nthroughput of one writer, ${batches} batches of 10 events (merges into base every 64 commits included)`);
  console.log(`  1 batch in flight:    ${Math.round(one)} events/s`);
  console.log(`  64 batches in flight: ${Math.round(many)} events/s (group commit: ${(many / one).toFixed(1)}x)`);
}

async function foldLatency(): Promise<void> {
  console.log('\nfold latency of one item (50 events per item), base compacted and indexed by maintenance');
  for (const total of [10_000, 100_000, 1_000_000]) {
    const name = `fold${total}`;
    const root = path.join(dir, name);
    const log = await openLog({ root, pipeline: 'b', experiment: name });
    // Bulk-load the base directly (the append path would take minutes at 10^6).
    const uri = log.uri;
    const tables = new LanceTables(uri, undefined, new LocalObjectStore(uri));
    const base = await tables.ensureBase();
    const perItem = 50;
    const items = total / perItem;
    const chunk = 100_000;
    for (let start = 0; start < total; start += chunk) {
      const rows: EventRow[] = [];
      for (let k = start; k < Math.min(total, start + chunk); k += perItem) {
        const itemId = `item-${String(k / perItem).padStart(7, '0')}`;
        const b = parseBatch({ itemId, runId: 'bench', create: {}, step: { name: 's', index: 0 }, append: { m: Array.from({ length: perItem - 2 }, (_, j) => j) } });
        rows.push(...toRows(b, { firstSeq: 1, writerEpoch: 's00-e000001', eventTsUs: Date.now() * 1000 }));
      }
      await base.add(rowsToArrow(rows) as never);
    }
    await log.maintain();
    const probe = Array.from({ length: 30 }, (_, i) => `item-${String(Math.floor((i * 7919) % items)).padStart(7, '0')}`);
    await log.fold(probe[0]!);
    const lat: number[] = [];
    for (const id of probe) {
      const t = now();
      const s = await log.fold(id);
      lat.push(now() - t);
      if (s.lastSeq !== perItem) throw new Error(`bad fold of ${id}`);
    }
    // Baseline: the bare filtered Lance query the fold is built on.
    const raw: number[] = [];
    for (const id of probe) {
      const t = now();
      rowsFromArrow(await base.query().where(`item_id = '${id}'`).toArrow());
      raw.push(now() - t);
    }
    await log.close();
    console.log(
      `  ${String(total).padStart(9)} events: fold p50 ${ms(pct(lat, 50))} p99 ${ms(pct(lat, 99))} | bare Lance query p50 ${ms(pct(raw, 50))} | ratio ${(pct(lat, 50) / pct(raw, 50)).toFixed(2)}x`,
    );
    rmSync(root, { recursive: true, force: true });
  }
}

try {
  console.log(`datagen-checkpoint-log bench, embedded default (${dir}), node ${process.version}`);
  if (want('ack')) await ackLatency();
  if (want('throughput')) await throughput();
  if (want('fold')) await foldLatency();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
