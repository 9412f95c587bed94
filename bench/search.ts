/**
 * `search` over a log of N events against a scan of the same text in the same run: the log's
 * rows written as JSON Lines, read back line by line and matched with a regex (what a person
 * would otherwise run on an export). The log is bulk-loaded into the base (the append path would
 * take long at this size) and maintained, which builds its full-text indexes. Items of 10 events:
 * a creation, a prompt and an answer (strings), a JSON value with strings and numbers, a step;
 * every tenth item fails a step first (error dump and traceback) and then recovers. One item in
 * 1,000 holds a rare word, in one of the four searched kinds of text in turn.
 *
 * Run by bench/run.ts (`npm run bench`) at its largest size, or alone:
 *   npm run bench:search [-- --events 1000000]
 */
import { createReadStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseBatch, toRows } from '../lib/batch.ts';
import { openLog } from '../lib/index.ts';
import { LanceTables } from '../lib/log/tables.ts';
import { isTextIndexName } from '../lib/log/text-index.ts';
import { rowsToArrow } from '../lib/schema.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import type { EventRow } from '../lib/types.ts';
import { JsonLines } from './baselines/jsonl.ts';
import { now, pct } from './common.ts';
import { type BenchRow, bytes, int, msText, ratio, sizeText } from './table.ts';

const RARE = 'zanzibar';
/** In one item's prompt in eight: a search that stops at its limit. */
const COMMON = 'network';
const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'ru', 'ta', 'vo', 'zi', 'pe', 'su', 'da', 'gu', 'hi', 'jo', 'be', 'fo', 'ly', 'wa', 'xe', 'qu'];
/** Words of 2-3 syllables: a vocabulary of 8,400, so the index holds many terms. */
const VOCAB = SYLLABLES.flatMap((a) => SYLLABLES.flatMap((b) => [a + b, ...SYLLABLES.slice(0, 20).map((c) => a + b + c)]));
/** Items per bulk add. */
const CHUNK_ITEMS = 10_000;
const TRIALS = 7;

function words(seed: number, n: number): string {
  const out: string[] = [];
  let x = Math.imul(seed, 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out.push(VOCAB[x % VOCAB.length]!);
  }
  return out.join(' ');
}

/** Item k's rows: 10 events (20 for a failing item); `k % 1000 === 0` holds the rare word. */
function itemRows(k: number, t0: number): EventRow[] {
  const itemId = `item-${String(k).padStart(8, '0')}`;
  const rare = k % 1000 === 0 ? (k / 1000) % 4 : -1;
  const common = k % 8 === 0 ? ` ${COMMON}` : '';
  const prompt = `${words(k, 12)}${rare === 0 ? ` ${RARE}` : ''}${common}`;
  const meta = { topic: words(k + 1, 2), notes: [words(k + 2, 8), `${words(k + 3, 5)}${rare === 1 ? ` ${RARE}` : ''}`], n: k, score: (k % 100) / 100 };
  const batches: Record<string, unknown>[] = [
    { itemId, runId: 'bench', create: {}, step: { name: 'gen', index: 0 }, set: { prompt, meta, tokens: k % 997 } },
  ];
  if (k % 10 === 3 || rare >= 2) {
    batches.push({
      itemId,
      runId: 'bench',
      step: { name: 'call', index: 1 },
      failed: {
        errorType: 'TimeoutError',
        errorDump: `request timed out after 30 s: ${words(k + 4, 6)}${rare === 2 ? ` ${RARE}` : ''}`,
        traceback: `Traceback (most recent call last):\n  File "pipeline.py", line ${k % 500}, in call\n    ${words(k + 5, 4)}${rare === 3 ? ` ${RARE}` : ''}\nTimeoutError`,
      },
    });
  }
  batches.push({ itemId, runId: 'bench', step: { name: 'call', index: 1 }, attempt: 2, set: { answer: words(k + 6, 20), lang: 'en', ok: true }, terminal: 'completed' });
  const rows: EventRow[] = [];
  for (const b of batches) rows.push(...toRows(parseBatch(b), { firstSeq: rows.length + 1, writerEpoch: 's00-e000001', eventTsUs: (t0 + k) * 1000, rootItemId: itemId }));
  return rows;
}

async function scanJsonl(file: string, re: RegExp, stopAt: number): Promise<number> {
  let n = 0;
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  for await (const line of lines) {
    if (re.test(line) && ++n >= stopAt) {
      lines.close();
      break;
    }
  }
  return n;
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t = now();
  const value = await fn();
  return { ms: now() - t, value };
}

export interface SearchFigures {
  rows: BenchRow[];
  raw: Record<string, number>;
}

/** Build a log of about `events` events under `dir`, time searches against the JSONL scan; removes what it made. */
export async function searchBench(dir: string, events: number, log: (s: string) => void = () => undefined): Promise<SearchFigures> {
  const root = path.join(dir, 'search');
  const jlFile = path.join(dir, 'search.jsonl');
  const lg = await openLog({ root, pipeline: 'b', experiment: 'search' });
  try {
    const tables = new LanceTables(lg.uri, undefined, new LocalObjectStore(lg.uri));
    const base = await tables.ensureBase();
    const jl = new JsonLines(jlFile);
    const t0 = 1_760_000_000_000;
    let n = 0;
    let rareEvents = 0;
    for (let k = 0; n < events; k += CHUNK_ITEMS) {
      let rows: EventRow[] = [];
      for (let i = k; i < k + CHUNK_ITEMS && n + rows.length < events; i++) rows.push(...itemRows(i, t0));
      rows = rows.slice(0, events - n); // exactly `events` (the last item may be cut short)
      rareEvents += rows.filter((r) => [r.value_str, r.value_json, r.error_dump, r.traceback].some((t) => t?.includes(RARE))).length;
      await base.add(rowsToArrow(rows) as never);
      jl.appendNoSync(rows);
      n += rows.length;
    }
    jl.close();
    log(`search: ${n} events loaded`);
    /** The items after the last one loaded: a later pass's new rows. */
    const nextItem = Math.ceil(events / 10) + 1;
    const built = await timed(() => lg.maintain());
    if (built.value.failures.length > 0) throw new Error(`bench: maintenance failed: ${JSON.stringify(built.value.failures)}`);
    const indexes = (await base.listIndices()).filter((i) => isTextIndexName(i.name));
    const indexBytes = indexes.reduce((s, i) => s + Number((i as { sizeBytes?: number }).sizeBytes ?? 0), 0);
    tables.close();
    log(`search: maintained in ${(built.ms / 1000).toFixed(1)} s (${indexes.length} full-text indexes)`);

    const rareRe = new RegExp(`\\b${RARE}\\b`, 'i');
    const commonRe = new RegExp(`\\b${COMMON}\\b`, 'i');
    const first = await timed(() => lg.search(RARE, { limit: 10_000 }));
    const rareMs: number[] = [];
    const commonMs: number[] = [];
    const scanRareMs: number[] = [];
    const scanCommonMs: number[] = [];
    for (let i = 0; i < TRIALS; i++) {
      const r = await timed(() => lg.search(RARE, { limit: 10_000 }));
      if (r.value.length !== rareEvents) throw new Error(`bench: search found ${r.value.length} events of "${RARE}", expected ${rareEvents}`);
      rareMs.push(r.ms);
      const c = await timed(() => lg.search(COMMON));
      if (c.value.length !== 100) throw new Error(`bench: search found ${c.value.length} events of "${COMMON}", expected its limit 100`);
      commonMs.push(c.ms);
    }
    // The scan: fewer trials (each reads the whole file); the page cache is warm after the first.
    await scanJsonl(jlFile, rareRe, Infinity);
    for (let i = 0; i < 3; i++) {
      const r = await timed(() => scanJsonl(jlFile, rareRe, Infinity));
      if (r.value !== rareEvents) throw new Error(`bench: the scan found ${r.value} lines of "${RARE}", expected ${rareEvents}`);
      scanRareMs.push(r.ms);
      scanCommonMs.push((await timed(() => scanJsonl(jlFile, commonRe, 100))).ms);
    }
    // A later maintenance pass: 1% more events merged into the base, folded into the indexes.
    const more: EventRow[] = [];
    for (let i = nextItem; more.length < n / 100; i++) more.push(...itemRows(i, t0));
    const moreRare = more.filter((r) => [r.value_str, r.value_json, r.error_dump, r.traceback].some((t) => t?.includes(RARE))).length;
    const tables2 = new LanceTables(lg.uri, undefined, new LocalObjectStore(lg.uri));
    await (await tables2.ensureBase()).add(rowsToArrow(more) as never);
    tables2.close();
    const again = await timed(() => lg.maintain());
    if (again.value.failures.length > 0) throw new Error(`bench: maintenance failed: ${JSON.stringify(again.value.failures)}`);
    const after = await lg.search(RARE, { limit: 10_000 });
    if (after.length !== rareEvents + moreRare) throw new Error(`bench: after the second pass search found ${after.length} events of "${RARE}", expected ${rareEvents + moreRare}`);
    log(`search: second pass over ${more.length} new events in ${(again.ms / 1000).toFixed(1)} s`);
    const S = sizeText(n);
    const raw = {
      [`search_${n}_rare_p50_ms`]: pct(rareMs, 50),
      [`search_${n}_rare_first_ms`]: first.ms,
      [`search_${n}_rare_jsonl_scan_ms`]: pct(scanRareMs, 50),
      [`search_${n}_common_limit100_p50_ms`]: pct(commonMs, 50),
      [`search_${n}_common_jsonl_first100_ms`]: pct(scanCommonMs, 50),
      [`search_${n}_maintain_ms`]: built.ms,
      [`search_${n}_text_index_bytes`]: indexBytes,
      [`search_${n}_maintain_again_ms`]: again.ms,
    };
    const rows: BenchRow[] = [
      {
        figure: `search a rare word over ${S} events with text (${rareEvents} matching events, all returned; maintained base), p50 of ${TRIALS}`,
        ours: `${msText(pct(rareMs, 50))} (first in the process ${msText(first.ms)})`,
        baseline: `the same rows as JSON Lines, read line by line with a regex: ${msText(pct(scanRareMs, 50))}`,
        ratio: ratio(pct(rareMs, 50), pct(scanRareMs, 50)),
      },
      {
        figure: `search a common word (one prompt in eight) over ${S} events, first 100 matches, p50 of ${TRIALS}`,
        ours: msText(pct(commonMs, 50)),
        baseline: `JSON Lines + regex until 100 matching lines: ${msText(pct(scanCommonMs, 50))}`,
        ratio: ratio(pct(commonMs, 50), pct(scanCommonMs, 50)),
      },
      {
        figure: `maintenance of ${S} bulk-loaded events with text (compaction, scalar and full-text indexes); the four full-text indexes' size; a later pass after ${int(more.length)} more events`,
        ours: `${(built.ms / 1000).toFixed(1)} s; ${bytes(indexBytes)} (${int(indexBytes / n)} B per event); ${(again.ms / 1000).toFixed(1)} s`,
        baseline: '',
        ratio: '',
      },
    ];
    return { rows, raw };
  } finally {
    await lg.close();
    rmSync(root, { recursive: true, force: true });
    rmSync(jlFile, { force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const args = process.argv.slice(2);
  const i = args.indexOf('--events');
  const events = i >= 0 ? Number(args[i + 1]) : 1_000_000;
  const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-bench-search-'));
  const t = now();
  try {
    const { rows, raw } = await searchBench(dir, events, (s) => process.stderr.write(`[${((now() - t) / 1000).toFixed(1)}s] ${s}\n`));
    for (const r of rows) process.stdout.write(`| ${r.figure} | ${r.ours} | ${r.baseline} | ${r.ratio} |\n`);
    process.stdout.write(`${JSON.stringify(raw)}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
