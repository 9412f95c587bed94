/**
 * A writer in its own process, for tests of crashes and cross-process races. Reads its task
 * from DGCL_TEST_TASK (JSON), prints one line per ack (`ack <json>`), exits 0 when done.
 *  - {mode: "batches", batches: [...]} appends the batches in one request;
 *  - {mode: "loop", count, inFlight} appends sized batches `loopBatch(i)` until killed.
 * With `barrier`, every commit waits in the writer's beforeCommit hook (items read, seqs
 * assigned, nothing committed yet): it creates `<dir>/arrived-<name>`, then waits for
 * `<dir>/release`. A test that sees every process's arrival file before releasing them knows
 * their reads overlapped their commits.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { openLog } from '../../lib/index.ts';
import { createBatch, loopBatch, stepBatch } from './batches.ts';

interface Task {
  root: string;
  pipeline: string;
  experiment: string;
  mode: 'batches' | 'loop' | 'load';
  /** load: items `<prefix>-<i>` for i < items, each a create batch + `steps` step batches;
   *  every `dupEvery`-th batch is delivered twice at once. */
  prefix?: string;
  items?: number;
  steps?: number;
  dupEvery?: number;
  batches?: unknown[];
  count?: number;
  inFlight?: number;
  /** Hold every commit at beforeCommit until the test releases it (see above). */
  barrier?: { dir: string; name: string };
}

const task = JSON.parse(process.env.DGCL_TEST_TASK ?? '{}') as Task;
const barrier = task.barrier;
const hooks = barrier
  ? {
      beforeCommit: async () => {
        writeFileSync(path.join(barrier.dir, `arrived-${barrier.name}`), '');
        while (!existsSync(path.join(barrier.dir, 'release'))) await new Promise((r) => setTimeout(r, 5));
      },
    }
  : undefined;
const log = await openLog({ root: task.root, pipeline: task.pipeline, experiment: task.experiment, ...(hooks ? { hooks } : {}) });
if (task.mode === 'batches') {
  const acks = await log.append(task.batches ?? []);
  for (const a of acks) process.stdout.write(`ack ${JSON.stringify(a)}\n`);
} else if (task.mode === 'load') {
  let next = 0;
  let n = 0;
  const items = task.items ?? 0;
  await Promise.all(
    Array.from({ length: task.inFlight ?? 8 }, async () => {
      while (next < items) {
        const id = `${task.prefix}-${String(next++).padStart(4, '0')}`;
        for (let s = 0; s <= (task.steps ?? 3); s++) {
          const batch = s === 0 ? createBatch(id) : stepBatch(id, s);
          const copies = ++n % (task.dupEvery ?? 10) === 0 ? 2 : 1;
          const acks = await Promise.all(Array.from({ length: copies }, () => log.append([batch])));
          for (const [a] of acks) process.stdout.write(`ack ${JSON.stringify(a)}\n`);
        }
      }
    }),
  );
} else {
  let next = 0;
  const count = task.count ?? 1_000_000;
  await Promise.all(
    Array.from({ length: task.inFlight ?? 4 }, async () => {
      while (next < count) {
        const i = next++;
        const [ack] = await log.append([loopBatch(i)]);
        process.stdout.write(`ack ${JSON.stringify(ack)}\n`);
      }
    }),
  );
}
await log.close();
process.stdout.write('done\n');
