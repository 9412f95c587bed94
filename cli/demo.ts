/**
 * `dgcl demo`: a sample datagen pipeline on the embedded default. A worker process runs it and
 * is killed with SIGKILL mid-run; the demo then resumes every item from its folded cursor and
 * checks that no step ran twice into the log.
 *
 * Pipeline per root item: load -> generate (a loop of 3 iterations, fails randomly) -> fanout
 * (2 child items, each scored and completed) -> render (a blob, fails randomly) -> judge
 * (completed or filtered).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { NotFoundError } from '../lib/errors.ts';
import { openLog } from '../lib/index.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { report as writeReport } from '../lib/report/report.ts';
import type { ItemState } from '../lib/types.ts';

const PIPELINE = 'demo';
const STEPS = ['load', 'generate', 'fanout', 'render', 'judge'] as const;
const LOOP_ITERATIONS = 3;
const CHILDREN = 2;
const CONCURRENCY = 8;
const WORKER_LEASE_MS = 3000;

export interface DemoOptions {
  root: string;
  items: number;
  seed: number;
  json?: boolean;
  worker?: string;
}

/** Deterministic "randomness": the same item, step and attempt always draw the same numbers. */
function draw(seed: number, ...key: (string | number)[]): number {
  const h = createHash('sha256').update(`${seed}|${key.join('|')}`).digest();
  return h.readUInt32BE(0) / 2 ** 32;
}

function bytes(seed: number, key: string, n: number): Buffer {
  const out = Buffer.alloc(n);
  for (let off = 0, i = 0; off < n; i++) {
    const h = createHash('sha256').update(`${seed}|${key}|${i}`).digest();
    off += h.copy(out, off);
  }
  return out;
}

async function stateOf(log: CheckpointLog, itemId: string): Promise<ItemState | null> {
  try {
    return await log.fold(itemId);
  } catch (e) {
    if (e instanceof NotFoundError) return null;
    throw e;
  }
}

const traceback = (fn: string, err: string) =>
  `Traceback (most recent call last):\n  File "pipeline.py", line 88, in run_step\n    out = ${fn}(item)\n  File "steps.py", line 41, in ${fn}\n    raise ${err}("simulated")\n${err}: simulated`;

interface Counters {
  acks: number;
  onAck?: () => void;
}

async function send(log: CheckpointLog, batch: Record<string, unknown>, c: Counters): Promise<void> {
  await log.append([batch]);
  c.acks++;
  c.onAck?.();
}

/** Run one child item (created by its parent's fanout) to its end, from wherever it stopped. */
async function runChild(log: CheckpointLog, id: string, parent: string, runId: string, seed: number, c: Counters): Promise<void> {
  const st = await stateOf(log, id);
  if (!st) {
    await send(log, { itemId: id, runId, create: { rootItemId: parent, parentItemId: parent }, step: { name: 'score', index: 0 }, set: { score: Math.round(draw(seed, id, 'score') * 1000) / 1000 } }, c);
  }
  if (!st || (st.status !== 'completed' && st.status !== 'filtered')) {
    await send(log, { itemId: id, runId, terminal: 'completed' }, c);
  }
}

/** Run one root item from its folded state to a terminal event. */
async function runItem(log: CheckpointLog, itemId: string, n: number, runId: string, seed: number, c: Counters): Promise<void> {
  for (;;) {
    const st = await stateOf(log, itemId);
    if (st && (st.status === 'completed' || st.status === 'filtered')) return;
    // Next step after the cursor; the generate loop repeats its step index per iteration.
    let index = 0;
    let iteration: number | undefined;
    const cur = st?.cursor;
    if (cur) {
      if (cur.stepName === 'generate' && (cur.iteration ?? 0) < LOOP_ITERATIONS - 1) {
        index = 1;
        iteration = (cur.iteration ?? 0) + 1;
      } else index = (cur.stepIndex ?? -1) + 1;
    }
    if (index === 1 && iteration === undefined) iteration = 0;
    const name = STEPS[index]!;
    const attempt = st?.status === 'failed' ? st.failures.at(-1)!.attempt + 1 : 1;
    const step = { name, index, instanceId: iteration === undefined ? name : `${name}#${iteration}`, ...(iteration !== undefined ? { iteration } : {}) };
    const base = { itemId, runId, step, attempt };

    const failP = name === 'generate' ? 0.2 : name === 'render' ? 0.15 : 0;
    if (attempt <= 3 && draw(seed, itemId, name, iteration ?? 0, attempt, 'fail') < failP) {
      const errorType = name === 'generate' ? 'RateLimitError' : 'RenderTimeout';
      await send(log, { ...base, failed: { errorType, errorDump: JSON.stringify({ status: 429, retryAfterMs: 200 }), traceback: traceback(name, errorType) } }, c);
      continue;
    }
    switch (name) {
      case 'load':
        await send(log, { ...base, create: {}, set: { prompt: `Write a short note about topic ${n}`, topicId: n, meta: { lang: 'en', tags: ['demo', `t${n % 5}`] }, seed64: { $int: (9007199254740993n + BigInt(n)).toString() } }, queryTags: { model: 'demo-7b' } }, c);
        break;
      case 'generate': {
        const it = iteration ?? 0;
        await send(log, { ...base, append: { messages: [{ role: 'user', content: `draft ${it + 1} please` }, { role: 'assistant', content: `draft ${it + 1} of topic ${n}` }] }, set: { tokens: 100 + Math.floor(draw(seed, itemId, 'tokens', it) * 400) } }, c);
        break;
      }
      case 'fanout': {
        const kids = Array.from({ length: CHILDREN }, (_, k) => `${itemId}.c${k}`);
        for (const kid of kids) await runChild(log, kid, itemId, runId, seed, c);
        await send(log, { ...base, set: { children: kids } }, c);
        break;
      }
      case 'render': {
        const img = bytes(seed, itemId, 1024 + Math.floor(draw(seed, itemId, 'size') * 3072));
        await send(log, { ...base, set: { image: { $blob: img.toString('base64') } } }, c);
        break;
      }
      case 'judge': {
        const quality = Math.round(draw(seed, itemId, 'quality') * 100) / 100;
        await send(log, { ...base, set: { quality, ok: quality >= 0.15 }, terminal: quality >= 0.15 ? 'completed' : 'filtered' }, c);
        break;
      }
    }
  }
}

const itemIds = (n: number) => Array.from({ length: n }, (_, i) => `doc-${String(i).padStart(3, '0')}`);

async function runAll(log: CheckpointLog, o: { items: number; seed: number; runId: string }, c: Counters): Promise<void> {
  const ids = itemIds(o.items);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, ids.length) }, async () => {
      while (next < ids.length) {
        const i = next++;
        await runItem(log, ids[i]!, i, o.runId, o.seed, c);
      }
    }),
  );
}

async function worker(o: DemoOptions): Promise<void> {
  // A short lease, so that after the crash the maintainer may take the dead worker's slot soon.
  const log = await openLog({ root: o.root, pipeline: PIPELINE, experiment: o.worker!, mergeEveryCommits: 16, leaseTtlMs: WORKER_LEASE_MS });
  const c: Counters = { acks: 0, onAck: () => process.stdout.write(`ack ${c.acks}\n`) };
  await runAll(log, { items: o.items, seed: o.seed, runId: 'run-1' }, c);
  await log.close();
  process.stdout.write('done\n');
}

/** Phase 1: a worker process runs the pipeline and is killed with SIGKILL part-way. */
async function crashingRun(
  o: DemoOptions,
  experiment: string,
  killAfterAcks: number,
): Promise<{ acks: number; killed: boolean; pid: number; killedAtMs: number }> {
  const args = [...process.execArgv, process.argv[1]!, 'demo', '--root', o.root, '--items', String(o.items), '--seed', String(o.seed), '--worker', experiment];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let acks = 0;
  let killed = false;
  let killedAtMs = Date.now();
  const lines = createInterface({ input: child.stdout });
  lines.on('line', (l) => {
    const m = /^ack (\d+)$/.exec(l);
    if (!m) return;
    acks = Number(m[1]);
    if (!killed && acks >= killAfterAcks) {
      killed = true;
      killedAtMs = Date.now();
      child.kill('SIGKILL');
    }
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  if (!killed && code !== 0) throw new Error(`demo worker exited with code ${code}`);
  return { acks, killed, pid: child.pid ?? -1, killedAtMs };
}

function tally(states: ItemState[]): Record<string, number> {
  const t: Record<string, number> = { in_progress: 0, failed: 0, completed: 0, filtered: 0 };
  for (const s of states) t[s.status] = (t[s.status] ?? 0) + 1;
  return t;
}

export async function runDemo(o: DemoOptions): Promise<void> {
  if (o.worker) return worker(o);
  const root = path.resolve(o.root);
  const experiment = `run-${new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z').replace('T', '-')}`;
  const say = (s: string) => {
    if (!o.json) process.stdout.write(`${s}\n`);
  };
  const log = await openLog({ root, pipeline: PIPELINE, experiment });
  say(`dgcl demo: ${o.items} items through ${STEPS.join(' -> ')} (generate loops ${LOOP_ITERATIONS}x, fanout makes ${CHILDREN} child items, render writes a blob)`);
  say(`log: ${log.uri}`);

  const perItem = 1 + LOOP_ITERATIONS + CHILDREN * 2 + 1 + 1 + 1;
  const t0 = Date.now();
  const crash = await crashingRun({ ...o, root }, experiment, Math.floor(o.items * perItem * 0.45));
  const atCrash = (await log.allStates()).filter((s) => s.parentItemId === null);
  const tc = tally(atCrash);
  say(`\n1. worker pid ${crash.pid} wrote ${crash.acks} acknowledged checkpoint batches, then was killed with SIGKILL`);
  say(`   state folded from the log: ${tc.completed} completed, ${tc.filtered} filtered, ${tc.in_progress} in progress, ${tc.failed} failed (awaiting retry), ${o.items - atCrash.length} not started`);

  const c: Counters = { acks: 0 };
  let lastShown = 0;
  c.onAck = () => {
    if (!o.json && process.stderr.isTTY && Date.now() - lastShown > 250) {
      lastShown = Date.now();
      process.stderr.write(`\r   resuming... ${c.acks} batches`);
    }
  };
  await runAll(log, { items: o.items, seed: o.seed, runId: 'run-2' }, c);
  if (!o.json && process.stderr.isTTY) process.stderr.write('\r\x1b[K');
  say(`2. resumed every item from its cursor (failed steps retried with attempt + 1): ${c.acks} more batches`);

  // Checks: every item terminal, each (step, iteration) completed exactly once, no violations.
  const states = await log.allStates();
  let events = 0;
  let repeats = 0;
  let retries = 0;
  for (const s of states) {
    const traj = await log.trajectory(s.itemId);
    events += traj.length;
    const done = new Map<string, number>();
    for (const e of traj) {
      if (e.eventType === 'STEP_COMPLETED') {
        const k = `${e.stepName}#${e.iteration ?? ''}`;
        done.set(k, (done.get(k) ?? 0) + 1);
      }
      if (e.eventType === 'FAILED') retries++;
    }
    for (const n of done.values()) if (n > 1) repeats++;
  }
  const roots = states.filter((s) => s.parentItemId === null);
  const kids = states.filter((s) => s.parentItemId !== null);
  const violations = states.reduce((a, s) => a + s.violations.length, 0);
  const unfinished = states.filter((s) => s.status === 'in_progress' || s.status === 'failed').length;
  const sample = roots[0]?.itemId ?? 'doc-000';
  const blob = await log.blob(sample, 'image');
  await log.close(); // merges this process's own shard into the base
  // The killed worker's shard is still unmerged: once its lease has expired, the maintainer
  // takes its slot over (sealing its epoch) and merges it.
  const waitMs = crash.killedAtMs + WORKER_LEASE_MS + 500 - Date.now();
  if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs));
  const maint = await openLog({ root, pipeline: PIPELINE, experiment });
  const report = await maint.maintain();
  const stats = await maint.stats();
  const after = await maint.allStates();
  // The demo ends with its report page: one HTML file beside the log folder.
  const page = await writeReport(maint, { out: path.join(root, `${experiment}-report.html`) });
  await maint.close();
  const changed = after.length !== states.length || after.some((s, i) => JSON.stringify(s) !== JSON.stringify(states[i]));
  const tr = tally(roots);
  const summary = {
    log: log.uri,
    experiment,
    crash: { workerAcks: crash.acks, killed: crash.killed },
    resumedBatches: c.acks,
    rootItems: roots.length,
    childItems: kids.length,
    statuses: tr,
    events,
    failuresRetried: retries,
    repeatedSteps: repeats,
    violations,
    unfinished,
    sampleBlobBytes: blob.length,
    maintenance: { mergedRows: report.mergedRows, mergedShards: report.mergedShards.length, indexes: report.indexes, baseRows: stats.base.rows, unmergedShards: stats.shards.length, readsUnchanged: !changed },
    seconds: Math.round((Date.now() - t0) / 100) / 10,
    report: page.out!,
  };
  if (o.json) {
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  } else {
    say(`3. result: ${roots.length} root items (${tr.completed} completed, ${tr.filtered} filtered) + ${kids.length} child items; ${events} events; ${retries} failures kept with tracebacks`);
    say(`   checks: ${repeats === 0 ? 'no step completed twice' : `${repeats} steps completed twice!`}; ${violations} fencing violations; ${unfinished} unfinished; blob of ${sample} loaded and verified (${blob.length} bytes)`);
    say(`4. maintenance took over the dead worker's slot and merged ${report.mergedShards.length} shard generations (${report.mergedRows} rows); base now ${stats.base.rows} rows, ${stats.shards.length} shards unmerged, indexes: ${report.indexes.join(', ') || 'none'}; every item reads the same as before: ${changed ? 'NO' : 'yes'}`);
    say(`\ndone in ${summary.seconds}s. Look around:`);
    const flags = `--root ${o.root} --pipeline ${PIPELINE} --experiment ${experiment}`;
    say(`  npx dgcl items ${flags}`);
    say(`  npx dgcl fold ${flags} --item ${sample}`);
    say(`  npx dgcl trajectory ${flags} --item ${sample}`);
    say(`  npx dgcl failures ${flags}`);
    say(`  npx dgcl export ${flags} --status completed --format jsonl --out export.jsonl`);
    say(`\nreport: ${page.out!}`);
  }
  if (repeats > 0 || violations > 0 || unfinished > 0 || changed) {
    throw new Error(`demo checks failed: ${repeats} repeated steps, ${violations} violations, ${unfinished} unfinished items, reads changed by maintenance: ${changed}`);
  }
}
