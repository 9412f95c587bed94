import type { Readable } from 'node:stream';
import { InvalidInputError } from '../lib/errors.ts';

/**
 * JSON Lines of checkpoint batches; blank lines are skipped. A line that is not JSON is an
 * error naming its line number, raised before anything is written.
 */
export async function readBatchLines(input: Readable): Promise<unknown[]> {
  const chunks: Buffer[] = [];
  for await (const c of input) chunks.push(typeof c === 'string' ? Buffer.from(c) : (c as Buffer));
  const text = Buffer.concat(chunks).toString('utf8');
  const batches: unknown[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    try {
      batches.push(JSON.parse(line));
    } catch (e) {
      throw new InvalidInputError(`line ${i + 1} of stdin is not valid JSON: ${(e as Error).message}`, { field: `line ${i + 1}` });
    }
  });
  if (batches.length === 0) throw new InvalidInputError('no checkpoint batch on stdin (expected JSON Lines)', { field: 'stdin' });
  return batches;
}
