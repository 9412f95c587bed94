/**
 * The CLI's streams (the process's, or a test's) and what happens when one of them fails. A
 * reader that stops reading stdout early (`dgcl items --json | head`) closes the pipe: the next
 * write fails with EPIPE, and the command stops quietly with exit 0, as coreutils tools do
 * (Node ignores SIGPIPE, so without this the error would surface as a stack trace). Any other
 * write error (a full disk behind `> file`) is kept and reported by `main`.
 */
import type { Readable, Writable } from 'node:stream';

export interface Io {
  stdin: Readable & { isTTY?: boolean };
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean };
  env: Record<string, string | undefined>;
}

export function processIo(): Io {
  // Behind bin/dgcl.js's stderr filter (cli/panic-filter.ts) stderr is a pipe with a terminal
  // behind it: the progress bar is drawn as on the terminal.
  if (process.env.DGCL_STDERR_TTY === '1' && process.stderr.isTTY !== true) {
    Object.assign(process.stderr, { isTTY: true, columns: Number(process.env.COLUMNS) || 80 });
  }
  return {
    // Made on first use: a command that runs in a child process (bin/dgcl.js) leaves stdin to it.
    get stdin() {
      return process.stdin;
    },
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
  };
}

/** The reader of stdout went away: the command stops here, and `main` exits 0 without a word. */
export class PipeClosed extends Error {
  override readonly name = 'PipeClosed';
}

interface StreamState {
  closed: boolean;
  error: Error | null;
}

const states = new WeakMap<Writable, StreamState>();

const isClosedPipe = (e: unknown) => {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  return code === 'EPIPE' || code === 'ERR_STREAM_DESTROYED';
};

/**
 * The error state of `stream`, watched by one listener for the life of the stream: the error
 * event of a failed write may come after the command ended, and unheard it would kill the
 * process with a stack trace.
 */
function watch(stream: Writable): StreamState {
  let state = states.get(stream);
  if (!state) {
    const s: StreamState = { closed: false, error: null };
    stream.on('error', (e: Error) => {
      if (isClosedPipe(e)) s.closed = true;
      else s.error ??= e;
    });
    states.set(stream, (state = s));
  }
  return state;
}

/** A command's output stream: text lines, JSON lines and bytes. */
export class Output {
  private readonly state: StreamState;

  constructor(private readonly stream: Writable) {
    this.state = watch(stream);
  }

  /** The reader closed the pipe. */
  get closed(): boolean {
    this.check();
    return this.state.closed;
  }

  /** A write failed for another reason than a closed pipe. */
  get error(): Error | null {
    this.check();
    return this.state.error;
  }

  /** A failed write marks the stream at once; its error event comes a tick later. */
  private check(): void {
    const e = this.stream.errored;
    if (e && !this.state.closed && this.state.error === null) {
      if (isClosedPipe(e)) this.state.closed = true;
      else this.state.error = e;
    }
  }

  /** One line (a newline added when missing). Throws PipeClosed once the reader has gone. */
  line(s: string): void {
    if (this.closed) throw new PipeClosed();
    this.stream.write(s.endsWith('\n') ? s : `${s}\n`);
  }

  json(v: unknown, pretty = false): void {
    this.line(JSON.stringify(v, null, pretty ? 2 : undefined));
  }

  /** Bytes as they are, resolved once written. */
  async bytes(b: Uint8Array): Promise<void> {
    if (this.closed) throw new PipeClosed();
    await new Promise<void>((resolve, reject) =>
      this.stream.write(b, (e) => {
        if (!e) resolve();
        else reject(isClosedPipe(e) ? new PipeClosed() : e);
      }),
    );
  }

  /** Text as it is (commander's help and usage errors); never throws. */
  raw(s: string): void {
    if (!this.closed) this.stream.write(s);
  }
}
