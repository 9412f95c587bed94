/**
 * Sends an AWS SDK command at most once. The SDK resends a request whose answer it did not get
 * (a timeout, a reset, a 5xx), but the first copy may only be slow: a resent unconditional write
 * can then land after a later write of the same key and bring an old body back (an item marker
 * restored that way made a writer trust a stale cached item: I5). The SDK's retry middleware
 * (finalizeRequest, high priority) calls the middleware added here once per attempt; it refuses
 * the second, and the call fails with the first attempt's error. Used for S3 PUTs
 * (lib/storage/s3.ts) and DynamoDB PutItems (lib/coord/dynamo.ts).
 */
type Handler = (args: never) => Promise<unknown>;

interface OnceCommand {
  middlewareStack: {
    add(middleware: (next: Handler) => Handler, options: { step: 'finalizeRequest'; priority: 'low'; name: string }): void;
  };
}

/** Thrown by the middleware at the SDK's second attempt, which it does not send. */
class ResendRefused extends Error {}

export async function sendOnce<C extends OnceCommand>(cmd: C, send: (cmd: C) => Promise<unknown>): Promise<void> {
  let attempts = 0;
  let first: unknown;
  cmd.middlewareStack.add(
    (next) => async (args) => {
      if (attempts++ > 0) throw new ResendRefused('not resent');
      try {
        return await next(args);
      } catch (e) {
        first = e;
        throw e;
      }
    },
    { step: 'finalizeRequest', priority: 'low', name: 'dgclSendOnce' },
  );
  try {
    await send(cmd);
  } catch (e) {
    throw e instanceof ResendRefused ? first : e;
  }
}
