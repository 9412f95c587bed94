/**
 * Leases in the simulation: an in-memory lease table that follows lib/lease/rules.ts exactly (the
 * same functions decide free, current and the next epoch, as every backend does), seen by each
 * process through its own clock (`MemLeaseRecords.store`), as DynamoDB conditions are written
 * with the caller's time; and a wrapper that makes each call of any lease store, the local one of
 * lease files included, a scheduling and fault point.
 *
 * Renewals are scheduled like every other call: LeaseKeeper renews on its clock's timer
 * (SimClock.setTimer), which fires once simulated time has passed, and a renewal may fail, time
 * out (and land later) or land with its answer lost.
 */
import type { Clock } from '../../lib/clock.ts';
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

/** The table's records, shared by every process of a schedule. */
export class MemLeaseRecords {
  private readonly records = new Map<string, Lease>();

  /** The writer slot leases `owner` holds, in any scope (no request: for the steering). */
  slotsOf(owner: string): Array<{ key: string; slot: number; epoch: number }> {
    return [...this.records.values()]
      .filter((r) => r.owner === owner && /\/slot\/\d+$/.test(r.key))
      .map((r) => ({ key: r.key, slot: Number(r.key.slice(r.key.lastIndexOf('/') + 1)), epoch: r.epoch }));
  }

  /** The table as a process with clock `clock` sees it. */
  store(clock: Clock): LeaseStore {
    const records = this.records;
    return {
      async acquire(key, owner, ttlMs) {
        const record = records.get(key) ?? null;
        const now = clock.nowMs();
        if (!canAcquire(record, now)) throw leaseHeld(key, record!, now);
        const next = acquiredRecord(record, key, owner, now, ttlMs);
        records.set(key, next);
        return { ...next };
      },
      async renew(lease, ttlMs) {
        const record = records.get(lease.key) ?? null;
        if (!canRenew(record, lease)) throw new LeaseFencedError(lease, record, { nowMs: clock.nowMs() });
        const next = renewedRecord(lease, clock.nowMs(), ttlMs);
        records.set(lease.key, next);
        return { ...next };
      },
      async release(lease) {
        const record = records.get(lease.key) ?? null;
        if (isCurrent(record, lease)) records.set(lease.key, releasedRecord(lease));
      },
      async read(key) {
        const r = records.get(key);
        return r ? { ...r } : null;
      },
      async assertCurrent(lease) {
        const record = records.get(lease.key) ?? null;
        if (!isCurrent(record, lease)) throw new LeaseFencedError(lease, record, { nowMs: clock.nowMs() });
      },
      async raiseEpoch(key, epoch) {
        const record = records.get(key) ?? null;
        if (record !== null && (record.epoch >= epoch || !canAcquire(record, clock.nowMs()))) return;
        records.set(key, { key, owner: '', epoch, expiresAtMs: 0 });
      },
      async close() {},
    };
  }
}

const unavailable = (m: string) => new UnavailableError(m);

export class SimLeaseStore implements LeaseStore {
  constructor(
    private readonly inner: LeaseStore,
    private readonly sched: Scheduler,
    /** Renewals that get no answer at all (a lease store that drops them), from the seed's stream. */
    private readonly renewalsLost: { rng: { chance(p: number): boolean }; probability: number } | null = null,
  ) {}

  private op<T>(kind: string, key: string, mutating: boolean, run: () => Promise<T>): Promise<T> {
    return this.sched.op({ kind: `lease.${kind}`, target: key, mutating, faultable: true, run, error: unavailable });
  }

  acquire(key: string, owner: string, ttlMs: number): Promise<Lease> {
    return this.op('acquire', `${key} by ${owner}`, true, () => this.inner.acquire(key, owner, ttlMs));
  }

  renew(lease: Lease, ttlMs: number): Promise<Lease> {
    const lost = this.renewalsLost;
    if (lost && lost.rng.chance(lost.probability)) return Promise.reject(new UnavailableError('simulation: the lease store did not answer the renewal'));
    return this.op('renew', `${lease.key} e${lease.epoch}`, true, () => this.inner.renew(lease, ttlMs));
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

  raiseEpoch(key: string, epoch: number): Promise<void> {
    return this.op('raiseEpoch', `${key} to e${epoch}`, true, () => this.inner.raiseEpoch(key, epoch));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
