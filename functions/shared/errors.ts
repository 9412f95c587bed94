/**
 * Errors as Lambda reports them. The Node.js runtime turns a thrown error into
 * `{errorType: error.name, errorMessage, trace}`, and Step Functions `Retry`/`Catch` match on
 * `errorType`, so every error leaving a handler is one of a closed set of names:
 * the DgclError kinds of lib/errors.ts (InvalidInputError and its subclasses ItemExistsError,
 * ItemNotFoundError, ItemTerminalError, FencedError, LeaseHeldError,
 * ConflictError, UnavailableError, NotFoundError and its subclass LogNotFoundError,
 * PermissionDeniedError, CorruptError, InternalError) plus
 * ConfigurationError (functions/shared/config.ts). Anything else is wrapped: a middy timeout
 * becomes UnavailableError (retry), an unknown error InternalError (a bug; the original is the
 * `cause` and is logged).
 */
import { DgclError, InternalError, InvalidInputError, UnavailableError } from '../../lib/errors.ts';

export function toLambdaError(e: unknown): DgclError {
  if (e instanceof DgclError) return e;
  const err = e as { name?: unknown; message?: unknown } | null;
  const name = typeof err?.name === 'string' ? err.name : typeof e;
  const message = typeof err?.message === 'string' ? err.message : String(e);
  if (name === 'TimeoutError') {
    return new UnavailableError(`the invocation ran out of time before it finished (${message}); nothing unacknowledged may be assumed written`, { cause: e });
  }
  return new InternalError(`unexpected ${name}: ${message}`, { cause: e });
}

/** Whether the record/item failed because of its input (retrying the same input cannot help). */
export function isInvalid(e: unknown): boolean {
  return e instanceof InvalidInputError;
}

/** What reports and logs show of an error. */
export interface ErrorSummary {
  name: string;
  code: string;
  message: string;
  retryable: boolean;
  field?: string;
}

export function summarizeError(e: unknown): ErrorSummary {
  const d = toLambdaError(e);
  const s: ErrorSummary = { name: d.name, code: d.code, message: d.message, retryable: d.retryable };
  if (d instanceof InvalidInputError && d.field !== undefined) s.field = d.field;
  return s;
}
