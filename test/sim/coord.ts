/**
 * Coordination records (item markers, claims) in the simulation:
 *  - the lease table's (lib/coord/dynamo.ts): an in-memory map with DynamoDB's semantics, every
 *    call a scheduling and fault point, offered by a lease store (CoordTable). A put that times
 *    out may land later, as a PutItem sent once may; a claim is gone once true time passes the
 *    expiry its writer stamped from its own clock (DynamoDB deletes it some time after: the
 *    earliest is the hardest case for duplicate answers);
 *  - any real store (the SQLite file of a local log, lib/coord/sqlite.ts) with each call a
 *    scheduling and fault point (`SimCoordWrapper`): a transaction may fail before or after it
 *    committed, never land later (it is never resent).
 */
import type { Clock } from '../../lib/clock.ts';
import { UnavailableError } from '../../lib/errors.ts';
import { guard } from '../../lib/guards.ts';
import type { CoordKind, CoordStore, CoordTable } from '../../lib/coord/types.ts';
import type { LeaseStore } from '../../lib/lease/types.ts';
import type { Scheduler } from './scheduler.ts';
import type { SimTime } from './clock.ts';
import { SimLeaseStore } from './leases.ts';

interface Rec {
  body: string;
  expiresAtMs: number | null;
}

/** The table's records, shared by every process of a schedule. */
export class MemCoordRecords {
  readonly records = new Map<string, Rec>();
  constructor(readonly time: SimTime) {}

  read(pk: string): string | null {
    const r = this.records.get(pk);
    if (!r) return null;
    if (r.expiresAtMs !== null && r.expiresAtMs <= this.time.ms) {
      this.records.delete(pk);
      return null;
    }
    return r.body;
  }
}

const unavailable = (m: string) => new UnavailableError(m);

class SimCoordStore implements CoordStore {
  readonly kind: CoordKind = 'table';
  constructor(
    private readonly recs: MemCoordRecords,
    private readonly sched: Scheduler,
    private readonly scope: string,
    private readonly clock: Clock,
  ) {}

  /** `resendable`: the DynamoDB store lets the SDK resend it (all but `put`, sent once: lib/coord/dynamo.ts). */
  private op<T>(kind: string, key: string, mutating: boolean, run: () => Promise<T>, resendable = mutating): Promise<T> {
    return this.sched.op({ kind: `coord.${kind}`, target: key, mutating, faultable: true, run, error: unavailable, resendable });
  }

  private pk(key: string): string {
    return `${this.scope}/${key}`;
  }

  get(key: string): Promise<string | null> {
    return this.op('get', key, false, async () => this.recs.read(this.pk(key)));
  }

  getMany(keys: readonly string[]): Promise<Map<string, string | null>> {
    return this.op('getMany', keys.join(','), false, async () => new Map(keys.map((k) => [k, this.recs.read(this.pk(k))])));
  }

  put(key: string, body: string): Promise<void> {
    return this.op('put', key, true, async () => {
      this.recs.records.set(this.pk(key), { body, expiresAtMs: null });
    }, !guard('put-sent-once'));
  }

  putIfAbsent(key: string, body: string, o: { expiresAfterMs: number }): Promise<boolean> {
    // The expiry is stamped from the writer's clock when it sends the request.
    const expiresAtMs = this.clock.nowMs() + o.expiresAfterMs;
    return this.op('putIfAbsent', key, true, async () => {
      if (this.recs.read(this.pk(key)) !== null) return false;
      this.recs.records.set(this.pk(key), { body, expiresAtMs });
      return true;
    });
  }

  delete(key: string): Promise<void> {
    return this.op('delete', key, true, async () => {
      this.recs.records.delete(this.pk(key));
    });
  }

  async deleteClaimsOlderThan(_cutoffMs: number): Promise<number> {
    return 0;
  }
}

/** A simulated lease store whose table also holds the logs' coordination records. */
export class SimTableLeaseStore extends SimLeaseStore implements CoordTable {
  constructor(
    inner: LeaseStore,
    private readonly sched2: Scheduler,
    private readonly recs: MemCoordRecords,
    private readonly clock: Clock,
    renewalsLost: ConstructorParameters<typeof SimLeaseStore>[2] = null,
  ) {
    super(inner, sched2, renewalsLost);
  }

  coordStore(scope: string): CoordStore {
    return new SimCoordStore(this.recs, this.sched2, scope, this.clock);
  }
}

/** A real coordination store (the SQLite file's) with each call a scheduling and fault point. */
export class SimCoordWrapper implements CoordStore {
  readonly kind: CoordKind;
  constructor(
    private readonly inner: CoordStore,
    private readonly sched: Scheduler,
  ) {
    this.kind = inner.kind;
  }

  private op<T>(kind: string, key: string, mutating: boolean, run: () => Promise<T>): Promise<T> {
    return this.sched.op({ kind: `${this.kind}.${kind}`, target: key, mutating, faultable: true, run, error: unavailable, neverLate: true });
  }

  get(key: string): Promise<string | null> {
    return this.op('get', key, false, () => this.inner.get(key));
  }

  getMany(keys: readonly string[]): Promise<Map<string, string | null>> {
    return this.op('getMany', keys.join(','), false, () => this.inner.getMany(keys));
  }

  put(key: string, body: string): Promise<void> {
    return this.op('put', key, true, () => this.inner.put(key, body));
  }

  putIfAbsent(key: string, body: string, o: { expiresAfterMs: number }): Promise<boolean> {
    return this.op('putIfAbsent', key, true, () => this.inner.putIfAbsent(key, body, o));
  }

  delete(key: string): Promise<void> {
    return this.op('delete', key, true, () => this.inner.delete(key));
  }

  deleteClaimsOlderThan(cutoffMs: number): Promise<number> {
    return this.op('deleteClaimsOlderThan', `< ${cutoffMs}`, true, () => this.inner.deleteClaimsOlderThan(cutoffMs));
  }

  sync(): Promise<void> {
    const inner = this.inner;
    return this.op('sync', '', false, async () => inner.sync?.());
  }

  close(): void {
    this.inner.close?.();
  }
}
