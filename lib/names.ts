/**
 * Pipeline and experiment names. They become path segments of the log
 * URI, so they are checked before any I/O: 1-128 characters of `[A-Za-z0-9._-]`, and not `.`
 * or `..` (which would walk the directory tree).
 */
import { InvalidInputError } from './errors.ts';

export type NameKind = 'pipeline' | 'experiment';

const NAME_RE = /^[A-Za-z0-9._-]{1,128}$/;

/** Returns `v` when it is a valid name of `kind`, else throws InvalidInputError (field = kind). */
export function validateName(kind: NameKind, v: unknown): string {
  if (typeof v === 'string' && NAME_RE.test(v) && v !== '.' && v !== '..') return v;
  throw new InvalidInputError(
    `invalid ${kind} name ${describe(v)}: must be 1-128 characters of [A-Za-z0-9._-] and not "." or ".."`,
    { field: kind },
  );
}

function describe(v: unknown): string {
  if (typeof v === 'string') {
    const shown = v.length > 160 ? `${v.slice(0, 160)}...` : v;
    return `${JSON.stringify(shown)}${v.length > 160 ? ` (${v.length} characters)` : ''}`;
  }
  if (v === null) return 'null';
  if (v === undefined) return '(missing)';
  if (Array.isArray(v)) return '(an array)';
  return `(a ${typeof v})`;
}
