/**
 * A process of test/coord-local.test.ts's duplicate race: opens the log with its own slot, says
 * "ready", waits for "go", then appends checkpoints 0..N-1 (creations of items d-0..), 16 in
 * flight, starting at its own half so the two processes meet, and prints every ack.
 */
import { createInterface } from 'node:readline';
import { openLog } from '../../lib/index.ts';
import { createBatch } from './batches.ts';

const [root, experiment, slot, n] = process.argv.slice(2);
const log = await openLog({ root: root!, pipeline: 'p', experiment: experiment!, slot: Number(slot), slots: 4, owner: `dup-${slot}` });
process.stdout.write('ready\n');
const rl = createInterface({ input: process.stdin });
for await (const line of rl) if (line.trim() === 'go') break;
rl.close();
const total = Number(n);
const order = Array.from({ length: total }, (_, i) => (i + Number(slot) * Math.floor(total / 2)) % total);
const acks: unknown[] = [];
let next = 0;
await Promise.all(
  Array.from({ length: 16 }, async () => {
    while (next < order.length) {
      const k = order[next++]!;
      acks.push(...(await log.append([createBatch(`d-${k}`)])));
    }
  }),
);
await log.close();
process.stdout.write(`${JSON.stringify(acks)}\n`);
