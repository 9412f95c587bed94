/**
 * A writer in its own process, for tests of crashes and cross-process races. Reads its task
 * from DGCL_TEST_TASK (JSON), prints one line per ack (`ack <json>`), exits 0 when done.
 *  - {mode: "batches", batches: [...]} appends the batches in one request;
 *  - {mode: "loop", count, inFlight} appends sized batches `loopBatch(i)` until killed.
 */
import { openLog } from '../../lib/index.ts';
import { loopBatch } from './batches.ts';

interface Task {
  root: string;
  pipeline: string;
  experiment: string;
  mode: 'batches' | 'loop';
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
