/**
 * The lease rules, once, for every backend (Powertools style: the persistence layers only store
 * records with conditional writes; what "free", "current" and "next epoch" mean lives here).
 *
 * A stored record is a `Lease`. A released record keeps its epoch and has `owner: ''` and
 * `expiresAtMs: 0`, so the epoch counter survives release and never goes backwards.
 * Backends whose conditions run on a server (DynamoDB) restate `isFree`/`isCurrent` as
 * condition expressions; keep the two in step (see lib/lease/dynamo.ts `conditions`).
 */
import { randomUUID } from 'node:crypto';
import { FencedError, InvalidInputError, LeaseHeldError } from '../errors.ts';
import type { Lease } from './types.ts';

/**
 * A record as a backend stores it: the lease plus the token of the acquire call that wrote it.
 * The token is never part of a Lease handed to callers.
 */
export interface LeaseRecord extends Lease {
  /** Unique per acquire call (not per request); absent on records written before tokens. */
  acquireToken?: string;
}

/** The `owner` of a released record. */
export const RELEASED_OWNER = '';

/** Upper bound for a lease's ttl: leases are short-lived by design (and keeps dates sane). */
export const MAX_TTL_MS = 7 * 24 * 3600 * 1000;

/** Whether nobody holds the record: never acquired, released, or expired at `nowMs`. */
export function isFree(record: Lease | null, nowMs: number): boolean {
  return record === null || isReleased(record) || isExpired(record, nowMs);
}

export function isReleased(record: Lease): boolean {
  return record.owner === RELEASED_OWNER;
}

/** A lease is expired from its `expiresAtMs` on (inclusive). */
export function isExpired(record: Lease, nowMs: number): boolean {
  return record.expiresAtMs <= nowMs;
}

/**
 * Whether `owner` may take the key now. Any unexpired holder blocks, including `owner` itself:
 * owner strings are opaque and may be shared (two writers in one process), so a re-acquire must
 * never silently fence the caller's own live lease. A restarted process waits for expiry.
 */
export function canAcquire(record: Lease | null, nowMs: number): boolean {
  return isFree(record, nowMs);
}

/** A fresh token for one acquire call; every resend of that call's request carries the same one. */
export function newAcquireToken(): string {
  return randomUUID();
}

/**
 * Whether `record` is this very acquire call's own write: a request whose answer was lost and
 * that the SDK resent finds the key held by the lease its first try created, and must return
 * that lease instead of LeaseHeldError (else the caller's own slot leaks until expiry).
 *
 * Why the token is enough: only an acquire writes `acquireToken`, and a record keeps the token
 * of the acquire that made its current epoch (renew keeps it, release drops it). So a record
 * with our token, not released, is the epoch our call created and nobody took since. The owner
 * string cannot stand in for it: owners may be shared by two writers of one process.
 */
export function isOwnAcquire(record: LeaseRecord | null, token: string): record is LeaseRecord {
  return record !== null && !isReleased(record) && record.acquireToken === token;
}

/** The epoch a new acquire gets: previous + 1, or 1 for a never-seen key. */
export function nextEpoch(record: Lease | null): number {
  return (record?.epoch ?? 0) + 1;
}

/** The expiry of a lease taken or renewed at `nowMs`. */
export function expiryAt(nowMs: number, ttlMs: number): number {
  return nowMs + ttlMs;
}

/**
 * Whether `lease` is still the key's current holder (same owner, same epoch, not released).
 * Expiry is deliberately not checked: a lease nobody took over is still current.
 */
export function isCurrent(record: Lease | null, lease: Lease): boolean {
  return (
    record !== null &&
    !isReleased(record) &&
    record.key === lease.key &&
    record.epoch === lease.epoch &&
    record.owner === lease.owner
  );
}

/** Renew is allowed exactly when the lease is current (an expired one nobody took may renew). */
export function canRenew(record: Lease | null, lease: Lease): boolean {
  return isCurrent(record, lease);
}

/** The record an acquire writes. */
export function acquiredRecord(
  record: Lease | null,
  key: string,
  owner: string,
  nowMs: number,
  ttlMs: number,
): Lease {
  return { key, owner, epoch: nextEpoch(record), expiresAtMs: expiryAt(nowMs, ttlMs) };
}

/** The record a renew writes. */
export function renewedRecord(lease: Lease, nowMs: number, ttlMs: number): Lease {
  return { ...pick(lease), expiresAtMs: expiryAt(nowMs, ttlMs) };
}

/** The record a release writes: epoch kept, owner emptied, expiry 0. */
export function releasedRecord(lease: Lease): Lease {
  return { key: lease.key, owner: RELEASED_OWNER, epoch: lease.epoch, expiresAtMs: 0 };
}

/** A human-readable description of a record, for error messages. */
export function describeRecord(record: Lease | null, nowMs?: number): string {
  if (record === null) return 'no record';
  if (isReleased(record)) return `released at epoch ${record.epoch}`;
  const left = nowMs === undefined ? '' : `, ${record.expiresAtMs - nowMs} ms left`;
  return `held by ${JSON.stringify(record.owner)} at epoch ${record.epoch} until ${record.expiresAtMs}${left}`;
}

export function validateKey(key: unknown): string {
  if (typeof key !== 'string' || key.length === 0 || key.length > 1024) {
    throw new InvalidInputError('lease key must be a string of 1-1024 characters', { field: 'key' });
  }
  return key;
}

export function validateOwner(owner: unknown): string {
  if (typeof owner !== 'string' || owner.length === 0 || owner.length > 512) {
    throw new InvalidInputError('lease owner must be a string of 1-512 characters', { field: 'owner' });
  }
  return owner;
}

export function validateEpochFloor(epoch: unknown): number {
  if (typeof epoch !== 'number' || !Number.isSafeInteger(epoch) || epoch < 0) {
    throw new InvalidInputError('epoch must be an integer >= 0', { field: 'epoch' });
  }
  return epoch;
}

export function validateTtl(ttlMs: unknown): number {
  if (typeof ttlMs !== 'number' || !Number.isSafeInteger(ttlMs) || ttlMs <= 0 || ttlMs > MAX_TTL_MS) {
    throw new InvalidInputError(`ttlMs must be an integer in 1..${MAX_TTL_MS}`, { field: 'ttlMs' });
  }
  return ttlMs;
}

/** Checks the shape of a lease handed back by a caller (renew/release/assertCurrent). */
export function validateLease(lease: unknown): Lease {
  const l = lease as Partial<Lease> | null;
  if (
    l === null ||
    typeof l !== 'object' ||
    !Number.isSafeInteger(l.epoch) ||
    (l.epoch as number) < 1 ||
    typeof l.expiresAtMs !== 'number'
  ) {
    throw new InvalidInputError('not a lease (key, owner, epoch >= 1, expiresAtMs)', { field: 'lease' });
  }
  validateKey(l.key);
  validateOwner(l.owner);
  return pick(l as Lease);
}

/** A plain copy with exactly the Lease fields. */
export function pick(l: Lease): Lease {
  return { key: l.key, owner: l.owner, epoch: l.epoch, expiresAtMs: l.expiresAtMs };
}

/**
 * The FencedError the lease stores throw: still a `FencedError` (code FENCED, `name`
 * 'FencedError'), plus the record found instead of the caller's lease (null if none).
 */
export class LeaseFencedError extends FencedError {
  constructor(
    readonly lease: Lease,
    readonly current: Lease | null,
    options?: { cause?: unknown; nowMs?: number },
  ) {
    super(
      `lease ${JSON.stringify(lease.key)} epoch ${lease.epoch} of ${JSON.stringify(lease.owner)} ` +
        `is no longer current (${describeRecord(current, options?.nowMs)})`,
      options,
    );
  }
}

/** The LeaseHeldError for an acquire that found `record` held. */
export function leaseHeld(key: string, record: Lease, nowMs: number, cause?: unknown): LeaseHeldError {
  return new LeaseHeldError(`lease ${JSON.stringify(key)} is ${describeRecord(record, nowMs)}`, pick(record), {
    cause,
  });
}
