/**
 * Exit codes of `dgcl`, after BSD's sysexits(3) where one fits, so a script can tell "fix the
 * input" from "retry later" from "wrong name" without parsing stderr (README, "Errors and exit
 * codes"):
 *
 *   0   ok
 *   1   any other error: FENCED, INTERNAL, a CONFLICT a retry cannot settle
 *   2   bad usage or input, or an item/field that does not exist (INVALID_INPUT, ITEM_EXISTS,
 *       ITEM_NOT_FOUND, ITEM_TERMINAL, NOT_FOUND); nothing was written
 *   65  EX_DATAERR: the log holds damaged data (CORRUPT)
 *   66  EX_NOINPUT: the log does not exist (LOG_NOT_FOUND); nothing was created
 *   75  EX_TEMPFAIL: try again later (UNAVAILABLE, LEASE_HELD, a retryable CONFLICT)
 *   77  EX_NOPERM: a file, folder or object was refused (PERMISSION_DENIED)
 */
import type { DgclError } from '../lib/errors.ts';
import { INPUT_ERROR_CODES } from '../lib/errors.ts';

export const EXIT = {
  OK: 0,
  ERROR: 1,
  USAGE: 2,
  DATAERR: 65,
  NOINPUT: 66,
  TEMPFAIL: 75,
  NOPERM: 77,
} as const;

/** The exit code of an error `code` (as DgclError.code, or a maintenance failure's `code`). */
export function exitCodeOfCode(code: string, retryable?: boolean): number {
  if ((INPUT_ERROR_CODES as readonly string[]).includes(code) || code === 'NOT_FOUND') return EXIT.USAGE;
  switch (code) {
    case 'LOG_NOT_FOUND':
      return EXIT.NOINPUT;
    case 'CORRUPT':
      return EXIT.DATAERR;
    case 'PERMISSION_DENIED':
      return EXIT.NOPERM;
    case 'UNAVAILABLE':
    case 'LEASE_HELD':
      return EXIT.TEMPFAIL;
    case 'CONFLICT':
      return retryable === false ? EXIT.ERROR : EXIT.TEMPFAIL;
    default:
      return EXIT.ERROR;
  }
}

export function exitCodeOf(e: DgclError): number {
  return exitCodeOfCode(e.code, e.retryable);
}

/**
 * A maintenance pass that ran with failed (or skipped) steps: its report was printed; the exit
 * code is the first failure's (every step is retried by the next pass).
 */
export class MaintenanceFailed extends Error {
  readonly exitCode: number;
  constructor(failures: ReadonlyArray<{ step: string; code: string; message: string; skipped?: true }>) {
    const shown = failures.map((f) => `${f.step}: ${f.code}${f.skipped ? ' (skipped)' : ''}: ${f.message}`).join('; ');
    super(`${failures.length} step${failures.length === 1 ? '' : 's'} failed (${shown}); the next run retries them`);
    const first = failures.find((f) => !f.skipped) ?? failures[0]!;
    // Never 0, and never "bad usage": the command line was fine.
    const code = exitCodeOfCode(first.code);
    this.exitCode = code === EXIT.USAGE || code === EXIT.OK ? EXIT.ERROR : code;
  }
}

/**
 * `dgcl resume --send` printed every item, and some were not sent (their fold or their send
 * failed): the exit code is the first failure's that a retry cannot help, else 75 (sending
 * again is harmless).
 */
export class ResumesNotSent extends Error {
  readonly exitCode: number;
  constructor(failures: ReadonlyArray<{ itemId: string; code: string; message: string; retryable: boolean }>, stalled: number) {
    const shown = failures
      .slice(0, 5)
      .map((f) => `${f.itemId}: ${f.code}: ${f.message}`)
      .join('; ');
    super(`${failures.length} of ${stalled} stalled items were not sent (${shown}${failures.length > 5 ? '; ...' : ''}); sending again is harmless`);
    const permanent = failures.find((f) => !f.retryable);
    const code = permanent ? exitCodeOfCode(permanent.code, false) : EXIT.TEMPFAIL;
    this.exitCode = code === EXIT.USAGE || code === EXIT.OK ? EXIT.ERROR : code;
  }
}
