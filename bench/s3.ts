/**
 * Benchmark of an s3:// root on the local Ceph RGW (leases on DynamoDB Local) against a raw
 * LanceDB `add()` / query on the same RGW, same process, same counting proxy. Prints ONE table
 * and writes it to bench/results/s3-latest.{md,json}. Asserts nothing about time.
 *
 *   npm run bench:s3               # scripts/bench-s3.sh: starts and stops its own servers
 *   npm run bench:s3 -- --quick    # small counts (about 2 minutes)
 *   npm run bench:s3 -- --long     # also a cold and a warm fold over a 10^6-event base
 *   npx tsx bench/s3.ts [--quick]  # against servers already running (env as in scripts/bench-s3.sh)
 *
 * Counting: every S3 request of this process (the log's own S3 client and Lance's object store,
 * both pointed at AWS_ENDPOINT_URL_S3) and of its cold-read children passes the proxy of
 * test/support/s3-proxy.ts, which classes it by S3 operation (GET, HEAD, LIST, PUT, conditional
 * PUT, COPY, POST, DELETE). DynamoDB requests are counted by a middleware on the lease store's
 * client (bench/s3-cost.ts, countDynamo), once per HTTP attempt. The proxy also counts the S3
 * body bytes each way (printed as "S3 bytes ... up, ... down").
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { createLeaseTable, DynamoLeaseStore, openLog, type OpenLogOptions } from '../lib/index.ts';
import { SUMMARY_SCAN_COLUMNS, SummaryVisitor } from '../lib/log/read/summary.ts';
import { LanceTables } from '../lib/log/tables.ts';
import { rowsToArrow } from '../lib/schema.ts';
import { lanceStorageOptions, logLocation, parseRoot, s3ClientConfig, type S3Location } from '../lib/storage/location.ts';
import { S3ObjectStore } from '../lib/storage/s3.ts';
import type { EventRow } from '../lib/types.ts';
import { startS3Proxy } from '../test/support/s3-proxy.ts';
import { RawLance } from './baselines/lance.ts';
import { bulkRows, itemName, newItemBatch, now, ownedItemBatch, PER_ITEM, pct, pool, rowsOf } from './common.ts';
import type { ColdResult } from './s3-child.ts';
import { countDynamo, diff, dollars, perJson, perText, PRICES_TEXT, s3Total, type Requests } from './s3-cost.ts';
import { type BenchRow, formatRows, int, msText, ratio } from './table.ts';
import { readsOf } from '../lib/log/reads.ts';

const quick = process.argv.includes('--quick');
/** Also a cold and a warm fold over a 10^6-event base (building it takes a few minutes). */
const long = process.argv.includes('--long');
const mode = `${quick ? 'quick' : 'normal'}${long ? ' + long (10^6-event folds)' : ''}`;
const P = quick
  ? { ackN: 20, batches: 512, inFlight: 256, baseEvents: 100_000, shardCommits: 5, probes: 8 }
  : { ackN: 100, batches: 2000, inFlight: 256, baseEvents: 100_000, shardCommits: 20, probes: 15 };

const bucket = process.env.DGCL_TEST_BUCKET;
const upstream = process.env.AWS_ENDPOINT_URL_S3;
if (!bucket || !upstream || !process.env.AWS_ENDPOINT_URL_DYNAMODB) {
  throw new Error('run through `npm run bench:s3`, or set the env of scripts/bench-s3.sh (RGW + DynamoDB Local)');
}
const T0 = now();
const log = (s: string) => process.stderr.write(`[bench:s3 ${((now() - T0) / 1000).toFixed(1)}s] ${s}\n`);
const load = execFileSync('uptime', { encoding: 'utf8' }).trim();

const proxy = await startS3Proxy({ target: upstream });
process.env.AWS_ENDPOINT_URL_S3 = proxy.endpoint; // the log and Lance read the process environment
const ddbCounts: Record<string, number> = {};
const ddb = new DynamoDBClient({});
countDynamo(ddb, ddbCounts);
const leaseTable = `dgcl-bench-${randomUUID().slice(0, 8)}`;
await createLeaseTable(ddb, leaseTable);
const leases = new DynamoLeaseStore({ client: ddb, table: leaseTable });
const prefix = `bench-s3-${randomUUID().slice(0, 8)}`;
const root = `s3://${bucket}/${prefix}`;
const storage = lanceStorageOptions(parseRoot(root));

const snap = (): Requests => ({ s3: { ...proxy.counts.byOp }, ddb: { ...ddbCounts }, bytes: { up: proxy.counts.bytesUp, down: proxy.counts.bytesDown } });
/** Requests made while `fn` runs (nothing else of this process may run meanwhile). */
async function counted<T>(fn: () => Promise<T>): Promise<{ value: T; req: Requests; ms: number }> {
  const before = snap();
  const t = now();
  const value = await fn();
  return { value, ms: now() - t, req: diff(snap(), before) };
}
const lanceCommits = () => proxy.counts.byKind['lance-commit'] ?? 0;
const open = (experiment: string, extra: Partial<OpenLogOptions> = {}) => openLog({ root, pipeline: 'b', experiment, leases, ...extra });

const ORDER = ['ack', 'ackReq', 'writer', 'fold', 'items', 'maint'] as const;
const groups = new Map<(typeof ORDER)[number], BenchRow[]>(ORDER.map((k) => [k, []]));
const push = (kind: (typeof ORDER)[number], r: BenchRow) => groups.get(kind)!.push(r);
const raw: Record<string, unknown> = {};

/** Ack latency and requests per ack, sequential batches, against raw Lance adds of the same rows. */
async function ack(): Promise<void> {
  const n = P.ackN;
  // No merge during the windows: they measure the ack path alone (merges are in `writer` and `maint`).
  const lg = await open('ack', { mergeEveryCommits: 1_000_000, mergeIdleMs: 0 });
  await lg.append([newItemBatch('warm')]);
  const latNew: number[] = [];
  const newReq = await counted(async () => {
    for (let i = 0; i < n; i++) {
      const t = now();
      await lg.append([newItemBatch(`i${i}`)]);
      latNew.push(now() - t);
    }
  });
  // Owned: items this writer created above, cached and marked as its own.
  const latOwned: number[] = [];
  const ownedReq = await counted(async () => {
    for (let i = 0; i < n; i++) {
      const t = now();
      await lg.append([ownedItemBatch(`i${i % 10}`, 1 + Math.floor(i / 10))]);
      latOwned.push(now() - t);
    }
  });
  await lg.close();

  const lance = await RawLance.open(`${root}/raw-ack`, 'events', storage);
  await lance.add(rowsOf(newItemBatch('warm'), 'warm'));
  const rawNew: number[] = [];
  const rawOwned: number[] = [];
  const timedAdds = (lat: number[], rowsFor: (i: number) => EventRow[]) =>
    counted(async () => {
      for (let i = 0; i < n; i++) {
        const r = rowsFor(i);
        const t = now();
        await lance.add(r);
        lat.push(now() - t);
      }
    });
  const rawNewReq = await timedAdds(rawNew, (i) => rowsOf(newItemBatch(`i${i}`), i));
  const rawOwnedReq = await timedAdds(rawOwned, (i) => rowsOf(ownedItemBatch(`i${i % 10}`, 1 + Math.floor(i / 10)), `o${i}`));
  lance.close();

  for (const [label, ours, base, req, baseReq] of [
    ['new item', latNew, rawNew, newReq.req, rawNewReq.req],
    ['owned item', latOwned, rawOwned, ownedReq.req, rawOwnedReq.req],
  ] as const) {
    for (const p of [50, 99]) {
      push('ack', {
        figure: `ack, 10-event batch, ${label}, p${p} (n=${n})`,
        ours: msText(pct(ours, p)),
        baseline: `raw Lance add ${msText(pct(base, p))}`,
        ratio: ratio(pct(ours, p), pct(base, p)),
      });
    }
    push('ackReq', {
      figure: `requests per ack, ${label}`,
      ours: perText(req, n),
      baseline: `raw Lance add ${perText(baseReq, n)}`,
      ratio: ratio(s3Total(req), s3Total(baseReq)),
    });
    raw[`ack_${label.replace(' item', '')}`] = {
      p50_ms: pct(ours, 50),
      p99_ms: pct(ours, 99),
      lance_p50_ms: pct(base, 50),
      lance_p99_ms: pct(base, 99),
      per_ack: perJson(req, n),
      lance_per_add: perJson(baseReq, n),
    };
  }
  log('ack done');
}

/** One writer, many batches in flight (group commit), new and owned items, vs raw Lance adds of the same groups. */
async function oneWriter(): Promise<void> {
  const { batches, inFlight } = P;
  for (const kind of ['new', 'owned'] as const) {
    const lg = await open(`tp-${kind}`);
    await lg.append([newItemBatch('warm')]);
    // Owned: one item per loop, created by this writer first (not timed).
    if (kind === 'owned') await pool(inFlight, inFlight, (i) => lg.append([newItemBatch(`o${i}`)]));
    const batchOf = (i: number) => (kind === 'new' ? newItemBatch(`n${i}`) : ownedItemBatch(`o${i % inFlight}`, 1 + Math.floor(i / inFlight)));
    const c0 = lanceCommits();
    const run = await counted(() => pool(batches, inFlight, (i) => lg.append([batchOf(i)])));
    const commits = lanceCommits() - c0;
    const closed = await counted(() => lg.close()); // merges the shard into the base
    const eps = (batches * 10) / (run.ms / 1000);

    // Raw Lance: the same rows in groups of the size our group commit formed, one add each.
    const groupSize = Math.max(1, Math.round(batches / Math.max(1, commits)));
    const lance = await RawLance.open(`${root}/raw-tp-${kind}`, 'events', storage);
    await lance.add(rowsOf(newItemBatch('warm'), 'warm'));
    const rowsOfBatch = (i: number) => rowsOf(batchOf(i), `${kind}${i}`);
    const rawRun = await counted(async () => {
      for (let g = 0; g < batches; g += groupSize) {
        const rs: EventRow[] = [];
        for (let i = g; i < Math.min(batches, g + groupSize); i++) rs.push(...rowsOfBatch(i));
        await lance.add(rs);
      }
    });
    lance.close();
    const rawEps = (batches * 10) / (rawRun.ms / 1000);
    const whole: Requests = { s3: sum(run.req.s3, closed.req.s3), ddb: sum(run.req.ddb, closed.req.ddb) };
    const per1M = (r: Requests) => (dollars(r) / batches) * 1e6;

    push('writer', {
      figure: `one writer, ${inFlight} batches in flight, ${kind} items (${int(batches)} batches; ${commits} Lance commits, ~${groupSize} batches per group)`,
      ours: `${int(eps)} events/s`,
      baseline: `raw Lance add of the same groups ${int(rawEps)} events/s`,
      ratio: ratio(eps, rawEps),
    });
    push('writer', {
      figure: `requests per batch, ${inFlight} in flight, ${kind} items`,
      ours: `${perText(run.req, batches)}; with the merge at close ${perText(whole, batches)}`,
      baseline: `raw Lance ${perText(rawRun.req, batches)}`,
      ratio: ratio(s3Total(run.req), s3Total(rawRun.req)),
    });
    push('writer', {
      figure: `request cost per 10^6 batches, ${inFlight} in flight, ${kind} items`,
      ours: `$${per1M(run.req).toFixed(2)}; with the merge at close $${per1M(whole).toFixed(2)}`,
      baseline: `raw Lance $${per1M(rawRun.req).toFixed(2)}`,
      ratio: ratio(per1M(run.req), per1M(rawRun.req)),
    });
    raw[`writer_${kind}`] = {
      batches,
      in_flight: inFlight,
      lance_commits: commits,
      events_per_s: eps,
      lance_events_per_s: rawEps,
      per_batch: perJson(run.req, batches),
      per_batch_with_close: perJson(whole, batches),
      lance_per_batch: perJson(rawRun.req, batches),
      usd_per_1e6_batches: per1M(run.req),
      usd_per_1e6_batches_with_close: per1M(whole),
      lance_usd_per_1e6_batches: per1M(rawRun.req),
    };
    log(`one writer, ${kind} items done`);
  }
}

function sum<K extends string>(a: Partial<Record<K, number>>, b: Partial<Record<K, number>>): Record<K, number> {
  const out = { ...a } as Record<K, number>;
  for (const [k, v] of Object.entries(b) as [K, number][]) out[k] = (out[k] ?? 0) + v;
  return out;
}

const CHILD = fileURLToPath(new URL('./s3-child.ts', import.meta.url));

/** Runs bench/s3-child.ts in a fresh process; its S3 requests go through the proxy. No lease table: reads take no lease. */
function child(args: string[]): Promise<ColdResult> {
  const env = { ...process.env };
  delete env.DGCL_LEASE_TABLE;
  const p = spawn(process.execPath, ['--no-warnings', '--import', 'tsx', CHILD, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env });
  return new Promise((res, rej) => {
    let got: ColdResult | undefined;
    createInterface({ input: p.stdout }).on('line', (l) => {
      if (l.startsWith('result ')) got = JSON.parse(l.slice(7)) as ColdResult;
    });
    p.on('exit', (code) => (got && code === 0 ? res(got) : rej(new Error(`s3-child ${args.join(' ')} exited ${code}`))));
  });
}

/**
 * An `n`-event base, maintained (compacted, indexed): warm folds, a cold fold in a fresh process
 * against a bare Lance query, and (with `listing`) `items()` through the projection against a scan.
 */
async function coldFold(n: number, listing: boolean): Promise<void> {
  const exp = `cold${n}`;
  const size = int(n);
  const lg = await open(exp);
  // Bulk-load the base directly (appending this many events would take long), then maintenance
  // compacts and indexes it as it would a real log's.
  const loc = logLocation(parseRoot(root), 'b', exp) as S3Location;
  const tables = new LanceTables(lg.uri, storage, S3ObjectStore.at(new S3Client(s3ClientConfig()), loc));
  const base = await tables.ensureBase();
  for (let s = 0; s < n; s += 50_000) await base.add(rowsToArrow(bulkRows(s, Math.min(n, s + 50_000))) as never);
  tables.close();
  const m = await counted(() => lg.maintain());
  push('maint', {
    figure: `maintenance of a ${size}-event base (compact + index, no shards)`,
    ours: `${(m.ms / 1000).toFixed(1)} s, ${perText(m.req)}`,
    baseline: '',
    ratio: '',
  });
  raw[n === P.baseEvents ? 'maintain_base' : `maintain_base_${n}`] = { events: n, ms: m.ms, requests: perJson(m.req), failures: m.value.failures };

  const items = n / PER_ITEM;
  const probes = Array.from({ length: P.probes }, (_, i) => itemName(Math.floor((i * 7919) % items)));
  await lg.fold(probes[0]!);
  const lat: number[] = [];
  const warm = await counted(async () => {
    for (const id of probes) {
      const t = now();
      await lg.fold(id);
      lat.push(now() - t);
    }
  });
  if (listing) await listingFigures(lg, n);
  await lg.close();

  const id = probes[1]!;
  const cold = await counted(() => child(['fold', root, 'b', exp, id]));
  const lanceCold = await counted(() => child(['lance', lg.uri.slice(0, lg.uri.lastIndexOf('/')), 'log', id]));
  if (cold.value.rows !== PER_ITEM || lanceCold.value.rows !== PER_ITEM) {
    throw new Error(`bench: cold reads of ${id} saw ${cold.value.rows} / ${lanceCold.value.rows} events, expected ${PER_ITEM}`);
  }
  push('fold', {
    figure: `cold fold after maintenance, fresh process, ${size} events (open + fold)`,
    ours: `${msText(cold.value.ms)}, ${perText(cold.req)}`,
    baseline: `bare Lance connect + openTable + query ${msText(lanceCold.value.ms)}, ${perText(lanceCold.req)}`,
    ratio: `${ratio(s3Total(cold.req), s3Total(lanceCold.req))} requests`,
  });
  push('fold', {
    figure: `fold one item, merged, ${size} events, warm, p50 (n=${probes.length})`,
    ours: `${msText(pct(lat, 50))} (p99 ${msText(pct(lat, 99))}), ${perText(warm.req, probes.length)}`,
    baseline: '',
    ratio: '',
  });
  raw[n === P.baseEvents ? 'cold_fold' : `cold_fold_${n}`] = {
    events: n,
    ms: cold.value.ms,
    requests: perJson(cold.req),
    lance_ms: lanceCold.value.ms,
    lance_requests: perJson(lanceCold.req),
    warm_p50_ms: pct(lat, 50),
    warm_per_fold: perJson(warm.req, probes.length),
  };
  log(`cold fold of ${size} events done`);
}

/** `items()` through the projection maintenance just wrote (the first call GETs it; later ones
 * reuse it while it covers the base), against the same listing by a scan of the log. */
async function listingFigures(lg: Awaited<ReturnType<typeof open>>, n: number): Promise<void> {
  const items = n / PER_ITEM;
  const first = await counted(() => lg.items());
  const again = await counted(() => lg.items());
  const scan = await counted(() => readsOf(lg).scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor()));
  if (first.value.items.length !== items || again.value.items.length !== items || scan.value.length !== items) {
    throw new Error(`bench: items() on S3 saw ${first.value.items.length} / ${again.value.items.length}, the scan ${scan.value.length}, expected ${items}`);
  }
  push('items', {
    figure: `\`items()\` over ${int(n)} events after maintenance (projection): first call in a process / again`,
    ours: `${msText(first.ms)}, ${perText(first.req)} / ${msText(again.ms)}, ${perText(again.req)}`,
    baseline: `the same listing by a scan of the log ${msText(scan.ms)}, ${perText(scan.req)}`,
    ratio: `${ratio(first.ms, scan.ms)} / ${ratio(again.ms, scan.ms)}`,
  });
  raw.items_projection = { events: n, first_ms: first.ms, first_requests: perJson(first.req), again_ms: again.ms, again_requests: perJson(again.req), scan_ms: scan.ms, scan_requests: perJson(scan.req) };
}

/**
 * Fold with 1, 4, 16 unmerged shards (writers live), then those writers close without merging
 * (a merge hook refuses: their sealed shards are left to the maintainer) and maintenance merges
 * them all.
 */
async function shards(): Promise<void> {
  const C = P.shardCommits;
  let oneShard = 0;
  for (const N of [1, 4, 16]) {
    const exp = `fold${N}`;
    let holdMerges = true;
    const hooks = {
      beforeMergeStep: () => {
        if (holdMerges) throw new Error('bench: merge left to the maintainer');
      },
    };
    const writers = await Promise.all(Array.from({ length: N }, (_, w) => open(exp, { owner: `w${w}`, slot: w, mergeEveryCommits: 1_000_000, mergeIdleMs: 0, hooks })));
    await Promise.all(writers.map(async (lg, w) => {
      for (let i = 0; i < C; i++) await lg.append([newItemBatch(`w${w}-i${i}`)]);
    }));
    const reader = await open(exp);
    const probe = (k: number) => `w${k % N}-i${k % C}`;
    await reader.fold(probe(0));
    const lat: number[] = [];
    const fold = await counted(async () => {
      for (let k = 0; k < P.probes; k++) {
        const t = now();
        await reader.fold(probe(k));
        lat.push(now() - t);
      }
    });
    await Promise.all(writers.map((lg) => lg.close()));
    holdMerges = false;
    const m = await counted(() => reader.maintain());
    if (m.value.mergedShards.length !== N) throw new Error(`bench: maintenance merged ${m.value.mergedShards.length} shards, expected ${N}`);
    const after: number[] = [];
    const merged = await counted(async () => {
      for (let k = 0; k < P.probes; k++) {
        const t = now();
        await reader.fold(probe(k));
        after.push(now() - t);
      }
    });
    await reader.close();
    if (N === 1) oneShard = pct(lat, 50);
    push('fold', {
      figure: `fold one item, ${N} unmerged shard${N > 1 ? 's' : ''} (${C} commits each, writers live), p50 (n=${P.probes}; S3 only: a fold sends no DynamoDB request, the writers' lease renewals are not its)`,
      ours: `${msText(pct(lat, 50))} (p99 ${msText(pct(lat, 99))}), ${perText({ s3: fold.req.s3, ddb: {}, bytes: fold.req.bytes }, P.probes)}`,
      baseline: `merged by maintenance ${msText(pct(after, 50))}, ${perText(merged.req, P.probes)}${N > 1 ? `; 1 shard ${msText(oneShard)}` : ''}`,
      ratio: ratio(pct(lat, 50), pct(after, 50)),
    });
    push('maint', {
      figure: `maintenance: merge ${N} sealed shard${N > 1 ? 's' : ''} of ${C} commits (then compact + index)`,
      ours: `${(m.ms / 1000).toFixed(1)} s, ${perText(m.req)}`,
      baseline: '',
      ratio: '',
    });
    raw[`shards_${N}`] = {
      commits_per_shard: C,
      fold_p50_ms: pct(lat, 50),
      fold_p99_ms: pct(lat, 99),
      per_fold: perJson({ s3: fold.req.s3, ddb: {}, bytes: fold.req.bytes }, P.probes),
      writers_lease_requests_in_fold_window: fold.req.ddb,
      merged_fold_p50_ms: pct(after, 50),
      merged_per_fold: perJson(merged.req, P.probes),
      maintain_ms: m.ms,
      maintain_requests: perJson(m.req),
      maintain_failures: m.value.failures,
    };
    log(`${N} shards done`);
  }
}

const date = new Date().toISOString();
try {
  log(`${mode} run on ${root} via ${upstream}; ${load}`);
  await ack();
  await oneWriter();
  await coldFold(P.baseEvents, true);
  if (long) await coldFold(1_000_000, false);
  await shards();
} finally {
  // Leave the shared servers as found: the bench's objects and lease table go.
  await S3ObjectStore.at(new S3Client(s3ClientConfig()), { kind: 's3', bucket, prefix })
    .deletePrefix('')
    .catch((e: unknown) => log(`cleanup of ${root} failed: ${String(e)}`));
  await ddb.send(new DeleteTableCommand({ TableName: leaseTable })).catch((e: unknown) => log(`cleanup of table ${leaseTable} failed: ${String(e)}`));
  ddb.destroy();
  await proxy.close();
}

const rows = ORDER.flatMap((k) => groups.get(k)!);
const md = [
  `# datagen-checkpoint-log S3 bench (${quick ? 'quick: small counts, indicative only' : mode})`,
  '',
  `${date}, node ${process.version}. Machine load at the start: \`${load}\`.`,
  '',
  'How to read it: S3 is a Ceph RGW on loopback and DynamoDB is DynamoDB Local, on a shared 2-core',
  'machine, so latencies and events/s are not AWS figures: compare ratios within the run. Request',
  'counts are exact (a counting proxy in front of the RGW sees every S3 request of the bench and',
  'of its fresh-process children; a middleware on the lease store\'s DynamoDB client counts each',
  'attempt), and so are the dollars derived from them. Requests are per ack / batch / fold as',
  'labelled: S3 total (by operation: PUT-if = conditional PUT) + DynamoDB (by command). The ack',
  'rows run with the writer\'s own merge off (they measure the ack path); the writer rows give the',
  'append window and, separately, the window plus the shard\'s merge at close; "maintenance" rows',
  'are the maintainer\'s pass (lease, merges, compaction, indexes, cleanup). Cold reads run in a',
  'fresh process with no lease table (reads take no lease). "S3 bytes" are the request and answer',
  'bodies the proxy forwarded (uploads up, downloads down), per the same unit.',
  '',
  `Prices: ${PRICES_TEXT}.`,
  '',
  formatRows(rows),
].join('\n');
process.stdout.write(md);
const out = fileURLToPath(new URL('./results/', import.meta.url));
mkdirSync(out, { recursive: true });
writeFileSync(path.join(out, 's3-latest.md'), md);
writeFileSync(
  path.join(out, 's3-latest.json'),
  JSON.stringify({ meta: { mode, date, node: process.version, load, prices: PRICES_TEXT, counts: P }, rows, raw }, null, 2) + '\n',
);
log(`wrote ${path.join(out, 's3-latest.md')} and s3-latest.json`);
