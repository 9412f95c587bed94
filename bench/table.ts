/**
 * The bench's one table: rows of (figure, ours, baseline, ratio), rendered as Markdown. Pure (no
 * I/O, no clocks) so the fast test project can check the formatting.
 */

export interface BenchRow {
  figure: string;
  ours: string;
  baseline: string;
  /** ours / baseline as printed, e.g. "1.78x"; '' when the figure has no baseline. */
  ratio: string;
}

export interface BenchMeta {
  mode: 'quick' | 'normal' | 'long';
  date: string;
  node: string;
  /** `uptime` at the start of the run: the machine is shared, so ratios, not times. */
  load: string;
  sizes: number[];
}

/** `a / b` as "1.78x"; '' when either is missing or b is 0. */
export function ratio(a: number | undefined, b: number | undefined, digits = 2): string {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return '';
  return `${(a / b).toFixed(digits)}x`;
}

/** 12,345 (integers with thousands separators, fixed to en-US so results diff cleanly). */
export function int(x: number): string {
  return Math.round(x).toLocaleString('en-US');
}

export function msText(x: number): string {
  return `${x < 10 ? x.toFixed(2) : x.toFixed(1)} ms`;
}

/** Bytes as "149 MB" / "618 B" (decimal units, like the seed's table). */
export function bytes(x: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let u = 0;
  while (x >= 1000 && u < units.length - 1) {
    x /= 1000;
    u++;
  }
  return `${u === 0 ? Math.round(x) : x.toFixed(x < 10 ? 2 : x < 100 ? 1 : 0)} ${units[u]}`;
}

/** Size as "10^5" when a power of ten, else with separators. */
export function sizeText(n: number): string {
  const e = Math.log10(n);
  return Number.isInteger(e) ? `10^${e}` : int(n);
}

/** A Markdown cell: pipes escaped, newlines flattened, so a value cannot break the table. */
function cell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
}

export function formatTable(rows: readonly BenchRow[], meta: BenchMeta): string {
  const head = [
    `# datagen-checkpoint-log bench (${meta.mode}${meta.mode === 'quick' ? ': small sizes and counts, indicative only' : ''})`,
    '',
    `${meta.date}, node ${meta.node}, sizes ${meta.sizes.map(sizeText).join(', ')} events.`,
    `Machine load at the start: \`${meta.load.trim()}\`. All baselines ran in the same run; compare ratios, not times.`,
    '',
  ];
  return [...head, formatRows(rows)].join('\n');
}

/** The table alone (header line, separator, one line per row), ending in a newline. */
export function formatRows(rows: readonly BenchRow[]): string {
  const body = rows.map((r) => `| ${cell(r.figure)} | ${cell(r.ours)} | ${cell(r.baseline)} | ${cell(r.ratio)} |`);
  return ['| figure | ours | baseline | ratio |', '|---|---|---|---|', ...body, ''].join('\n');
}
