/**
 * A writer in its own process, for tests of crashes and cross-process races. Reads its task
 * from DGCL_TEST_TASK (JSON), prints one line per ack (`ack <json>`), exits 0 when done.
 *  - {mode: "batches", batches: [...]} appends the batches in one request;
 *  - {mode: "loop", count, inFlight} appends sized batches `loopBatch(i)` until killed.
 */
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
  /** Wait until this file exists before appending (lines up two processes). */
  startFile?: string;
}

const task = JSON.parse(process.env.DGCL_TEST_TASK ?? '{}') as Task;
const log = await openLog({ root: task.root, pipeline: task.pipeline, experiment: task.experiment });
if (task.startFile) {
  const { existsSync } = await import('node:fs');
  while (!existsSync(task.startFile)) await new Promise((r) => setTimeout(r, 2));
}
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
