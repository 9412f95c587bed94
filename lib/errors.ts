/**
 * Error kinds, by what the caller must do (SlateDB style):
 *  - INVALID_INPUT: fix the input; nothing was written.
 *  - FENCED: stop; this writer's epoch was superseded, the batch was NOT acknowledged.
 *  - LEASE_HELD / CONFLICT: retry later (someone else holds it, or a race was lost); a CONFLICT
 *    with `retryable: false` (a guarded delete) needs a fresh read first.
 *  - UNAVAILABLE: retry with backoff (storage or lease store did not answer).
 *  - NOT_FOUND: the named item/field/event does not exist.
 *  - LOG_NOT_FOUND: a read or maintenance names a log that does not exist (a misspelt root,
 *    pipeline or experiment); nothing was created. Its class extends NotFoundError.
 *  - PERMISSION_DENIED: the process may not read or write a file or object (EACCES, EPERM, a
 *    read-only folder, S3 AccessDenied, DynamoDB AccessDeniedException); fix the permissions, a
 *    retry alone cannot help.
 *  - ITEM_EXISTS / ITEM_NOT_FOUND / ITEM_TERMINAL: a batch does not fit its item's state (a
 *    second creation; no creation yet, or the item was deleted; something after TERMINAL).
 *    Input errors like INVALID_INPUT (their classes extend InvalidInputError, nothing was
 *    written, retrying the same batch cannot help), told apart so a caller can react (e.g.
 *    `create: 'ifMissing'`, or skip an item that already ended).
 *  - CORRUPT: alarm; the log holds something that cannot be decoded or verified (a damaged
 *    file: the same decode error on fresh handles with the layout unchanged).
 *  - INTERNAL: a bug.
 */
export type ErrorCode =
  | 'INVALID_INPUT'
  | 'FENCED'
  | 'LEASE_HELD'
  | 'CONFLICT'
  | 'UNAVAILABLE'
  | 'NOT_FOUND'
  | 'LOG_NOT_FOUND'
  | 'PERMISSION_DENIED'
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
  override readonly name: string = 'NotFoundError';
  readonly code: 'NOT_FOUND' | 'LOG_NOT_FOUND' = 'NOT_FOUND';
  readonly retryable = false;
}

/**
 * The log a read or maintenance names does not exist (nothing was created). The message names
 * the log's place and what does exist near it (the pipeline's experiments, or the root's
 * pipelines, or that the root itself is missing or not a folder). A NotFoundError, so code that
 * takes "not found" for "nothing there yet" keeps working.
 */
export class LogNotFoundError extends NotFoundError {
  override readonly name = 'LogNotFoundError';
  override readonly code = 'LOG_NOT_FOUND' as const;
  constructor(
    message: string,
    /** The log's URI (`.../datagen_checkpoints/<pipeline>/<experiment>/log.lance`). */
    readonly uri: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Storage refused the access (EACCES, EPERM, read-only file system, S3 AccessDenied). */
export class PermissionDeniedError extends DgclError {
  override readonly name = 'PermissionDeniedError';
  readonly code = 'PERMISSION_DENIED' as const;
  readonly retryable = false;
  constructor(
    message: string,
    /** The file, folder or object refused. */
    readonly path: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
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
