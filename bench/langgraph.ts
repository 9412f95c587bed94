// LangGraph saver read costs at 1, 100 and 1,000 checkpoints in one thread (local root):
// getTuple of the latest checkpoint and list(limit 10), median of repeated calls on a fresh saver
// after the writer merged its shard. Prints a Markdown table; no timed asserts (a shared machine).
//
//   npx tsx bench/langgraph.ts [--sizes 1,100,1000] [--state-bytes 2048] [--reps 15]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { emptyCheckpoint, uuid6, type Checkpoint } from '@langchain/langgraph-checkpoint';
import type { RunnableConfig } from '@langchain/core/runnables';
import { openLog } from '../lib/index.ts';
import { DgclCheckpointSaver } from '../lib/langgraph/index.ts';
import { msText, ratio } from './table.ts';

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1,100,1000' },
    'state-bytes': { type: 'string', default: '2048' },
    reps: { type: 'string', default: '15' },
    'no-maintain': { type: 'boolean', default: false },
  },
});
const sizes = values.sizes.split(',').map(Number);
const stateBytes = Number(values['state-bytes']);
const reps = Number(values.reps);

const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-bench-langgraph-'));
const opts = { root: `file://${dir}`, pipeline: 'bench', experiment: 'langgraph' };
const thread = 'thread-1';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function timeIt(fn: () => Promise<unknown>): Promise<number> {
  await fn(); // warm the handles
  const t: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await fn();
    t.push(performance.now() - t0);
  }
  return median(t);
}

/** Append checkpoints until the thread holds `n`: each changes one 2 KB channel and a counter. */
async function grow(saver: DgclCheckpointSaver, from: number, n: number, parent: RunnableConfig): Promise<RunnableConfig> {
  let config = parent;
  for (let i = from; i < n; i++) {
    const c: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1) };
    c.channel_values = { messages: `${i}:`.padEnd(stateBytes, 'x'), step: i };
    c.channel_versions = { messages: i + 1, step: i + 1 };
    config = await saver.put(config, c, { source: 'loop', step: i, parents: {} }, { messages: i + 1, step: i + 1 });
    await saver.putWrites(config, [['messages', `write ${i}`]], `task-${i}`);
  }
  return config;
}

const rows: Array<{ n: number; latest: number; list: number }> = [];
let config: RunnableConfig = { configurable: { thread_id: thread, checkpoint_ns: '' } };
let have = 0;
for (const n of sizes) {
  const writer = new DgclCheckpointSaver(opts);
  config = await grow(writer, have, n, config);
  have = n;
  await writer.close(); // merges the writer's shard into the base
  if (!values['no-maintain']) {
    // What the scheduled maintenance does (compaction, the item_id index): reads as they run in
    // a maintained experiment.
    const log = await openLog(opts);
    await log.maintain();
    await log.close();
  }
  const reader = new DgclCheckpointSaver(opts);
  const latest = await timeIt(async () => {
    const t = await reader.getTuple({ configurable: { thread_id: thread } });
    if (t?.checkpoint.channel_values.step !== n - 1) throw new Error(`latest is not checkpoint ${n - 1}`);
  });
  const list = await timeIt(async () => {
    let k = 0;
    for await (const _ of reader.list({ configurable: { thread_id: thread } }, { limit: 10 })) k++;
    if (k !== Math.min(10, n)) throw new Error(`list returned ${k}`);
  });
  await reader.close();
  rows.push({ n, latest, list });
  console.error(`${n} checkpoints: getTuple ${msText(latest)}, list(10) ${msText(list)}`);
}

const base = rows[0]!;
console.log(`\nLangGraph saver, one thread, ${stateBytes} B state per checkpoint, local root, ${values['no-maintain'] ? 'unmaintained' : 'after maintain()'}, median of ${reps}\n`);
console.log('| checkpoints | getTuple (latest) | vs 1 | list(limit 10) | vs 1 |');
console.log('|---:|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.n.toLocaleString('en-US')} | ${msText(r.latest)} | ${ratio(r.latest, base.latest)} | ${msText(r.list)} | ${ratio(r.list, base.list)} |`);
rmSync(dir, { recursive: true, force: true });
