/**
 * Benchmark of the embedded default (local folder) against baselines measured in the same run:
 * a bare LanceDB `add()` of the same rows (same schema), SQLite (`node:sqlite`, WAL +
 * synchronous=FULL, one transaction per batch) and JSON lines with an fsync per batch; `search` at
 * the largest size against a regex scan of the same rows as JSON lines (bench/search.ts). Prints ONE
 * table and writes it to bench/results/latest.{md,json} (the long run: long.{md,json}). Asserts
 * nothing.
 *
 *   npm run bench               # sizes 10^4..10^6
 *   npm run bench -- --quick    # sizes 10^4, 10^5, small counts (indicative)
 *   npm run bench -- --long     # sizes 10^4..10^7
 *
 * How long each takes: docs/design/performance.md, "Running the benchmarks".
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openLog } from '../lib/index.ts';
import { SUMMARY_SCAN_COLUMNS, SummaryVisitor } from '../lib/log/read/summary.ts';
import { LanceTables } from '../lib/log/tables.ts';
import { rowsToArrow, rowsFromArrow } from '../lib/schema.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { JsonLines } from './baselines/jsonl.ts';
import { RawLance } from './baselines/lance.ts';
import { DatasetSync } from '../lib/storage/dataset-sync.ts';
import { SqliteLog } from './baselines/sqlite.ts';
import { searchBench } from './search.ts';
import { PER_ITEM, allocatedBytes, bulkRows, fileCount, itemName, newItemBatch, now, ownedItemBatch, pct, pool, rowsOf } from './common.ts';
import { aggregateRate, spawnWorkers } from './procs.ts';
import { type BenchMeta, type BenchRow, bytes, formatTable, int, msText, ratio, sizeText } from './table.ts';
import { readsOf } from '../lib/log/reads.ts';

const args = process.argv.slice(2);
const mode: BenchMeta['mode'] = args.includes('--long') ? 'long' : args.includes('--quick') ? 'quick' : 'normal';
const P = {
  quick: { sizes: [1e4, 1e5], ackN: 30, batches: 256, procBatches: 64, shardCommits: 4, foldProbes: 15 },
  normal: { sizes: [1e4, 1e5, 1e6], ackN: 200, batches: 4000, procBatches: 1000, shardCommits: 63, foldProbes: 30 },
  long: { sizes: [1e4, 1e5, 1e6, 1e7], ackN: 200, batches: 4000, procBatches: 1000, shardCommits: 63, foldProbes: 30 },
}[mode];
const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-bench-'));
/** Rows by figure kind, printed in this order (sizes ascending within a kind). */
const ORDER = ['ack', 'writer', 'procs', 'items', 'fold', 'unmerged', 'search', 'disk', 'build'] as const;
const groups = new Map<(typeof ORDER)[number], BenchRow[]>(ORDER.map((k) => [k, []]));
const rows = { push: (kind: (typeof ORDER)[number], r: BenchRow) => groups.get(kind)!.push(r) };
const raw: Record<string, number> = {};
const log = (s: string) => process.stderr.write(`[bench ${((now() - T0) / 1000).toFixed(1)}s] ${s}\n`);
const T0 = now();

async function ack(): Promise<void> {
  const n = P.ackN;
  const lg = await openLog({ root: path.join(dir, 'ack'), pipeline: 'b', experiment: 'ack' });
  await lg.append([newItemBatch('warm')]);
  const fresh: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = now();
    await lg.append([newItemBatch(`i${i}`)]);
    fresh.push(now() - t);
  }
  // Owned items: ones this writer created above, so their state is cached and the item is its.
  const owned: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = now();
    await lg.append([ownedItemBatch(`i${i % 10}`, 1 + Math.floor(i / 10))]);
    owned.push(now() - t);
  }
  await lg.close();
  const lance = await RawLance.open(path.join(dir, 'raw-ack'));
  // The same durability as ours on a local root: the commit's files fsynced before the ack.
  const lanceSynced = await RawLance.open(path.join(dir, 'raw-ack-sync'));
  const lanceSync = new DatasetSync(path.join(dir, 'raw-ack-sync', 'events.lance'));
  const lanceSyncedNew: number[] = [];
  const sq = new SqliteLog(path.join(dir, 'ack.sqlite'));
  const jl = new JsonLines(path.join(dir, 'ack.jsonl'));
  const lanceNew: number[] = [];
  const lanceOwned: number[] = [];
  const sqNew: number[] = [];
  const jlNew: number[] = [];
  await lance.add(rowsOf(newItemBatch('warm'), 'warm'));
  for (let i = 0; i < n; i++) {
    const r = rowsOf(newItemBatch(`i${i}`), i);
    let t = now();
    await lance.add(r);
    lanceNew.push(now() - t);
    const o = rowsOf(ownedItemBatch(`i${i % 10}`, 1 + Math.floor(i / 10)), `o${i}`);
    t = now();
    await lance.add(o);
    lanceOwned.push(now() - t);
    t = now();
    await lanceSynced.add(r);
    await lanceSync.sync();
    lanceSyncedNew.push(now() - t);
    t = now();
    sq.addBatch(r);
    sqNew.push(now() - t);
    t = now();
    jl.append(r);
    jlNew.push(now() - t);
  }
  lance.close();
  lanceSynced.close();
  sq.close();
  jl.close();
  const others = (p: number) => `SQLite txn ${msText(pct(sqNew, p))}; JSONL+fsync ${msText(pct(jlNew, p))}`;
  for (const p of [50, 99]) {
    raw[`ack_new_p${p}_ms`] = pct(fresh, p);
    raw[`ack_new_p${p}_lance_ms`] = pct(lanceNew, p);
    raw[`ack_new_p${p}_lance_fsync_ms`] = pct(lanceSyncedNew, p);
    rows.push('ack', {
      figure: `ack, 10-event batch, new item, p${p} (n=${n})`,
      ours: msText(pct(fresh, p)),
      baseline: `raw Lance add + fsync ${msText(pct(lanceSyncedNew, p))}; without fsync ${msText(pct(lanceNew, p))}; ${others(p)}`,
      ratio: ratio(pct(fresh, p), pct(lanceSyncedNew, p)),
    });
  }
  for (const p of [50, 99]) {
    raw[`ack_owned_p${p}_ms`] = pct(owned, p);
    raw[`ack_owned_p${p}_lance_ms`] = pct(lanceOwned, p);
    rows.push('ack', {
      figure: `ack, owned item, p${p} (n=${n})`,
      ours: msText(pct(owned, p)),
      baseline: `raw Lance add + fsync ${msText(pct(lanceSyncedNew, p))}; without fsync ${msText(pct(lanceOwned, p))}`,
      ratio: ratio(pct(owned, p), pct(lanceSyncedNew, p)),
    });
  }
  log('ack done');
}

/** Trials of each one-writer figure; the table gives their median and range. */
const WRITER_TRIALS = 3;

async function oneWriter(): Promise<void> {
  const batches = P.batches;
  // Each trial in a fresh process (bench/child.ts), ours and SQLite's alike: run inside this
  // process after the ack phase, one writer's rate varied severalfold between runs of the same
  // code, far more than the same appends alone (docs/design/performance.md, "Running the
  // benchmarks").
  const trials = async (argsOf: (trial: number) => string[]): Promise<number[]> => {
    const out: number[] = [];
    for (let i = 0; i < WRITER_TRIALS; i++) {
      const w = spawnWorkers([argsOf(i)]);
      await w.ready;
      out.push(aggregateRate(await w.go()));
    }
    return out.sort((a, b) => a - b);
  };
  const mid = (xs: number[]) => xs[Math.floor(xs.length / 2)]!;
  const spread = (xs: number[]) => `${int(xs[0]!)}-${int(xs[xs.length - 1]!)}`;
  const r64s = await trials((i) => ['writer', path.join(dir, `tp64-${i}`), '0', String(batches), '64']);
  // Disk of a log written through append() (claims, markers, shard merges included), closed.
  const appendedDisk = allocatedBytes(path.join(dir, 'tp64-0'));
  const appendedFiles = fileCount(path.join(dir, 'tp64-0'));
  const r256s = await trials((i) => ['writer', path.join(dir, `tp256-${i}`), '0', String(batches), '256']);
  // SQLite and JSONL are synchronous: "in flight" cannot overlap in one thread, so this is
  // one transaction (one fsync) per batch back to back, the seed's baseline.
  const sqs = await trials((i) => {
    const file = path.join(dir, `tp-${i}.sqlite`);
    new SqliteLog(file).close();
    return ['sqlite-writer', file, String(batches), '0'];
  });
  const sq = new SqliteLog(path.join(dir, 'tp-0.sqlite'));
  sq.checkpoint();
  sq.close();
  const sqDisk = allocatedBytes(path.join(dir, 'tp-0.sqlite'));
  const [r64, r256, sqRate] = [mid(r64s), mid(r256s), mid(sqs)];
  const jl = new JsonLines(path.join(dir, 'tp.jsonl'));
  const t = now();
  for (let i = 0; i < batches; i++) jl.append(rowsOf(newItemBatch(`i${i}`), i));
  const jlRate = (batches * 10) / ((now() - t) / 1000);
  jl.close();
  Object.assign(raw, { one_writer_64_eps: r64, one_writer_256_eps: r256, sqlite_eps: sqRate, jsonl_eps: jlRate });
  rows.push('writer', {
    figure: `one writer, 64 / 256 batches in flight (${batches} batches; median of ${WRITER_TRIALS} processes each)`,
    ours: `${int(r64)} / ${int(r256)} events/s (${spread(r64s)} / ${spread(r256s)})`,
    baseline: `SQLite ${int(sqRate)} (${spread(sqs)}); JSONL+fsync ${int(jlRate)}`,
    ratio: `${ratio(r64, sqRate)} / ${ratio(r256, sqRate)}`,
  });
  const events = (batches + 1) * 10;
  Object.assign(raw, { appended_disk_bytes: appendedDisk, appended_files: appendedFiles, appended_sqlite_bytes: sqDisk });
  rows.push('disk', {
    figure: `disk per event, ${int(events)} events appended by one writer (64 in flight; allocated)`,
    ours: `${int(appendedDisk / events)} B (${int(appendedFiles)} files)`,
    baseline: `SQLite ${int(sqDisk / (batches * 10))} B`,
    ratio: ratio(appendedDisk / events, sqDisk / (batches * 10)),
  });
  log('one writer done');
}

async function fourProcesses(): Promise<void> {
  const n = P.procBatches;
  const root = path.join(dir, 'mp');
  const file = path.join(dir, 'mp.sqlite');
  new SqliteLog(file).close(); // create the schema once, before the processes race to
  const oursW = spawnWorkers([0, 1, 2, 3].map((s) => ['writer', root, String(s), String(n), '64']));
  const sqW = spawnWorkers([0, 1, 2, 3].map((s) => ['sqlite-writer', file, String(n), String(s)]));
  await Promise.all([oursW.ready, sqW.ready]);
  const ours = await oursW.go();
  const sq = await sqW.go();
  const a = aggregateRate(ours);
  const b = aggregateRate(sq);
  Object.assign(raw, { four_procs_eps: a, four_sqlite_procs_eps: b });
  rows.push('procs', {
    figure: `4 writer processes x 64 in flight (${n} batches each)`,
    ours: `${int(a)} events/s (${ratio(a, raw.one_writer_64_eps)} of one writer)`,
    baseline: `4 SQLite processes ${int(b)}`,
    ratio: ratio(a, b),
  });
  log('4 processes done');
}

interface SizeFigures {
  n: number;
  foldP50: number;
  queryP50: number;
}

/** Fold p50s with 16 live writers' shards unmerged, and the merged figures they are compared with. */
interface Unmerged {
  /** A fresh reader before the writers: each probe's first fold in the process, then again. */
  mergedFirst: number;
  mergedAgain: number;
  /** A fresh reader with the writers live, the same probes the same way. */
  first: number;
  again: number;
  /** Folds of items the live writers wrote (their rows are in the unmerged shards), in that reader. */
  liveItem: number;
  /** The same items folded by the writer that wrote them (its own generation: from its memory). */
  ownItem: number;
}

async function foldP50(lg: Awaited<ReturnType<typeof openLog>>, ids: readonly string[]): Promise<number> {
  const lat: number[] = [];
  for (const id of ids) {
    const t = now();
    await lg.fold(id);
    lat.push(now() - t);
  }
  return pct(lat, 50);
}

async function atSize(n: number, first: SizeFigures | undefined, last: boolean): Promise<SizeFigures> {
  const root = path.join(dir, `size${n}`);
  const lg = await openLog({ root, pipeline: 'b', experiment: 'size' });
  // Bulk-load the base directly (the append path would take hours at 10^7), then maintenance
  // compacts and indexes it as it would a real log.
  const tables = new LanceTables(lg.uri, undefined, new LocalObjectStore(lg.uri));
  const base = await tables.ensureBase();
  const sqFile = path.join(dir, `size${n}.sqlite`);
  const sq = new SqliteLog(sqFile);
  const jlFile = path.join(dir, `size${n}.jsonl`);
  const jl = new JsonLines(jlFile);
  let buildOurs = 0;
  let buildSq = 0;
  const chunk = 100_000;
  for (let s = 0; s < n; s += chunk) {
    const rs = bulkRows(s, Math.min(n, s + chunk));
    let t = now();
    await base.add(rowsToArrow(rs) as never);
    buildOurs += now() - t;
    t = now();
    sq.addBatch(rs); // one transaction per chunk: the bulk-load equivalent
    buildSq += now() - t;
    jl.appendNoSync(rs);
  }
  let t = now();
  await lg.maintain();
  buildOurs += now() - t;
  t = now();
  sq.checkpoint();
  buildSq += now() - t;
  sq.close();
  jl.close();
  log(`size ${n} built`);

  const items = n / PER_ITEM;
  const probe = Array.from({ length: P.foldProbes }, (_, i) => itemName(Math.floor((i * 7919) % items)));
  await lg.fold(probe[0]!);
  const fold: number[] = [];
  for (const id of probe) {
    const t1 = now();
    const st = await lg.fold(id);
    fold.push(now() - t1);
    if (st.lastSeq !== PER_ITEM) throw new Error(`bench: fold of ${id} saw lastSeq ${st.lastSeq}, expected ${PER_ITEM}`);
  }
  const query: number[] = [];
  for (const id of probe) {
    const t1 = now();
    rowsFromArrow(await base.query().where(`item_id = '${id}'`).toArrow());
    query.push(now() - t1);
  }
  const sqDb = new SqliteLog(sqFile);
  const sqFold: number[] = [];
  for (const id of probe) {
    const t1 = now();
    sqDb.item(id);
    sqFold.push(now() - t1);
  }
  sqDb.close();
  await lg.close();
  tables.close();

  // Disk after maintenance, before any shard exists: the merged log.
  const disk = allocatedBytes(root);
  const files = fileCount(root);
  const sqDisk = allocatedBytes(sqFile);
  const jlDisk = allocatedBytes(jlFile);

  // items() and its SQLite equivalent, each in a fresh process (clean peak RSS).
  const itW = spawnWorkers([['items', root, String(n)]]);
  const ipW = spawnWorkers([['items-pages', root, String(n)]]);
  const siW = spawnWorkers([['sqlite-items', sqFile]]);
  await Promise.all([itW.ready, ipW.ready, siW.ready]);
  const [it] = await itW.go();
  const [ip] = await ipW.go();
  const [si] = await siW.go();
  const itRate = n / ((it!.endMs - it!.startMs) / 1000);
  const ipRate = n / ((ip!.endMs - ip!.startMs) / 1000);
  const siRate = si!.events / ((si!.endMs - si!.startMs) / 1000);
  if (it!.items !== items || ip!.items !== items || si!.items !== items) {
    throw new Error(`bench: items() saw ${it!.items} (pages: ${ip!.items}) / SQLite ${si!.items}, expected ${items}`);
  }
  log(`size ${n} read`);

  // 16 live writers with unmerged shards, then a fold from a reader (largest size only: the
  // writers' appends take a while). Like for like: the merged figure it is compared with comes
  // from a fresh reader too, opened before the writers, timed the same way (each probe's first
  // fold in the process, then again). The merged fold above ran in the process that built the
  // log, whose caches the maintenance pass had warmed: at 10^7 a fresh reader's first folds
  // (index pages read for the first time) cost more than 16 live shards do.
  let unmerged: Unmerged | undefined;
  let withTail: { events: number; ms: number; againMs: number; scanMs: number } | undefined;
  if (last) {
    const fresh = await openLog({ root, pipeline: 'b', experiment: 'size' });
    await fresh.fold(probe[0]!);
    const mergedFirst = await foldP50(fresh, probe);
    const mergedAgain = await foldP50(fresh, probe);
    await fresh.close();
    const writers = await Promise.all(
      Array.from({ length: 16 }, (_, s) => openLog({ root, pipeline: 'b', experiment: 'size', slot: s, mergeEveryCommits: 1_000_000, mergeIdleMs: 0 })),
    );
    await Promise.all(
      writers.map(async (w, s) => {
        for (let c = 0; c < P.shardCommits; c++) await w.append([newItemBatch(`live-${s}-${c}`)]);
      }),
    );
    const reader = await openLog({ root, pipeline: 'b', experiment: 'size' });
    await reader.fold(probe[0]!);
    const first = await foldP50(reader, probe);
    const again = await foldP50(reader, probe);
    const liveItem = await foldP50(reader, probe.map((_, k) => `live-${k % 16}-${(k * 7) % P.shardCommits}`));
    // Each writer's reader has learned only its own generation: a first fold there learns the
    // other 15 (as the fresh reader's untimed first fold did). Then the same items, timed.
    await Promise.all(writers.map((w) => w.fold(probe[0]!)));
    const ownLat: number[] = [];
    for (const k of probe.keys()) {
      const t = now();
      await writers[k % 16]!.fold(`live-${k % 16}-${(k * 7) % P.shardCommits}`);
      ownLat.push(now() - t);
    }
    unmerged = { mergedFirst, mergedAgain, first, again, liveItem, ownItem: pct(ownLat, 50) };
    // items() with the 16 shards' tail: the projection maintenance built plus the tail, against
    // the same listing by a scan (same process, after the folds warmed both).
    const tailEvents = 16 * P.shardCommits * 10;
    const t2 = now();
    const listed = (await reader.items()).items.length;
    const itemsWithTailMs = now() - t2;
    // Again: the reader's tail cache holds the shards' rows (none committed since).
    const t4 = now();
    await reader.items();
    const itemsAgainMs = now() - t4;
    const t3 = now();
    const scanned = (await readsOf(reader).scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor())).length;
    const scanWithTailMs = now() - t3;
    if (listed !== items + 16 * P.shardCommits || scanned !== listed) throw new Error(`bench: items() with the tail saw ${listed}, the scan ${scanned}, expected ${items + 16 * P.shardCommits}`);
    withTail = { events: n + tailEvents, ms: itemsWithTailMs, againMs: itemsAgainMs, scanMs: scanWithTailMs };
    await reader.close();
    await Promise.all(writers.map((w) => w.close()));
    log(`size ${n} unmerged fold done`);
  }
  rmSync(root, { recursive: true, force: true });
  rmSync(sqFile, { force: true });
  rmSync(jlFile, { force: true });

  const S = sizeText(n);
  const f: SizeFigures = { n, foldP50: pct(fold, 50), queryP50: pct(query, 50) };
  Object.assign(raw, {
    [`build_${n}_ms`]: buildOurs,
    [`build_${n}_sqlite_ms`]: buildSq,
    [`items_${n}_eps`]: itRate,
    [`items_${n}_rss`]: it!.maxRssBytes,
    [`items_pages_${n}_eps`]: ipRate,
    [`items_pages_${n}_rss`]: ip!.maxRssBytes,
    [`items_${n}_sqlite_eps`]: siRate,
    [`items_${n}_sqlite_rss`]: si!.maxRssBytes,
    [`fold_${n}_p50_ms`]: f.foldP50,
    [`fold_${n}_p99_ms`]: pct(fold, 99),
    [`fold_${n}_lance_query_p50_ms`]: f.queryP50,
    [`fold_${n}_sqlite_p50_ms`]: pct(sqFold, 50),
    [`disk_${n}_bytes`]: disk,
    [`disk_${n}_files`]: files,
    [`disk_${n}_sqlite_bytes`]: sqDisk,
    [`disk_${n}_jsonl_bytes`]: jlDisk,
    ...(unmerged
      ? {
          [`fold_${n}_fresh_reader_first_p50_ms`]: unmerged.mergedFirst,
          [`fold_${n}_fresh_reader_again_p50_ms`]: unmerged.mergedAgain,
          [`fold_${n}_unmerged16_p50_ms`]: unmerged.first,
          [`fold_${n}_unmerged16_again_p50_ms`]: unmerged.again,
          [`fold_${n}_unmerged16_live_item_p50_ms`]: unmerged.liveItem,
          [`fold_${n}_unmerged16_own_item_p50_ms`]: unmerged.ownItem,
        }
      : {}),
    ...(withTail ? { [`items_${n}_unmerged16_ms`]: withTail.ms, [`items_${n}_unmerged16_again_ms`]: withTail.againMs, [`items_${n}_unmerged16_scan_ms`]: withTail.scanMs } : {}),
  });
  if (withTail) {
    rows.push('items', {
      figure: `\`items()\` over ${S} events + 16 writers' unmerged shards (${int(withTail.events - n)} events), in the reader that folded: first call / again (tail cached)`,
      ours: `${msText(withTail.ms)} / ${msText(withTail.againMs)} (${int(withTail.events / (withTail.againMs / 1000))} events/s)`,
      baseline: `the same listing by a scan of the log ${msText(withTail.scanMs)} (a one-off pass: its tail read again)`,
      ratio: `${ratio(withTail.ms, withTail.scanMs)} / ${ratio(withTail.againMs, withTail.scanMs)}`,
    });
  }
  rows.push('build', {
    figure: `build ${S} events (bulk add + maintenance)`,
    ours: `${(buildOurs / 1000).toFixed(1)} s`,
    baseline: `SQLite one transaction per 10^5 rows ${(buildSq / 1000).toFixed(1)} s`,
    ratio: ratio(buildOurs, buildSq),
  });
  rows.push('items', {
    figure: `\`items()\` over ${S} events (fresh process; one call / pages of 10,000)`,
    ours: `${int(itRate)} events/s, ${bytes(it!.maxRssBytes)} peak RSS / ${int(ipRate)} events/s, ${bytes(ip!.maxRssBytes)}`,
    baseline: `SQLite + the same JS fold ${int(siRate)} events/s, ${bytes(si!.maxRssBytes)}`,
    ratio: `${ratio(itRate, siRate)}, ${ratio(it!.maxRssBytes, si!.maxRssBytes, 1)} memory`,
  });
  rows.push('fold', {
    figure: `fold one item, merged, ${S} events, p50`,
    ours: `${msText(f.foldP50)} (p99 ${msText(pct(fold, 99))})`,
    baseline: `bare Lance query ${msText(f.queryP50)}; SQLite ${msText(pct(sqFold, 50))}${first ? `; growth vs ${sizeText(first.n)} ${ratio(f.foldP50, first.foldP50)}` : ''}`,
    ratio: ratio(f.foldP50, f.queryP50),
  });
  if (unmerged) {
    const u = unmerged;
    rows.push('unmerged', {
      figure: `fold one item, ${S} events, 16 writers' shards unmerged (${P.shardCommits} commits each), p50 in a fresh reader: an item of the base, first fold / again; an item a live writer wrote; that item in the writer's own process`,
      ours: `${msText(u.first)} / ${msText(u.again)}; ${msText(u.liveItem)}; ${msText(u.ownItem)}`,
      baseline: `merged, a fresh reader the same way ${msText(u.mergedFirst)} / ${msText(u.mergedAgain)}`,
      ratio: `${ratio(u.first, u.mergedFirst)} / ${ratio(u.again, u.mergedAgain)}; ${ratio(u.liveItem, u.mergedAgain)}; ${ratio(u.ownItem, u.mergedAgain)}`,
    });
  }
  rows.push('disk', {
    figure: `disk per event, ${S} merged (allocated)`,
    ours: `${int(disk / n)} B (${int(files)} files)`,
    baseline: `SQLite ${int(sqDisk / n)} B; JSONL ${int(jlDisk / n)} B`,
    ratio: ratio(disk, sqDisk),
  });
  return f;
}

const meta: BenchMeta = {
  mode,
  date: new Date().toISOString(),
  node: process.version,
  load: execFileSync('uptime', { encoding: 'utf8' }),
  sizes: P.sizes,
};
try {
  log(`${mode} run in ${dir}; ${meta.load.trim()}`);
  await ack();
  await oneWriter();
  await fourProcesses();
  let first: SizeFigures | undefined;
  for (const [i, n] of P.sizes.entries()) {
    const f = await atSize(n, first, i === P.sizes.length - 1);
    first ??= f;
  }
  const found = await searchBench(dir, P.sizes[P.sizes.length - 1]!, log);
  for (const r of found.rows) rows.push('search', r);
  Object.assign(raw, found.raw);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const table = ORDER.flatMap((k) => groups.get(k)!);
const md = formatTable(table, meta);
process.stdout.write(md);
const out = fileURLToPath(new URL('./results/', import.meta.url));
mkdirSync(out, { recursive: true });
// The long run keeps its own file: it is run rarely, and the latest normal run stays beside it.
const stem = mode === 'long' ? 'long' : 'latest';
writeFileSync(path.join(out, `${stem}.md`), md);
writeFileSync(path.join(out, `${stem}.json`), JSON.stringify({ meta, rows: table, raw }, null, 2) + '\n');
log(`wrote ${path.join(out, `${stem}.md`)} and ${stem}.json`);
