/**
 * `fork` against `export` of the same items, in one run: a synthetic log of --items items
 * (default 10^4) of 20 events each (create, a `gen` step of 8 fields, a `judge` step of 8 fields,
 * both completed), bulk-loaded into the base; then every item forked from `judge` (a new
 * experiment: half of each item's events, lineage, the fork's records) and exported (JSON Lines,
 * every status). Prints both times and their ratio.
 *
 *   npx tsx bench/fork.ts [--items 10000]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseBatch, toRows } from '../lib/batch.ts';
import { exportItems } from '../lib/export/export.ts';
import { openLog, parseWhere } from '../lib/index.ts';
import { LanceTables } from '../lib/log/tables.ts';
import { rowsToArrow } from '../lib/schema.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import type { EventRow } from '../lib/types.ts';

const args = process.argv.slice(2);
const at = args.indexOf('--items');
const N = at >= 0 ? Number(args[at + 1]) : 10_000;

function fields(k: number, step: string): Record<string, unknown> {
  return { [`${step}_prompt`]: `write about topic ${k}`, [`${step}_answer`]: `answer ${k} `.repeat(8), [`${step}_tokens`]: k % 997, [`${step}_score`]: (k % 100) / 100, [`${step}_ok`]: k % 3 === 0, [`${step}_meta`]: { k }, [`${step}_lang`]: 'en', [`${step}_n`]: k };
}

function item(k: number, t0: number): EventRow[] {
  const itemId = `item-${String(k).padStart(8, '0')}`;
  const gen = toRows(parseBatch({ itemId, runId: 'bench', create: {}, step: { name: 'gen', index: 0 }, set: fields(k, 'gen') }), { firstSeq: 1, writerEpoch: 's00-e000001', eventTsUs: (t0 + k) * 1000 });
  const judge = toRows(parseBatch({ itemId, runId: 'bench', step: { name: 'judge', index: 1 }, set: fields(k, 'judge') }), { firstSeq: gen.length + 1, rootItemId: itemId, writerEpoch: 's00-e000001', eventTsUs: (t0 + k + 1) * 1000 });
  return [...gen, ...judge];
}

const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-bench-fork-'));
try {
  const root = path.join(dir, 'root');
  const log = await openLog({ root, pipeline: 'b', experiment: 'src', mergeIdleMs: 0 });
  const tables = new LanceTables(log.uri, undefined, new LocalObjectStore(log.uri));
  const base = await tables.ensureBase();
  let events = 0;
  for (let s = 0; s < N; s += 5_000) {
    const rows: EventRow[] = [];
    for (let k = s; k < Math.min(N, s + 5_000); k++) rows.push(...item(k, 1_760_000_000_000));
    events += rows.length;
    await base.add(rowsToArrow(rows) as never);
  }
  tables.close();
  const where = parseWhere('status = in_progress');
  // Warm-up read (the same for both): the listing projection is not built here.
  await log.items({ limit: 1 });
  let t = performance.now();
  const ex = await exportItems(log, { out: path.join(dir, 'out.jsonl'), status: 'any', where });
  const exportMs = performance.now() - t;
  t = performance.now();
  const f = await log.fork({ where, fromStep: 'judge', to: { experiment: 'fork' } });
  const forkMs = performance.now() - t;
  await log.close();
  console.log(JSON.stringify({ items: N, events, eventsPerItem: events / N, exportRows: ex.rows, forkItems: f.items, forkEvents: f.events, exportMs: Math.round(exportMs), forkMs: Math.round(forkMs), ratio: +(forkMs / exportMs).toFixed(2) }));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
