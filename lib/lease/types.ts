/**
 * A lease: one holder of a key at a time, with a monotonically increasing numeric epoch.
 * Rules (expiry, epoch increments, who may renew) live in lib/lease/rules.ts; backends only
 * store records with conditional writes.
 */
export interface Lease {
  /** e.g. `pipe/exp/slot/3` or `pipe/exp/maintainer`. */
  key: string;
  /** Opaque identity of the holder (process/container id). */
  owner: string;
  /** Increases by one on every acquire (fresh, steal, or re-acquire after release). */
  epoch: number;
  /** Wall-clock expiry from the store's clock. */
  expiresAtMs: number;
}

export interface LeaseStore {
  /**
   * Take the key if it is free, released, or expired; the new lease has epoch = previous + 1
   * (1 for a never-seen key). Throws LeaseHeldError while an unexpired holder has it, the same
   * owner string included (two writers of one process may share it; neither may silently
   * fence the other).
   */
  acquire(key: string, owner: string, ttlMs: number): Promise<Lease>;
  /** Extend a lease still held at the same epoch. Throws FencedError otherwise. */
  renew(lease: Lease, ttlMs: number): Promise<Lease>;
  /** Give up a lease; a no-op if it was already superseded. Keeps the epoch counter. */
  release(lease: Lease): Promise<void>;
  /** Strongly consistent read of the current record (null if never acquired). */
  read(key: string): Promise<Lease | null>;
  /**
   * Throws FencedError unless `lease` is still the current holder at the same epoch
   * (expiry is not checked: a writer's commit is valid while nobody took over).
   */
  assertCurrent(lease: Lease): Promise<void>;
  /**
   * Optional: true when the store knows the current holder of `key` is gone before its expiry
   * (the local store: its process is known gone, lib/lease/holder.ts), so its lease can be taken at once.
   */
  holderIsGone?(key: string): Promise<boolean>;
  /**
   * Make the key's epoch counter at least `epoch`, as a released record, if nobody holds it (the
   * next acquire gets `epoch` + 1); nothing if it is held or already there. For a log's new lease
   * keys (a repair, an adoption, a copy: lib/log/admin/rehome.ts), whose epochs must start above
   * every epoch the log's shards and seals already name.
   */
  raiseEpoch(key: string, epoch: number): Promise<void>;
  close(): Promise<void>;
}
