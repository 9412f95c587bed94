/** The error of a filter text that does not parse, or compares what can never match. */
import { InvalidInputError } from '../errors.ts';

/**
 * INVALID_INPUT naming where the text went wrong: `--where: column 12: expected a value after '<'`.
 * `field` is the text's name (`where`, or the CLI's `--where`); `column` counts characters (code
 * points) from 1.
 */
export class WhereSyntaxError extends InvalidInputError {
  override readonly name = 'WhereSyntaxError';
  constructor(
    source: string,
    readonly column: number,
    what: string,
  ) {
    super(`column ${column}: ${what}`, { field: source });
  }
}

/** How a piece of the text is shown in a message: quoted, and cut when long. */
export function shown(raw: string): string {
  const cps = Array.from(raw);
  const s = cps.length > 40 ? `${cps.slice(0, 40).join('')}...` : raw;
  return s.includes("'") ? JSON.stringify(s) : `'${s}'`;
}
