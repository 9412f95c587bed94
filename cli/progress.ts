/**
 * Progress of long commands (`dgcl append` of a large stdin, `dgcl maintain`) on stderr, drawn
 * by cli-progress. Only for a person at a terminal: `--json` (a program reading the output) or
 * a stderr that is not a TTY (a pipe, a file, CI logs) gets nothing at all, so captured output
 * never holds bar frames. stdout does not decide: `dgcl append < big.jsonl > acks.jsonl` is
 * the case a bar is for.
 */
import cliProgress from 'cli-progress';

/** What decides whether a bar is drawn (the stream it would be drawn on, and the flags). */
export interface ProgressContext {
  json?: boolean | undefined;
  stream: { isTTY?: boolean | undefined };
  env: Record<string, string | undefined>;
}

/** A bar only on a real, capable terminal and never for machine-readable output. */
export function wantsProgress(c: ProgressContext): boolean {
  if (c.json === true) return false;
  if (c.stream.isTTY !== true) return false;
  // A terminal that cannot move the cursor would print every frame on its own line.
  return c.env.TERM !== 'dumb';
}

export interface Progress {
  /** Begin a stage; `total` null while it is not known (then no bar, just the count). */
  stage(label: string, total: number | null, unit: Unit): void;
  /** The stage's value; `total` and `detail` (e.g. the step just done) when they change. */
  update(value: number, total?: number | null, detail?: string): void;
  /** Leave the last frame on its own line (idempotent; call it before printing anything). */
  stop(): void;
}

export type Unit = 'bytes' | 'batches' | 'steps';

const QUIET: Progress = { stage: () => undefined, update: () => undefined, stop: () => undefined };

/** The bar of `c` (a no-op where wantsProgress says no). */
export function progress(c: ProgressContext & { stream: NodeJS.WritableStream & { isTTY?: boolean } }): Progress {
  return wantsProgress(c) ? new BarProgress(c.stream) : QUIET;
}

/** `1.5 MiB`-style sizes for byte counts, plain integers otherwise. */
export function formatAmount(n: number, unit: Unit): string {
  if (unit !== 'bytes') return String(n);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

/** The text of one frame, without the bar itself (tests read it). */
export function frameText(p: { label: string; value: number; total: number | null; unit: Unit; detail: string }): { head: string; tail: string } {
  const amount = p.total === null ? formatAmount(p.value, p.unit) : `${formatAmount(p.value, p.unit)}/${formatAmount(p.total, p.unit)}`;
  const suffix = p.unit === 'bytes' ? '' : ` ${p.unit}`;
  return { head: p.label, tail: `${amount}${suffix}${p.detail ? ` (${p.detail})` : ''}` };
}

class BarProgress implements Progress {
  private bar: cliProgress.SingleBar | null = null;
  private label = '';
  private unit: Unit = 'steps';
  private total: number | null = null;
  private detail = '';

  constructor(private readonly stream: NodeJS.WritableStream) {}

  stage(label: string, total: number | null, unit: Unit): void {
    this.stop();
    this.label = label;
    this.unit = unit;
    this.total = total;
    this.detail = '';
    this.bar = new cliProgress.SingleBar(
      {
        stream: this.stream,
        // The bar only where the total is known; otherwise the running count and time.
        format: (options, params) => {
          const { head, tail } = frameText({ label: this.label, value: params.value, total: this.total, unit: this.unit, detail: this.detail });
          const time = `${Math.round(((params.stopTime ?? Date.now()) - params.startTime) / 1000)}s`;
          if (this.total === null) return `${head} ${tail} | ${time}`;
          return `${head} ${cliProgress.Format.BarFormat(params.progress, options)} ${tail} | ${time}`;
        },
        barsize: 30,
        hideCursor: false, // a process killed mid-bar must not leave the terminal without a cursor
        gracefulExit: false, // Ctrl-C keeps its default meaning (the process ends)
      },
      cliProgress.Presets.shades_classic,
    );
    // cli-progress divides by the total: an unknown one stands at 1 and is never shown.
    this.bar.start(total ?? 1, 0);
  }

  update(value: number, total?: number | null, detail?: string): void {
    if (!this.bar) return;
    if (total !== undefined) {
      this.total = total;
      this.bar.setTotal(total ?? Math.max(1, value));
    }
    if (detail !== undefined) this.detail = detail;
    this.bar.update(value);
  }

  stop(): void {
    this.bar?.stop();
    this.bar = null;
  }
}
