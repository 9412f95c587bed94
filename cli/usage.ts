/** Bad usage of the command line (a missing or malformed option): exit 2, the message on stderr. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}
