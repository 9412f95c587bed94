/**
 * Durations as people type them: `90s`, `30m`, `2h`, `1d`, `1h30m`, `500ms`. Strict on purpose:
 * whole numbers, each unit at most once and largest first, no spaces, no sign, more than zero.
 * `ms` (the npm package) reads a bare `30` as 30 milliseconds and `-1h` as a negative duration;
 * an operator meaning 30 minutes would resume every item in flight, so a unit is required.
 */
import { InvalidInputError } from './errors.ts';

/** Milliseconds per unit, largest first (the order a duration must name them in). */
const UNITS = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1_000],
  ['ms', 1],
] as const;

/** `ms` before `m` and `s`: the alternation takes the first unit that matches. */
const PART = /(\d+)(ms|d|h|m|s)/y;

export const DURATION_HINT = 'a duration such as 90s, 30m, 2h, 1d or 1h30m (units d, h, m, s, ms)';

/** Milliseconds of `text`; otherwise InvalidInputError naming `field` and the value (`<field>: must be ...`). */
export function parseDuration(text: unknown, field = 'duration'): number {
  const bad = (why: string) => new InvalidInputError(`must be ${DURATION_HINT}${why}, got ${JSON.stringify(text)}`, { field });
  if (typeof text !== 'string' || text === '') throw bad('');
  let total = 0;
  let lastUnit = -1;
  PART.lastIndex = 0;
  while (PART.lastIndex < text.length) {
    const at = PART.lastIndex;
    const m = PART.exec(text);
    if (m === null || m.index !== at) throw bad('');
    const unit = UNITS.findIndex(([u]) => u === m[2]);
    if (unit <= lastUnit) throw bad(' (each unit once, largest first)');
    lastUnit = unit;
    total += Number(m[1]) * UNITS[unit]![1];
  }
  if (!Number.isSafeInteger(total)) throw bad(' (too large)');
  if (total === 0) throw bad(' (more than zero)');
  return total;
}

/** `2h 5m`, `3d 4h`, `45s`, `120ms`: the two largest units of a duration, for people. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.floor(ms))}ms`;
  const parts: string[] = [];
  let rest = Math.floor(ms / 1000) * 1000;
  for (const [u, size] of UNITS.slice(0, 4)) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${u}`);
      rest %= size;
    }
    if (parts.length === 2) break;
  }
  return parts.join(' ');
}
