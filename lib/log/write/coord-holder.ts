/**
 * A log object's coordination store (item markers and claims: lib/coord/choose.ts), chosen by the
 * log's first write (reads never need it), then kept once the log's record says it, and released
 * by close().
 */
import type { Clock } from '../../clock.ts';
import { CHOICE_KEY, chooseCoordStore, coordTableOf, formatCoordRecord, type CoordPreference, type CoordRecord } from '../../coord/choose.ts';
import type { CoordStore } from '../../coord/types.ts';
import { InternalError } from '../../errors.ts';
import type { LeaseStore } from '../../lease/types.ts';
import type { ObjectStore } from '../../storage/objects.ts';

export interface CoordHolderOptions {
  objects: ObjectStore;
  leases: LeaseStore;
  pipeline: string;
  experiment: string;
  coordination?: CoordPreference;
  clock: Clock;
  wrapCoord?: (store: CoordStore) => CoordStore;
}

/** The scope a lease was taken in, and the record (as stored) it came from; null: no record. */
export interface LeaseScope {
  logId: string | null;
  record: string | null;
}

export class CoordHolder {
  /** The store, once chosen; cleared if choosing failed. */
  private store: Promise<CoordStore> | null = null;
  /** The record the kept store was chosen by (null before one is kept, or for a log without one). */
  private record: CoordRecord | null = null;
  private released = false;

  constructor(private readonly o: CoordHolderOptions) {}

  /**
   * The log's store. `create: false` (maintenance, a write's validation pass) never writes the
   * record (see chooseCoordStore).
   */
  get(o: { create: boolean } = { create: true }): Promise<CoordStore> {
    if (this.store) return this.store;
    // Released by close(): one opened now would never be. A backstop: every caller (the
    // writer's loop, maintain()) has ended before close() releases it.
    if (this.released) return Promise.reject(new InternalError('the log is closed: open it again'));
    const chosen = chooseCoordStore(this.o.objects, coordTableOf(this.o.leases), `${this.o.pipeline}/${this.o.experiment}`, { ...o, prefer: this.o.coordination ?? 'table', clock: this.o.clock }).then((c) =>
      this.o.wrapCoord ? { ...c, store: this.o.wrapCoord(c.store) } : c,
    );
    const store: Promise<CoordStore> = chosen.then((c) => {
      if (this.released) {
        c.store.close?.(); // chosen while close() released the log's store
        throw new InternalError('the log is closed: open it again');
      }
      // Kept only from a record: an unrecorded answer (no record yet) must never reach a writer.
      if (!c.recorded) return c.store;
      // Another call chose at the same time (maintain() and a first append(), both `create:
      // false`) and its store is kept: this one is released, or its share of the database
      // connection would never be.
      const kept = this.store;
      if (kept && kept !== store) {
        c.store.close?.();
        return kept;
      }
      this.store ??= Promise.resolve(c.store);
      this.record = c.record;
      return c.store;
    });
    if (o.create) {
      this.store = store;
      store.catch(() => {
        if (this.store === store) this.store = null;
      });
    }
    return store;
  }

  /**
   * The scope of the log's lease keys (lib/lease/slots.ts `leasePrefix`): the record's id when it
   * scopes them, else null (names only, as for a log without a record yet), with the record it
   * came from: `unchanged` compares the stored record with it once a lease of that scope is held.
   */
  async leaseScope(o: { create: boolean }): Promise<LeaseScope> {
    const store = await this.get(o);
    // The record of this very store (a concurrent `unchanged` may have forgotten it meanwhile).
    const r = this.store !== null && (await this.store.catch(() => null)) === store ? this.record : null;
    return { logId: r !== null && r.scoped ? r.id : null, record: r === null ? null : formatCoordRecord(r) };
  }

  /**
   * Whether the log's record still says what `scope` was taken from. A repair or an adoption
   * (lib/log/admin/rehome.ts) replaces it while it holds every lease of the old scope; a process
   * that took a lease of the old scope after that must not use it (nor the store): when the record
   * changed, the kept store (if it is the one of that record) is forgotten, so the next `get`
   * chooses again, and false is returned.
   */
  async unchanged(scope: LeaseScope): Promise<boolean> {
    const body = await this.o.objects.get(CHOICE_KEY);
    if (body === scope.record) return true;
    const kept = this.store;
    if (kept !== null && this.record !== null && formatCoordRecord(this.record) === scope.record) {
      this.store = null;
      this.record = null;
      await kept.then((c) => c.close?.(), () => undefined);
    }
    return false;
  }

  /** Forget the kept store (the log's records were rebuilt): the next `get` chooses again. */
  async forget(): Promise<void> {
    const kept = this.store;
    this.store = null;
    this.record = null;
    await kept?.then((c) => c.close?.(), () => undefined);
  }

  /** Close the store (after the writer: its close() may still claim); later `get` calls fail. */
  async release(): Promise<void> {
    const store = this.store;
    this.store = null;
    this.released = true;
    // A store that failed to open has nothing to close.
    await store?.then((c) => c.close?.(), () => undefined);
  }
}
