/**
 * A writer in its own process that keeps its slot: reads its options from DGCL_TEST_TASK (JSON:
 * openLog options and `itemId`), appends one batch creating that item, prints
 * `acked <writerEpoch>`, then waits until it is killed or signalled (nothing of its own ends it).
 */
import { openLog, type OpenLogOptions } from '../../lib/index.ts';
import { createBatch } from './batches.ts';

const task = JSON.parse(process.env.DGCL_TEST_TASK ?? '{}') as OpenLogOptions & { itemId: string };
const log = await openLog(task);
await log.append([createBatch(task.itemId)]);
process.stdout.write(`acked ${log.writerEpoch}\n`);
setInterval(() => undefined, 60_000);
