/** The CLI in-process: `main(argv)` of cli/main.ts with captured streams (no process start, no rebuild). */
import { Readable, Writable } from 'node:stream';
import { main } from '../../cli/main.ts';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout as bytes (for `blob`). */
  bytes: Buffer;
}

function sink(): { stream: Writable; chunks: Buffer[] } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(c: Buffer | string, _enc, cb) {
      chunks.push(typeof c === 'string' ? Buffer.from(c) : Buffer.from(c));
      cb();
    },
  });
  return { stream, chunks };
}

/** Run one command line in this process; `stdin` is text or bytes (none: an empty stream). */
export async function run(args: string[], opts: { stdin?: string | Buffer; env?: Record<string, string | undefined> } = {}): Promise<CliResult> {
  const out = sink();
  const err = sink();
  const stdin = opts.stdin === undefined ? Readable.from([]) : Readable.from([typeof opts.stdin === 'string' ? Buffer.from(opts.stdin) : opts.stdin]);
  const code = await main(args, { stdin, stdout: out.stream, stderr: err.stream, env: { ...process.env, ...opts.env } });
  const bytes = Buffer.concat(out.chunks);
  return { code, stdout: bytes.toString('utf8').replace(/\n$/, ''), stderr: Buffer.concat(err.chunks).toString('utf8'), bytes };
}
