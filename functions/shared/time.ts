/**
 * The invocation's time budget. Lambda tells how much time is left
 * (`context.getRemainingTimeInMillis()`); handlers stop waiting a little before that, so they can
 * still answer (report unfinished SQS records as failures instead of timing out the whole batch).
 * Outside Lambda (no such function on the context) the budget is unbounded.
 */
import type { Context } from 'aws-lambda';
import { systemClock } from '../../lib/clock.ts';
import { UnavailableError } from '../../lib/errors.ts';

/** Writer and maintainer leases never get a ttl below this. */
export const MIN_LEASE_TTL_MS = 5_000;

export function remainingMs(context: Partial<Context> | undefined): number {
  const f = context?.getRemainingTimeInMillis;
  if (typeof f !== 'function') return Number.POSITIVE_INFINITY;
  const ms = f.call(context);
  return Number.isFinite(ms) ? Math.max(0, ms) : Number.POSITIVE_INFINITY;
}

/**
 * Absolute time (epoch ms) at which a handler stops waiting: the remaining time less a reserve
 * for answering (10% of it, between 500 ms and `maxReserveMs`).
 */
export function deadlineOf(context: Partial<Context> | undefined, maxReserveMs = 3_000): number {
  const left = remainingMs(context);
  if (left === Number.POSITIVE_INFINITY) return left;
  const reserve = Math.min(maxReserveMs, Math.max(500, left * 0.1));
  return systemClock.nowMs() + Math.max(0, left - reserve);
}

/** Milliseconds until `deadline` (may be negative; Infinity when unbounded). */
export function untilDeadline(deadline: number): number {
  return deadline - systemClock.nowMs();
}

/**
 * Lease duration for a log opened in this invocation: the remaining Lambda time, within
 * [MIN_LEASE_TTL_MS, maxMs]. While the container runs, the log renews every ttl/3; once it is
 * frozen or killed at its timeout, the slot frees at most one invocation's length later.
 */
export function leaseTtlFor(context: Partial<Context> | undefined, maxMs: number): number {
  const left = remainingMs(context);
  return Math.floor(Math.max(MIN_LEASE_TTL_MS, Math.min(maxMs, left)));
}

export type Raced<T> = { done: true; value: T } | { done: false };

/**
 * Waits for `p` until `deadline`. `{done: false}` means the deadline came first; `p` goes on in
 * the background (its outcome is ignored: a late append is still idempotent on redelivery).
 * Rejections of `p` before the deadline are rethrown.
 */
export async function beforeDeadline<T>(p: Promise<T>, deadline: number): Promise<Raced<T>> {
  const wait = untilDeadline(deadline);
  if (wait === Number.POSITIVE_INFINITY) return { done: true, value: await p };
  if (wait <= 0) {
    p.catch(() => undefined); // goes on in the background; its outcome is ignored
    return { done: false };
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Raced<T>>((resolve) => {
    timer = setTimeout(() => resolve({ done: false }), Math.max(0, wait));
  });
  p.catch(() => undefined); // a rejection after the deadline is nobody's business
  try {
    return await Promise.race([p.then((value) => ({ done: true, value }) as Raced<T>), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** `beforeDeadline`, throwing UnavailableError (retryable) when the deadline comes first. */
export async function withinDeadline<T>(p: Promise<T>, deadline: number, what: string): Promise<T> {
  const r = await beforeDeadline(p, deadline);
  if (r.done) return r.value;
  throw new UnavailableError(`${what} did not finish before the invocation's deadline; it may or may not have taken effect (retrying is safe)`);
}

/** Runs `fn` over `items` with at most `limit` in flight; results in input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  });
  await Promise.all(workers);
  return out;
}
