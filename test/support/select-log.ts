/**
 * The experiment of the `where` tests: items whose every attribute a filter reads is known
 * (status, step, attempts, error type, lineage, query tags replaced by a later batch, fields of
 * every kind including an int beyond 2^53 and an appended list), and 40 plain items; written
 * partly into the base (merged) and partly into an unmerged shard.
 */
import { openLog } from '../../lib/index.ts';
import type { CheckpointLog } from '../../lib/api.ts';

export const fillerId = (i: number) => `p-${String(i).padStart(2, '0')}`;
export const FILLERS = 40;

export async function buildSelectLog(root: string): Promise<CheckpointLog> {
  const log = await openLog({ root, pipeline: 'p', experiment: 'select' });
  await log.append([
    { itemId: 'a-done', runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { score: 0.9, label: 'cat' }, append: { words: ['x', 'y'] }, queryTags: { model: 'gpt', batch: 'one' } },
    { itemId: 'b-fail', runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { score: 0.2, label: 'dog' }, queryTags: { model: 'claude' } },
    { itemId: 'c-retry', runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { score: { $int: '9007199254740993' } }, queryTags: { model: 'gpt' } },
    ...Array.from({ length: FILLERS / 2 }, (_, i) => filler(i)),
  ]);
  await log.mergeOwnShard();
  await log.append([
    { itemId: 'a-done', runId: 'r', terminal: 'completed' },
    { itemId: 'b-fail', runId: 'r', step: { name: 'gen', index: 1 }, failed: { errorType: 'RateLimitError', traceback: 'Traceback: slow down' } },
    { itemId: 'c-retry', runId: 'r', step: { name: 'gen', index: 1 }, attempt: 1, failed: { errorType: 'Timeout', traceback: 'Traceback: timed out' }, queryTags: { model: 'gpt-4' } },
    { itemId: 'd-child', runId: 'r', create: { rootItemId: 'a-done', parentItemId: 'a-done' }, step: { name: 'score', index: 0 }, set: { label: 'Cat' }, terminal: 'filtered' },
    { itemId: 'e-bare', runId: 'r', create: {} },
    { itemId: 'f-fail2', runId: 'r', create: {}, step: { name: 'gen', index: 1 }, set: { score: 0.7 }, failed: { errorType: 'Timeout', traceback: 'Traceback: timed out' }, queryTags: { model: 'gpt' } },
    ...Array.from({ length: FILLERS / 2 }, (_, i) => filler(i + FILLERS / 2)),
  ]);
  await log.append([{ itemId: 'c-retry', runId: 'r', step: { name: 'gen', index: 1 }, attempt: 2 }]);
  return log;
}

/** Filler i: fields n = i and even, tag batch = i % 3; completed when i % 5 == 0, else in progress after `load`. */
function filler(i: number): Record<string, unknown> {
  return { itemId: fillerId(i), runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { n: i, even: i % 2 === 0 }, queryTags: { batch: i % 3 }, ...(i % 5 === 0 ? { terminal: 'completed' } : {}) };
}
