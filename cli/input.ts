import type { Readable } from 'node:stream';
import { InvalidInputError } from '../lib/errors.ts';

/**
 * JSON Lines of checkpoint batches; blank lines are skipped. `onRead` is told the bytes read so
 * far (the progress bar). Stdin must be valid UTF-8: a
 * replacing decoder would turn bad bytes into U+FFFD and the log would store text the caller
 * never sent, so a bad byte is an error naming its line and byte offset. A line that is not
 * JSON is an error naming its line number. Both are raised before anything is written.
 */
export async function readBatchLines(input: Readable, onRead?: (bytes: number) => void): Promise<unknown[]> {
  const chunks: Buffer[] = [];
  let read = 0;
  for await (const c of input) {
    const chunk = typeof c === 'string' ? Buffer.from(c) : (c as Buffer);
    chunks.push(chunk);
    read += chunk.length;
    onRead?.(read);
  }
  const bytes = Buffer.concat(chunks);
  const batches: unknown[] = [];
  decodeLines(bytes).forEach((line, i) => {
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

/**
 * Splits on `\n` bytes (0x0A never occurs inside a multi-byte UTF-8 sequence, so the split is
 * exact) and decodes each line strictly. `ignoreBOM` keeps a byte order mark as U+FEFF, so it
 * is not dropped silently (JSON.parse then rejects the line).
 */
function decodeLines(bytes: Buffer): string[] {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const lines: string[] = [];
  let start = 0;
  while (start <= bytes.length) {
    let end = bytes.indexOf(0x0a, start);
    if (end < 0) end = bytes.length;
    const line = bytes.subarray(start, end);
    try {
      lines.push(decoder.decode(line));
    } catch {
      const at = firstInvalidUtf8(line);
      const n = lines.length + 1;
      throw new InvalidInputError(
        `line ${n} of stdin is not valid UTF-8: byte 0x${line[at]!.toString(16).padStart(2, '0')} at offset ${at} of the line (offset ${start + at} of stdin); send UTF-8 text`,
        { field: `line ${n}` },
      );
    }
    start = end + 1;
  }
  return lines;
}

/**
 * Offset of the first byte that starts an ill-formed sequence (Unicode table 3-7: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or -1. Only run once the strict decoder has
 * failed, to say where.
 */
function firstInvalidUtf8(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    let n: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (c < 0x80) n = 0;
    else if (c >= 0xc2 && c <= 0xdf) n = 1;
    else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c === 0xe0) lo = 0xa0; // overlong
      if (c === 0xed) hi = 0x9f; // surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c === 0xf0) lo = 0x90; // overlong
      if (c === 0xf4) hi = 0x8f; // above U+10FFFF
    } else return i;
    for (let k = 1; k <= n; k++) {
      const d = b[i + k];
      if (d === undefined || d < (k === 1 ? lo : 0x80) || d > (k === 1 ? hi : 0xbf)) return i;
    }
    i += n + 1;
  }
  return -1;
}
