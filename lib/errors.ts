/**
 * Error kinds, by what the caller must do (SlateDB style):
 *  - INVALID_INPUT: fix the input; nothing was written.
 *  - FENCED: stop; this writer's epoch was superseded, the batch was NOT acknowledged.
 *  - LEASE_HELD / CONFLICT: retry later (someone else holds it, or a race was lost).
 *  - UNAVAILABLE: retry with backoff (storage or lease store did not answer).
 *  - NOT_FOUND: the named experiment/item/field does not exist.
 *  - CORRUPT: alarm; the log holds something that cannot be decoded or verified.
 *  - INTERNAL: a bug.
 */
export type ErrorCode =
  | 'INVALID_INPUT'
  | 'FENCED'
  | 'LEASE_HELD'
  | 'CONFLICT'
  | 'UNAVAILABLE'
  | 'NOT_FOUND'
  | 'CORRUPT'
  | 'INTERNAL';

export abstract class DgclError extends Error {
  abstract readonly code: ErrorCode;
  /** Whether retrying the same call later may succeed. */
  abstract readonly retryable: boolean;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export class InvalidInputError extends DgclError {
  override readonly name = 'InvalidInputError';
  readonly code = 'INVALID_INPUT' as const;
  readonly retryable = false;
  /** Dotted path of the offending field, e.g. `batches[2].set.image`. */
  readonly field: string | undefined;
  constructor(message: string, options?: { field?: string; cause?: unknown }) {
    super(options?.field ? `${options.field}: ${message}` : message, options);
    this.field = options?.field;
  }
}

export class FencedError extends DgclError {
  override readonly name = 'FencedError';
  readonly code = 'FENCED' as const;
  readonly retryable = false;
}

export class LeaseHeldError extends DgclError {
  override readonly name = 'LeaseHeldError';
  readonly code = 'LEASE_HELD' as const;
  readonly retryable = true;
  constructor(
    message: string,
    readonly holder: { key: string; owner: string; epoch: number; expiresAtMs: number } | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export class ConflictError extends DgclError {
  override readonly name = 'ConflictError';
  readonly code = 'CONFLICT' as const;
  readonly retryable = true;
}

export class UnavailableError extends DgclError {
  override readonly name = 'UnavailableError';
  readonly code = 'UNAVAILABLE' as const;
  readonly retryable = true;
}

export class NotFoundError extends DgclError {
  override readonly name = 'NotFoundError';
  readonly code = 'NOT_FOUND' as const;
  readonly retryable = false;
}

export class CorruptError extends DgclError {
  override readonly name = 'CorruptError';
  readonly code = 'CORRUPT' as const;
  readonly retryable = false;
}

export class InternalError extends DgclError {
  override readonly name = 'InternalError';
  readonly code = 'INTERNAL' as const;
  readonly retryable = false;
}

export function isDgclError(e: unknown): e is DgclError {
  return e instanceof DgclError;
}
