/**
 * LanceDB's native code reports a Rust panic on the process's stderr (its decoders panic on some
 * damaged files; the panic also becomes an error, which the log reports as CORRUPT naming the
 * file). Node cannot point its own fd 2 elsewhere, so `bin/dgcl.js` runs a command that opens a
 * log in a child whose stderr passes through `PanicFilter` (cli/main.ts `MainOptions.isolate`;
 * help and usage errors never load LanceDB and are answered without one): Rust's panic reports
 * are dropped, everything else (our messages, the progress bar, anything else native code
 * prints) passes unchanged, partial lines at once. `DGCL_RAW_STDERR=1` runs the command in
 * place, unfiltered.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { Transform, type TransformCallback } from 'node:stream';

/** `thread 'tokio-rt-worker' (123) panicked at path/file.rs:290:9:` (the id since Rust 1.89). */
const HEADER = /^thread '[^']*'(?: \(\d+\))? panicked at /;
/** What Rust's default hook prints after the message: the backtrace and its notes. */
const TRAILER = /^(?:stack backtrace:|\s+\d+: |\s+at |note: )/;

/**
 * Drops Rust panic reports from a text stream: the blank line Rust prints first, the header, the
 * message line, and the backtrace and notes after it.
 */
export class PanicFilter extends Transform {
  /** The start of a line that may be a panic header, held until it is whole (or cannot be one). */
  private held = '';
  /** The current line was passed on in part already (a progress bar's frame): pass the rest. */
  private passing = false;
  /** 0: outside a report; 1: the message line is next; 2: in its backtrace and notes. */
  private state: 0 | 1 | 2 = 0;
  /** Blank lines held back: the last one before a header is the report's. */
  private blanks = 0;

  override _transform(chunk: Buffer | string, _enc: BufferEncoding, done: TransformCallback): void {
    let text = this.held + String(chunk);
    this.held = '';
    let out = '';
    for (;;) {
      const nl = text.indexOf('\n');
      if (nl < 0) break;
      out += this.line(text.slice(0, nl + 1));
      text = text.slice(nl + 1);
    }
    if (text !== '') {
      // A partial line: held while it could still be a header, else passed at once.
      if (this.passing || (this.state === 0 && !couldBeHeader(text))) {
        out += this.releaseBlanks() + text;
        this.passing = true;
      } else this.held = text;
    }
    done(null, out);
  }

  override _flush(done: TransformCallback): void {
    const rest = this.held === '' ? '' : this.line(this.held);
    this.held = '';
    done(null, rest + this.releaseBlanks());
  }

  /** One whole line (with its newline): what of it to pass on. */
  private line(l: string): string {
    if (this.passing) {
      this.passing = false;
      return l;
    }
    // Ours, written while a panic report was being printed by another thread: never part of it.
    if (l.startsWith('dgcl: ')) return this.releaseBlanks() + l;
    if (this.state === 1) {
      this.state = 2;
      return '';
    }
    if (this.state === 2 && TRAILER.test(l)) return '';
    this.state = 0;
    if (HEADER.test(l)) {
      this.state = 1;
      if (this.blanks > 0) this.blanks--;
      return this.releaseBlanks();
    }
    if (l === '\n') {
      this.blanks++;
      return '';
    }
    return this.releaseBlanks() + l;
  }

  private releaseBlanks(): string {
    const out = '\n'.repeat(this.blanks);
    this.blanks = 0;
    return out;
  }
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

function couldBeHeader(partial: string): boolean {
  const prefix = "thread '";
  return partial.length < prefix.length ? prefix.startsWith(partial) : partial.startsWith(prefix);
}

/**
 * Runs `node <args>` (bin/dgcl.js and a command line) with stdin and stdout shared and stderr
 * through PanicFilter; resolves to the child's exit code, or ends this process by the signal that
 * ended the child, as the shell expects. The child gets a terminal's Ctrl-C itself (same process
 * group), so SIGINT is not passed on (twice would mean "quit now"); SIGTERM and SIGHUP are (a
 * supervisor signals this process alone). stdout is the child's own: a reader that closes the
 * pipe early ends the child quietly (cli/io.ts), and its exit code 0 is this process's.
 */
export function runFiltered(args: readonly string[]): Promise<number> {
  const tty = process.stderr.isTTY === true;
  const child = spawn(process.execPath, [...process.execArgv, ...args], {
    stdio: ['inherit', 'inherit', 'pipe'],
    // The child's stderr is a pipe: tell it the terminal is behind it (the progress bar).
    // No backtraces: they are dropped anyway, and printed piece by piece over a long time they
    // would interleave with our own lines (DGCL_RAW_STDERR=1 shows everything).
    env: { ...process.env, DGCL_RAW_STDERR: '1', RUST_BACKTRACE: '0', ...(tty ? { DGCL_STDERR_TTY: '1', COLUMNS: String(process.stderr.columns ?? 80) } : {}) },
  });
  // A reader of stderr that went away (EPIPE) costs the messages, not the command: the child's
  // stderr is still read (a full pipe would stall it) and its exit code stays the answer.
  let stderrGone = false;
  const gone = () => {
    stderrGone = true;
  };
  process.stderr.on('error', gone);
  const filtered = child.stderr.pipe(new PanicFilter());
  filtered.on('data', (d: Buffer | string) => {
    if (!stderrGone && !process.stderr.errored) process.stderr.write(d);
  });
  const drained = new Promise<void>((resolve) => filtered.on('end', resolve).on('error', () => resolve()));
  const forward = (signal: NodeJS.Signals) => {
    if (signal !== 'SIGINT') child.kill(signal);
  };
  for (const s of SIGNALS) process.on(s, forward);
  return new Promise<number>((resolve) => {
    child.on('error', (e) => {
      for (const s of SIGNALS) process.removeListener(s, forward);
      if (!stderrGone) process.stderr.write(`dgcl: cannot start the command: ${e.message}\n`);
      resolve(1);
    });
    child.on('close', (code, signal) => {
      void drained.then(() => {
        for (const s of SIGNALS) process.removeListener(s, forward);
        process.stderr.removeListener('error', gone);
        if (signal) {
          process.kill(process.pid, signal);
          resolve(128 + (constants.signals[signal] ?? 0)); // where the signal does not end this process
        } else resolve(code ?? 1);
      });
    });
  });
}
