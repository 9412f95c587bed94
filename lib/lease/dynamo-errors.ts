/** How DynamoDB SDK errors become the log's typed errors (lease store and coordination records). */
import { type DgclError, InternalError, isDgclError, NotFoundError, PermissionDeniedError, UnavailableError } from '../errors.ts';

const UNAVAILABLE_NAMES = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'Throttling',
  'RequestLimitExceeded',
  'InternalServerError',
  'ServiceUnavailable',
  'ServiceUnavailableException',
  'TransactionConflictException',
  'LimitExceededException',
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
  'CredentialsProviderError',
]);
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_SOCKET',
]);

/**
 * Maps an SDK error to a domain error: throttling, server faults and network failures ->
 * UnavailableError (retry with backoff); a missing table -> NotFoundError; a refusal by IAM ->
 * PermissionDeniedError (grant the action; a retry alone cannot help); anything else (validation)
 * -> InternalError (a bug or a deployment mistake, not retryable).
 */
export function classifyDynamoError(e: unknown, what: string): DgclError {
  if (isDgclError(e)) return e;
  const err = e as {
    name?: string;
    code?: string;
    message?: string;
    $retryable?: unknown;
    $fault?: string;
    $metadata?: { httpStatusCode?: number };
    errors?: Array<{ code?: string }>;
  } | null;
  const name = err?.name ?? '';
  const message = `${what}: ${name || 'error'}${err?.message ? `: ${err.message}` : ''}`;
  if (name === 'ResourceNotFoundException') {
    return new NotFoundError(`${message} (does the lease table exist? create it with createLeaseTable)`, { cause: e });
  }
  if (name === 'AccessDeniedException') {
    return new PermissionDeniedError(`${message} (grant the action on the table to this process's role)`, what, { cause: e });
  }
  const codes = [err?.code, ...(err?.errors ?? []).map((x) => x.code)].filter((c): c is string => !!c);
  if (
    UNAVAILABLE_NAMES.has(name) ||
    codes.some((c) => NETWORK_CODES.has(c)) ||
    err?.$retryable !== undefined ||
    err?.$fault === 'server' ||
    (err?.$metadata?.httpStatusCode ?? 0) >= 500
  ) {
    return new UnavailableError(message, { cause: e });
  }
  return new InternalError(message, { cause: e });
}
