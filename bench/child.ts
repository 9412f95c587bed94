/**
 * One bench worker process. The parent (bench/run.ts) starts it, waits for its "ready" line,
 * releases every worker at once with "go" on stdin (a barrier, so the timed parts overlap), and
 * reads one JSON result line. Separate processes also give the items() figures a clean peak RSS.
 *
 *   child.ts writer <root> <slot> <batches> <inFlight>
 *   child.ts sqlite-writer <file> <batches> <tag>
 *   child.ts items|items-pages <root> <events>
 *   child.ts sqlite-items <file>
 */
import { createInterface } from 'node:readline';
import type { EventRow } from '../lib/types.ts';
import { newItemBatch, peakRssBytes, pool, rowsOf } from './common.ts';

// Each mode loads only what it uses: a SQLite worker must not pay LanceDB's start-up.
const openLog = async (...a: Parameters<typeof import('../lib/index.ts').openLog>) => (await import('../lib/index.ts')).openLog(...a);
const sqlite = async (file: string) => new (await import('./baselines/sqlite.ts')).SqliteLog(file);

export interface ChildResult {
  /** Wall-clock ms (epoch) of the timed part, comparable across processes. */
  startMs: number;
  endMs: number;
  events: number;
  items?: number;
  /** Peak resident set of this process, bytes. */
  maxRssBytes: number;
}

const [mode, a, b, c, d] = process.argv.slice(2);

async function barrier(): Promise<void> {
  process.stdout.write('ready\n');
  const rl = createInterface({ input: process.stdin });
  for await (const line of rl) if (line.trim() === 'go') break;
  rl.close();
}

function done(r: Omit<ChildResult, 'maxRssBytes'>): void {
  const out: ChildResult = { ...r, maxRssBytes: peakRssBytes() };
  process.stdout.write(`result ${JSON.stringify(out)}\n`);
}

if (mode === 'writer') {
  const slot = Number(b);
  const batches = Number(c);
  const inFlight = Number(d);
  const log = await openLog({ root: a!, pipeline: 'b', experiment: 'mp', slot, slots: 16 });
  await log.append([newItemBatch(`warm-${slot}`)]);
  await barrier();
  const startMs = Date.now();
  await pool(batches, inFlight, (i) => log.append([newItemBatch(`w${slot}-${i}`)]));
  const endMs = Date.now();
  await log.close();
  done({ startMs, endMs, events: batches * 10 });
} else if (mode === 'sqlite-writer') {
  const batches = Number(b);
  const db = await sqlite(a!);
  const batch = rowsOf(newItemBatch(`warm-${c}`), `warm-${c}`);
  db.addBatch(batch);
  await barrier();
  const startMs = Date.now();
  for (let i = 0; i < batches; i++) db.addBatch(rowsOf(newItemBatch(`s${c}-${i}`), `${c}-${i}`));
  const endMs = Date.now();
  db.close();
  done({ startMs, endMs, events: batches * 10 });
} else if (mode === 'items' || mode === 'items-pages') {
  // items: one call (one pass); items-pages: pages of 10,000 (one pass over the item_id column
  // after the cursor, then the page's items, per page).
  const log = await openLog({ root: a!, pipeline: 'b', experiment: 'size' });
  await barrier();
  const startMs = Date.now();
  let items = 0;
  let after: string | undefined;
  do {
    const page = await log.items(mode === 'items' ? {} : { limit: 10_000, ...(after ? { after } : {}) });
    items += page.items.length;
    after = page.next;
  } while (after);
  const endMs = Date.now();
  await log.close();
  done({ startMs, endMs, events: Number(b), items });
} else if (mode === 'sqlite-items') {
  // The same JS fold over SQLite's rows, one item at a time (rows come in item order).
  const db = await sqlite(a!);
  await barrier();
  const startMs = Date.now();
  let items = 0;
  let events = 0;
  const { foldItem } = await import('../lib/fold.ts');
  let cur: EventRow[] = [];
  for (const r of db.scan()) {
    events++;
    if (cur.length > 0 && cur[0]!.item_id !== r.item_id) {
      foldItem(cur[0]!.item_id, cur, { fields: false });
      items++;
      cur = [];
    }
    cur.push(r);
  }
  if (cur.length > 0) {
    foldItem(cur[0]!.item_id, cur, { fields: false });
    items++;
  }
  const endMs = Date.now();
  db.close();
  done({ startMs, endMs, events, items });
} else {
  throw new Error(`bench/child.ts: unknown mode ${mode}`);
}
