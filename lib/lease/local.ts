/**
 * LocalLeaseStore: the lease store of the embedded default, safe across processes on one
 * machine. One JSON file per key in a directory; every read-modify-write runs under a per-key
 * file mutex, and every write is durable (temp file, fsync, rename, fsync of the directory).
 *
 * Layout of `dir` (h = sha256 of the key, hex; the key itself is inside the record, so any key
 * works and case-insensitive file systems cannot merge two keys):
 *   <h>.json         the record {v, key, owner, epoch, expiresAtMs, updatedAtMs, acquireToken?,
 *                    pid?, host?, pidNs?, start?}: the process that took or last renewed it
 *                    (lib/lease/holder.ts)
 *   <h>.lock         the mutex: a file created atomically with link(2), content
 *                    {pid, host, pidNs?, start?, token, createdAtMs}; present only while someone holds it
 *   <h>.lock.break   the breaker mutex, held only while a stale mutex is removed
 *   *.tmp-<token>    temp files (a process killed mid-write can leave one; harmless)
 *
 * Mutex rules. Taking it is `link(tmp, <h>.lock)`, which either creates the whole file or fails
 * with EEXIST. A held mutex is stale when its holder is known gone (lib/lease/holder.ts: same
 * host and pid namespace, pid dead or reused; a process killed with SIGKILL is detected at once),
 * or when it is older than `lockStaleMs` (no /proc, another pid namespace or host sharing the
 * folder, a frozen process). Stale mutexes
 * are removed only under the breaker mutex, after re-checking that the very same mutex file is
 * still there, so two waiters can never both "break" and then both take it. Before the commit
 * (the rename of the record) the holder checks its mutex is still its own, so a holder frozen
 * for longer than `lockStaleMs` aborts with ConflictError instead of overwriting.
 * Remaining assumption, as with every lock-file scheme: a live holder is not paused for longer
 * than `lockStaleMs` between that check and its rename (microseconds).
 *
 * The mutex uses real time (its staleness is an OS fact); the lease rules use the injected clock.
 *
 * A held lease whose holder process is known gone (lib/lease/holder.ts) is free at once, as if
 * expired: a crashed or killed writer's slot is taken without waiting out the ttl. Safe for the
 * same reason a takeover after expiry is: the new holder gets the next epoch, and the log fences
 * and seals the old one before the new one writes, so a holder wrongly judged gone would lose its
 * next ack, never an acked batch (docs/design/leases.md, "Dead holders").
 */
import { createHash, randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Clock, systemClock } from '../clock.ts';
import { ConflictError, CorruptError, DgclError, PermissionDeniedError, UnavailableError } from '../errors.ts';
import { errCode, isPermissionError, syncDir, unlinkQuiet, writeDurably } from '../fsutil.ts';
import { HOLDER, holderGone, holderOf, type Holder } from './holder.ts';
import {
  LeaseFencedError,
  type LeaseRecord,
  acquiredRecord,
  canAcquire,
  canRenew,
  isCurrent,
  isOwnAcquire,
  leaseHeld,
  newAcquireToken,
  pick,
  releasedRecord,
  RELEASED_OWNER,
  validateEpochFloor,
  renewedRecord,
  validateKey,
  validateLease,
  validateOwner,
  validateTtl,
} from './rules.ts';
import type { Lease, LeaseStore } from './types.ts';

export interface LocalLeaseStoreOptions {
  /** Folder holding the records (created if missing). */
  dir: string;
  /** Clock for lease expiry; defaults to the system clock. */
  clock?: Clock;
  /**
   * A mutex whose holder looks alive is considered stale after this long (ms). Critical
   * sections take milliseconds. Default 30 s.
   */
  lockStaleMs?: number;
  /** Give up waiting for a key's mutex after this long (ms) with UnavailableError. Default 60 s. */
  lockTimeoutMs?: number;
  /**
   * Fault injection for crash tests only: awaited while the key's mutex is held, right after
   * taking it (`afterLock`), between the decision and the commit (`beforeCommit`: the new
   * record is in its temp file) and right after the record was committed (`afterCommit`).
   */
  faultInjection?: {
    afterLock?(key: string): void | Promise<void>;
    beforeCommit?(key: string): void | Promise<void>;
    afterCommit?(key: string): void | Promise<void>;
  };
}

interface LockInfo extends Holder {
  token: string;
  createdAtMs: number;
}

/** What was found at a mutex path: the raw bytes and inode identify that exact file. */
interface LockSeen {
  raw: string;
  ino: number;
  mtimeMs: number;
  info: LockInfo | null;
}

const RECORD_VERSION = 1;
const BREAKER_STALE_MS = 10_000;
/** A stored record: the lease, its acquire token, and the process holding it (if recorded). */
interface LocalRecord extends LeaseRecord, Partial<Holder> {}

/** Whether `r` is held (not released) by a process known to be gone (lib/lease/holder.ts). */
function holderDead(r: LocalRecord | null): boolean {
  if (r === null || r.owner === '' || r.pid === undefined || r.host === undefined) return false;
  return holderGone(r as Holder);
}

export class LocalLeaseStore implements LeaseStore {
  readonly dir: string;
  private readonly clock: Clock;
  private readonly lockStaleMs: number;
  private readonly lockTimeoutMs: number;
  private readonly faults: NonNullable<LocalLeaseStoreOptions['faultInjection']>;
  private ready: Promise<void> | undefined;

  constructor(options: LocalLeaseStoreOptions) {
    this.dir = options.dir;
    this.clock = options.clock ?? systemClock;
    this.lockStaleMs = options.lockStaleMs ?? 30_000;
    this.lockTimeoutMs = options.lockTimeoutMs ?? 60_000;
    this.faults = options.faultInjection ?? {};
  }

  async acquire(key: string, owner: string, ttlMs: number): Promise<Lease> {
    validateKey(key);
    validateOwner(owner);
    validateTtl(ttlMs);
    return this.withLock(key, async (lockToken) => {
      const record = await this.readRecord(key);
      const now = this.clock.nowMs();
      if (!canAcquire(record, now) && !holderDead(record)) throw leaseHeld(key, record as Lease, now);
      const next = acquiredRecord(record, key, owner, now, ttlMs);
      const token = newAcquireToken();
      try {
        await this.writeRecord({ ...next, acquireToken: token, ...HOLDER }, lockToken, now);
        await this.faults.afterCommit?.(key);
      } catch (e) {
        // A step after the rename failed (e.g. the folder's fsync): the record is in place and
        // every other process already sees us holding the key. Report what they see, our lease,
        // rather than an error that leaves the key blocked by a lease nobody holds. (The mutex
        // is still ours, so nobody can have written in between.)
        const now2 = await this.readRecord(key).catch(() => null);
        if (isOwnAcquire(now2, token)) return next;
        throw e;
      }
      return next;
    });
  }

  async renew(lease: Lease, ttlMs: number): Promise<Lease> {
    const l = validateLease(lease);
    validateTtl(ttlMs);
    return this.withLock(l.key, async (token) => {
      const record = await this.readRecord(l.key);
      const now = this.clock.nowMs();
      if (!canRenew(record, l)) throw new LeaseFencedError(l, record && pick(record), { nowMs: now });
      const next = renewedRecord(l, now, ttlMs);
      // the epoch is still the one that acquire made: keep its token (rules.isOwnAcquire)
      const kept = record?.acquireToken === undefined ? {} : { acquireToken: record.acquireToken };
      await this.writeRecord({ ...next, ...kept, ...HOLDER }, token, now);
      return next;
    });
  }

  async release(lease: Lease): Promise<void> {
    const l = validateLease(lease);
    await this.withLock(l.key, async (token) => {
      const record = await this.readRecord(l.key);
      if (!isCurrent(record, l)) return; // superseded or already released: a no-op
      await this.writeRecord(releasedRecord(l), token, this.clock.nowMs());
    });
  }

  async raiseEpoch(key: string, epoch: number): Promise<void> {
    validateKey(key);
    validateEpochFloor(epoch);
    await this.withLock(key, async (token) => {
      const record = await this.readRecord(key);
      const now = this.clock.nowMs();
      if (record !== null && (record.epoch >= epoch || (!canAcquire(record, now) && !holderDead(record)))) return;
      await this.writeRecord(releasedRecord({ key, owner: RELEASED_OWNER, epoch, expiresAtMs: 0 }), token, now);
    });
  }

  /** Records are replaced by rename, so a plain read sees a whole committed record. */
  async read(key: string): Promise<Lease | null> {
    validateKey(key);
    const record = await this.readRecord(key);
    return record && pick(record);
  }

  async assertCurrent(lease: Lease): Promise<void> {
    const l = validateLease(lease);
    const record = await this.readRecord(l.key);
    if (!isCurrent(record, l)) throw new LeaseFencedError(l, record && pick(record), { nowMs: this.clock.nowMs() });
  }

  /** Whether the current holder of `key` is a process known to be gone (its lease is free). */
  async holderIsGone(key: string): Promise<boolean> {
    validateKey(key);
    return holderDead(await this.readRecord(key));
  }

  /** Nothing is held between calls. */
  async close(): Promise<void> {}

  // ---- records -------------------------------------------------------------------------

  private base(key: string): string {
    return join(this.dir, createHash('sha256').update(key, 'utf8').digest('hex'));
  }

  private async readRecord(key: string): Promise<LocalRecord | null> {
    const path = `${this.base(key)}.json`;
    let raw: string;
    try {
      raw = await fs.readFile(path, 'utf8');
    } catch (e) {
      if (errCode(e) === 'ENOENT') return null;
      throw unavailable(`cannot read lease record ${path}`, e);
    }
    let r: Record<string, unknown>;
    try {
      r = JSON.parse(raw) as Record<string, unknown>;
    } catch (e) {
      throw new CorruptError(`lease record ${path} is not JSON`, { cause: e });
    }
    if (
      r === null ||
      typeof r !== 'object' ||
      r.key !== key ||
      typeof r.owner !== 'string' ||
      !Number.isSafeInteger(r.epoch) ||
      typeof r.expiresAtMs !== 'number'
    ) {
      throw new CorruptError(`lease record ${path} is not a record of key ${JSON.stringify(key)}`);
    }
    const lease: LocalRecord = { key, owner: r.owner, epoch: r.epoch as number, expiresAtMs: r.expiresAtMs };
    if (typeof r.acquireToken === 'string') lease.acquireToken = r.acquireToken;
    // Records written before holders were recorded have none: judged by expiry alone.
    const holder = holderOf(r);
    return holder ? { ...lease, ...holder } : lease;
  }

  /** Durable replace: temp file + fsync, ownership check of the mutex, rename, fsync dir. */
  private async writeRecord(record: LocalRecord, token: string, nowMs: number): Promise<void> {
    const base = this.base(record.key);
    const path = `${base}.json`;
    const tmp = `${path}.tmp-${randomUUID()}`;
    const body = JSON.stringify({ v: RECORD_VERSION, ...record, updatedAtMs: nowMs });
    try {
      await writeDurably(tmp, body);
      await this.faults.beforeCommit?.(record.key);
      const seen = await readLock(`${base}.lock`);
      if (seen?.info?.token !== token) {
        throw new ConflictError(
          `the mutex of lease ${JSON.stringify(record.key)} was taken over while held (this process ` +
            'was paused longer than lockStaleMs); nothing was written, retry',
        );
      }
      await fs.rename(tmp, path);
    } catch (e) {
      await unlinkQuiet(tmp);
      if (e instanceof DgclError) throw e;
      throw unavailable(`cannot write lease record ${path}`, e);
    }
    await syncDir(this.dir);
  }

  // ---- mutex ---------------------------------------------------------------------------

  private async withLock<T>(key: string, fn: (token: string) => Promise<T>): Promise<T> {
    await this.ensureDir();
    const lockPath = `${this.base(key)}.lock`;
    const token = await this.lock(lockPath, key);
    try {
      await this.faults.afterLock?.(key);
      return await fn(token);
    } finally {
      await unlock(lockPath, token);
    }
  }

  private ensureDir(): Promise<void> {
    this.ready ??= fs.mkdir(this.dir, { recursive: true }).then(
      () => undefined,
      (e: unknown) => {
        this.ready = undefined;
        throw unavailable(`cannot create lease folder ${this.dir}`, e);
      },
    );
    return this.ready;
  }

  private async lock(lockPath: string, key: string): Promise<string> {
    const token = randomUUID();
    const body = JSON.stringify({ ...HOLDER, token, createdAtMs: systemClock.nowMs() });
    const deadline = systemClock.nowMs() + this.lockTimeoutMs;
    let delay = 2;
    for (;;) {
      if (await createExclusive(lockPath, body)) return token;
      const seen = await readLock(lockPath);
      if (seen === null) continue; // released in between: try again at once
      if (isStale(seen, this.lockStaleMs) && (await breakStale(lockPath, seen, this.lockStaleMs))) continue;
      if (systemClock.nowMs() > deadline) {
        throw new UnavailableError(
          `timed out after ${this.lockTimeoutMs} ms waiting for the mutex of lease ${JSON.stringify(key)} ` +
            `(${lockPath}, held by ${seen.raw})`,
        );
      }
      await sleep(delay + Math.random() * delay);
      delay = Math.min(delay * 2, 50);
    }
  }
}

/** Creates `path` with `body` only if absent, atomically (readers never see a partial file). */
async function createExclusive(path: string, body: string): Promise<boolean> {
  const tmp = `${path}.tmp-${randomUUID()}`;
  try {
    await fs.writeFile(tmp, body, { flag: 'wx' });
    await fs.link(tmp, path);
    return true;
  } catch (e) {
    if (errCode(e) === 'EEXIST') return false;
    throw unavailable(`cannot create mutex ${path}`, e);
  } finally {
    await unlinkQuiet(tmp);
  }
}

async function readLock(path: string): Promise<LockSeen | null> {
  try {
    const st = await fs.stat(path);
    const raw = await fs.readFile(path, 'utf8');
    let info: LockInfo | null = null;
    try {
      const j = JSON.parse(raw) as Record<string, unknown>;
      const holder = j !== null && typeof j === 'object' ? holderOf(j) : null;
      if (holder && typeof j.token === 'string' && typeof j.createdAtMs === 'number') info = { ...holder, token: j.token, createdAtMs: j.createdAtMs };
    } catch {
      info = null; // unreadable (e.g. truncated by a power loss): judged by age alone
    }
    return { raw, ino: st.ino, mtimeMs: st.mtimeMs, info };
  } catch (e) {
    if (errCode(e) === 'ENOENT') return null;
    throw unavailable(`cannot read mutex ${path}`, e);
  }
}

function isStale(seen: LockSeen, staleMs: number): boolean {
  const now = systemClock.nowMs();
  if (seen.info === null) return now - seen.mtimeMs > staleMs;
  if (holderGone(seen.info)) return true;
  return now - seen.info.createdAtMs > staleMs;
}

function sameLock(a: LockSeen, b: LockSeen): boolean {
  return a.raw === b.raw && a.ino === b.ino;
}

/**
 * Removes the stale mutex `seen` if it is still the one at `lockPath`, under the breaker
 * mutex. Returns whether the caller should retry at once (false: someone else is breaking).
 */
async function breakStale(lockPath: string, seen: LockSeen, staleMs: number): Promise<boolean> {
  const breaker = `${lockPath}.break`;
  const token = randomUUID();
  const body = JSON.stringify({ ...HOLDER, token, createdAtMs: systemClock.nowMs() });
  if (!(await createExclusive(breaker, body))) {
    // A breaker killed mid-break would block breaking forever: its own staleness is by pid or
    // a short age (breaking takes microseconds).
    const b = await readLock(breaker);
    if (b !== null && isStale(b, Math.min(staleMs, BREAKER_STALE_MS))) await unlinkIfSame(breaker, b);
    return false;
  }
  try {
    const now = await readLock(lockPath);
    if (now !== null && sameLock(now, seen) && isStale(now, staleMs)) await unlinkQuiet(lockPath);
    return true;
  } finally {
    await unlock(breaker, token);
  }
}

async function unlinkIfSame(path: string, seen: LockSeen): Promise<void> {
  const now = await readLock(path);
  if (now !== null && sameLock(now, seen)) await unlinkQuiet(path);
}

async function unlock(lockPath: string, token: string): Promise<void> {
  const seen = await readLock(lockPath).catch(() => null);
  // Not ours any more: it was judged stale and broken; leave the new holder's mutex alone.
  if (seen?.info?.token === token) await unlinkQuiet(lockPath);
}

/** A failed fs call of the store: refused by permissions (not retryable), else UNAVAILABLE. */
function unavailable(message: string, cause: unknown): DgclError {
  const detail = cause instanceof Error ? `: ${cause.message}` : '';
  if (isPermissionError(cause)) return new PermissionDeniedError(`${message}${detail}; check the permissions of the lease folder`, (cause as { path?: string }).path ?? message, { cause });
  return new UnavailableError(`${message}${detail}`, { cause });
}
