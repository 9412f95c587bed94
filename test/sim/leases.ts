/**
 * Leases in the simulation: an in-memory LeaseStore that follows lib/lease/rules.ts exactly
 * (the same functions decide free, current and the next epoch, as every backend does), and a
 * wrapper that makes each call a scheduling and fault point. In memory rather than the file
 * store: LocalLeaseStore's mutex backs off with real sleeps and Math.random, which would make
 * schedules depend on the machine; its conditional writes are what DynamoDB's are, so the rules
 * are what matter here.
 *
 * Renewals are never scheduled: LeaseKeeper renews on a real-time timer (lib/lease/slots.ts),
 * whose firing no seed controls. The wrapper answers every renewal at once with
 * UnavailableError (as a lease store that does not answer would), which the keeper records
 * and retries; leases therefore last exactly `ttl` of simulated time from their acquire.
 */
import { UnavailableError } from '../../lib/errors.ts';
import {
  LeaseFencedError,
  acquiredRecord,
  canAcquire,
  canRenew,
  isCurrent,
  leaseHeld,
  releasedRecord,
  renewedRecord,
} from '../../lib/lease/rules.ts';
import type { Lease, LeaseStore } from '../../lib/lease/types.ts';
import type { Scheduler } from './scheduler.ts';

export class MemLeaseStore implements LeaseStore {
  private readonly records = new Map<string, Lease>();
  constructor(private readonly nowMs: () => number) {}

  async acquire(key: string, owner: string, ttlMs: number): Promise<Lease> {
    const record = this.records.get(key) ?? null;
    const now = this.nowMs();
    if (!canAcquire(record, now)) throw leaseHeld(key, record!, now);
    const next = acquiredRecord(record, key, owner, now, ttlMs);
    this.records.set(key, next);
    return { ...next };
  }

  async renew(lease: Lease, ttlMs: number): Promise<Lease> {
    const record = this.records.get(lease.key) ?? null;
    if (!canRenew(record, lease)) throw new LeaseFencedError(lease, record, { nowMs: this.nowMs() });
    const next = renewedRecord(lease, this.nowMs(), ttlMs);
    this.records.set(lease.key, next);
    return { ...next };
  }

  async release(lease: Lease): Promise<void> {
    const record = this.records.get(lease.key) ?? null;
    if (isCurrent(record, lease)) this.records.set(lease.key, releasedRecord(lease));
  }

  async read(key: string): Promise<Lease | null> {
    const r = this.records.get(key);
    return r ? { ...r } : null;
  }

  async assertCurrent(lease: Lease): Promise<void> {
    const record = this.records.get(lease.key) ?? null;
    if (!isCurrent(record, lease)) throw new LeaseFencedError(lease, record, { nowMs: this.nowMs() });
  }

  async close(): Promise<void> {}
}

const unavailable = (m: string) => new UnavailableError(m);

export class SimLeaseStore implements LeaseStore {
  constructor(
    private readonly inner: LeaseStore,
    private readonly sched: Scheduler,
  ) {}

  private op<T>(kind: string, key: string, mutating: boolean, run: () => Promise<T>): Promise<T> {
    return this.sched.op({ kind: `lease.${kind}`, target: key, mutating, faultable: true, run, error: unavailable });
  }

  acquire(key: string, owner: string, ttlMs: number): Promise<Lease> {
    return this.op('acquire', `${key} by ${owner}`, true, () => this.inner.acquire(key, owner, ttlMs));
  }

  renew(_lease: Lease, _ttlMs: number): Promise<Lease> {
    return Promise.reject(new UnavailableError('simulation: renewals are not answered (real-time timer)'));
  }

  release(lease: Lease): Promise<void> {
    return this.op('release', `${lease.key} e${lease.epoch}`, true, () => this.inner.release(lease));
  }

  read(key: string): Promise<Lease | null> {
    return this.op('read', key, false, () => this.inner.read(key));
  }

  assertCurrent(lease: Lease): Promise<void> {
    return this.op('assertCurrent', `${lease.key} e${lease.epoch}`, false, () => this.inner.assertCurrent(lease));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
