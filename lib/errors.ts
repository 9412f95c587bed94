/**
 * Error kinds, by what the caller must do (SlateDB style):
 *  - INVALID_INPUT: fix the input; nothing was written.
 *  - FENCED: stop; this writer's epoch was superseded, the batch was NOT acknowledged.
 *  - LEASE_HELD / CONFLICT: retry later (someone else holds it, or a race was lost); a CONFLICT
 *    with `retryable: false` (a guarded delete) needs a fresh read first.
 *  - UNAVAILABLE: retry with backoff (storage or lease store did not answer).
 *  - NOT_FOUND: the named experiment/item/field does not exist.
 *  - ITEM_EXISTS / ITEM_NOT_FOUND / ITEM_TERMINAL: a batch does not fit its item's state (a
 *    second creation; no creation yet, or the item was deleted; something after TERMINAL).
 *    Input errors like INVALID_INPUT (their classes extend InvalidInputError, nothing was
 *    written, retrying the same batch cannot help), told apart so a caller can react (e.g.
 *    `create: 'ifMissing'`, or skip an item that already ended).
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
  | 'ITEM_EXISTS'
  | 'ITEM_NOT_FOUND'
  | 'ITEM_TERMINAL'
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

/** The codes of input errors: INVALID_INPUT and the item-state refusals below. */
export const INPUT_ERROR_CODES = ['INVALID_INPUT', 'ITEM_EXISTS', 'ITEM_NOT_FOUND', 'ITEM_TERMINAL'] as const;
export type InputErrorCode = (typeof INPUT_ERROR_CODES)[number];

export class InvalidInputError extends DgclError {
  override readonly name: string = 'InvalidInputError';
  readonly code: InputErrorCode = 'INVALID_INPUT';
  readonly retryable = false;
  /** Dotted path of the offending field, e.g. `batches[2].set.image`. */
  readonly field: string | undefined;
  constructor(message: string, options?: { field?: string; cause?: unknown }) {
    super(options?.field ? `${options.field}: ${message}` : message, options);
    this.field = options?.field;
  }
}

/** A batch creates an item that exists (field `create`). */
export class ItemExistsError extends InvalidInputError {
  override readonly name = 'ItemExistsError';
  override readonly code = 'ITEM_EXISTS' as const;
  constructor(
    message: string,
    readonly itemId: string,
    options?: { field?: string; cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A batch without `create` names an item that does not exist, or was deleted (field `itemId`). */
export class ItemNotFoundError extends InvalidInputError {
  override readonly name = 'ItemNotFoundError';
  override readonly code = 'ITEM_NOT_FOUND' as const;
  constructor(
    message: string,
    readonly itemId: string,
    options?: { field?: string; cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A batch follows the item's TERMINAL event (field `itemId`). */
export class ItemTerminalError extends InvalidInputError {
  override readonly name = 'ItemTerminalError';
  override readonly code = 'ITEM_TERMINAL' as const;
  constructor(
    message: string,
    readonly itemId: string,
    options?: { field?: string; cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Whether `e` is an input error (any InputErrorCode): fix the input, nothing was written. */
export function isInputError(e: unknown): e is InvalidInputError {
  return e instanceof InvalidInputError;
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
  /**
   * A lost race (a lease): retrying later may succeed. False where the same call can only get the
   * same answer (a guarded delete of an item that changed: read it again and decide).
   */
  readonly retryable: boolean;
  constructor(message: string, options?: { cause?: unknown; retryable?: boolean }) {
    super(message, options);
    this.retryable = options?.retryable ?? true;
  }
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
