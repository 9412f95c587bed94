/**
 * A small experiment for the report and export tests: items of every status, every value kind
 * (an int beyond 2^53, floats, bools, strings, json, appended lists, blobs, a field whose kind
 * changes), failures with tracebacks, child items; written partly into the base (merged) and
 * partly into an unmerged shard, so reads union both.
 */
import { openLog } from '../../lib/index.ts';
import type { CheckpointLog } from '../../lib/api.ts';

export const BLOB = Buffer.from('not an image, but bytes: \x00\x01\x02\xff', 'binary');

export async function buildExperiment(root: string, items = 12): Promise<CheckpointLog> {
  const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
  const b64 = BLOB.toString('base64');
  const id = (k: number) => `it-${String(k).padStart(3, '0')}`;
  // Round 1: create and load every item, then merge into the base.
  await log.append(
    Array.from({ length: items }, (_, k) => ({
      itemId: id(k),
      runId: 'r1',
      create: {},
      step: { name: 'load', index: 0 },
      set: { n: k, big: { $int: '9007199254740993' }, score: k / 4, ok: k % 2 === 0, title: `title "${k}" <b>`, meta: { k, tags: ['x'] }, mixed: k },
    })),
  );
  await log.mergeOwnShard();
  // Round 2 (stays in the shard): generate with failures, appends, blobs, terminals.
  for (let k = 0; k < items; k++) {
    const batches: Record<string, unknown>[] = [];
    if (k % 4 === 1) {
      batches.push({ itemId: id(k), runId: 'r2', step: { name: 'generate', index: 1 }, attempt: 1, failed: { errorType: k % 8 === 1 ? 'RateLimitError' : 'Timeout', traceback: `Traceback\n  step generate item ${k}\n${k % 8 === 1 ? 'RateLimitError' : 'Timeout'}: slow` } });
    }
    if (k % 4 === 3) {
      batches.push({ itemId: id(k), runId: 'r2', step: { name: 'generate', index: 1 }, attempt: 1, failed: { errorType: 'Timeout', traceback: `Traceback\n  item ${k}\nTimeout: again` } });
      await log.append(batches.splice(0));
      continue; // stays failed
    }
    if (k % 4 === 2) continue; // stays in progress after load
    batches.push({
      itemId: id(k),
      runId: 'r2',
      step: { name: 'generate', index: 1 },
      attempt: k % 4 === 1 ? 2 : 1,
      set: { image: { $blob: b64 }, mixed: `now a string ${k}` },
      append: { messages: [{ role: 'user', content: `q${k}` }, { role: 'assistant', content: `a${k}` }] },
    });
    batches.push({ itemId: id(k), runId: 'r2', terminal: k % 8 === 4 ? 'filtered' : 'completed' });
    await log.append(batches);
  }
  // An item whose step 0 (a second attempt) arrived after its step 1 (a late delivery): its
  // cursor stays at step 1.
  await log.append([{ itemId: 'late-step', runId: 'r2', create: {}, step: { name: 'load', index: 0 } }]);
  await log.append([{ itemId: 'late-step', runId: 'r2', step: { name: 'generate', index: 1 } }]);
  await log.append([{ itemId: 'late-step', runId: 'r2', step: { name: 'load', index: 0 }, attempt: 2 }]);
  // A child item, completed.
  await log.append([{ itemId: `${id(0)}.c0`, runId: 'r2', create: { rootItemId: id(0), parentItemId: id(0) }, step: { name: 'score', index: 0 }, set: { score: 0.5 }, terminal: 'completed' }]);
  return log;
}
