/**
 * Taking every lease of a log at once (lib/log/admin/lease-keys.ts) and holding them while a
 * command works: each is tried until it is free or `waitMs` has passed (a holder that died frees
 * its lease within one ttl), then LEASE_HELD naming every holder, with the leases taken so far
 * given back. Taken, each is renewed in the background (LeaseKeeper); `check()` throws once one
 * was lost or expired (renewals failing), so the command stops before it does more under a
 * lease it may no longer hold.
 */
import { unlink } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { Clock } from '../../clock.ts';
import { ConflictError, LeaseHeldError, UnavailableError } from '../../errors.ts';
import { errCode } from '../../fsutil.ts';
import { LocalLeaseStore } from '../../lease/local.ts';
import { LeaseKeeper } from '../../lease/slots.ts';
import type { Lease, LeaseStore } from '../../lease/types.ts';
import type { LeaseKey } from './lease-keys.ts';
import type { TableRecords } from './table-records.ts';

const FIRST_WAIT_MS = 50;
const MAX_WAIT_MS = 1_000;

export interface TakeOptions {
  owner: string;
  ttlMs: number;
  waitMs: number;
  clock: Clock;
}

interface Held {
  key: LeaseKey;
  keeper: LeaseKeeper;
}

export class HeldLeases {
  private constructor(
    private readonly store: LeaseStore,
    private readonly held: Held[],
  ) {}

  /** Takes every key, or none (LeaseHeldError naming the holders; other errors as thrown). */
  static async take(store: LeaseStore, keys: readonly LeaseKey[], o: TakeOptions): Promise<HeldLeases> {
    const taken: Array<{ key: LeaseKey; lease: Lease }> = [];
    let pending = [...keys];
    const deadline = o.clock.nowMs() + o.waitMs;
    let backoff = FIRST_WAIT_MS;
    try {
      for (;;) {
        const held: Array<{ key: LeaseKey; error: LeaseHeldError | ConflictError }> = [];
        const tries = await Promise.allSettled(pending.map((k) => store.acquire(k.key, o.owner, o.ttlMs)));
        let failure: unknown;
        tries.forEach((t, i) => {
          const key = pending[i]!;
          if (t.status === 'fulfilled') taken.push({ key, lease: t.value });
          else if (t.reason instanceof LeaseHeldError || (t.reason instanceof ConflictError && t.reason.retryable)) held.push({ key, error: t.reason });
          else failure ??= t.reason;
        });
        if (failure !== undefined) throw failure;
        if (held.length === 0) break;
        pending = held.map((h) => h.key);
        const now = o.clock.nowMs();
        if (now >= deadline) throw stillHeld(held, o.waitMs);
        const firstFree = Math.min(...held.map((h) => (h.error instanceof LeaseHeldError ? (h.error.holder?.expiresAtMs ?? Infinity) : now)));
        await o.clock.sleep(Math.max(1, Math.min(backoff, firstFree - now, deadline - now)));
        backoff = Math.min(backoff * 2, MAX_WAIT_MS);
      }
    } catch (e) {
      await Promise.allSettled(taken.map((t) => store.release(t.lease)));
      throw e;
    }
    return new HeldLeases(
      store,
      taken.map((t) => ({ key: t.key, keeper: new LeaseKeeper(store, t.lease, { ttlMs: o.ttlMs, clock: o.clock }) })),
    );
  }

  get count(): number {
    return this.held.length;
  }

  /** Throws unless every lease is still held (not lost, not expired). */
  check(): void {
    for (const h of this.held) {
      if (h.keeper.lost) throw h.keeper.lostReason!;
      if (h.keeper.expired()) {
        throw new UnavailableError(`the ${h.key.what} lease ${h.key.key} expired while held (its renewals failed: ${String(h.keeper.lastError)}); stopped before doing more: run the command again`);
      }
    }
  }

  /**
   * Gives back the leases of keys `which` picks: a shared key's record is released (its epoch
   * kept), a scoped one's released and deleted (`records`: the DynamoDB table; a local store's
   * record file). Returns how many records were released or deleted.
   */
  async end(records: TableRecords | null, which: (k: LeaseKey) => boolean): Promise<number> {
    let n = 0;
    for (const h of this.held.filter((x) => which(x.key))) {
      await h.keeper.release();
      this.held.splice(this.held.indexOf(h), 1);
      if (h.key.scoped) await deleteLeaseRecord(this.store, records, h.key.key);
      n++;
    }
    return n;
  }

  /** Stops renewing and releases every lease still held, whatever fails (after an error). */
  async abandon(): Promise<void> {
    await Promise.allSettled(this.held.splice(0).map((h) => h.keeper.release()));
  }
}

function stillHeld(held: Array<{ key: LeaseKey; error: LeaseHeldError | ConflictError }>, waitMs: number): LeaseHeldError {
  const shown = held.map(({ key, error }) => (error instanceof LeaseHeldError && error.holder ? `${key.what} (${key.key}): ${JSON.stringify(error.holder.owner)} until ${error.holder.expiresAtMs}` : `${key.what} (${key.key}): ${error.message}`));
  const first = held.find((h) => h.error instanceof LeaseHeldError)?.error as LeaseHeldError | undefined;
  return new LeaseHeldError(
    `the log is in use: ${held.length} of its leases are still held after waiting ${waitMs} ms: ${shown.join('; ')}. Stop its writers and maintenance (or wait for them), then run the command again; nothing was deleted`,
    first?.holder,
    { cause: held[0]?.error },
  );
}

/**
 * Deletes a released lease record of a key scoped by a dropped log's id. DynamoDB: only while
 * it is still released. A local lease store keeps one file per key named by the key's sha256
 * (lib/lease/local.ts); the file goes. Other stores keep it released.
 */
async function deleteLeaseRecord(store: LeaseStore, records: TableRecords | null, key: string): Promise<void> {
  if (records) {
    await records.deleteReleasedLease(key);
    return;
  }
  if (store instanceof LocalLeaseStore) {
    const file = path.join(store.dir, `${createHash('sha256').update(key, 'utf8').digest('hex')}.json`);
    await unlink(file).catch((e: unknown) => {
      if (errCode(e) !== 'ENOENT') throw new UnavailableError(`cannot delete lease record ${file}: ${(e as Error).message}`, { cause: e });
    });
  }
}
