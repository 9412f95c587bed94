/**
 * What the log store asks of the lease store: a writer shard slot (with its writer epoch
 * string), the experiment's maintainer lease, and a keeper that renews a lease in the
 * background. Backend-agnostic: everything goes through the LeaseStore interface.
 */
import { type Clock, systemClock } from '../clock.ts';
import { FencedError, InvalidInputError, LeaseHeldError } from '../errors.ts';
import { validateName } from '../names.ts';
import { validateOwner, validateTtl } from './rules.ts';
import type { Lease, LeaseStore } from './types.ts';

export const DEFAULT_SLOTS = 16;
/** Slot numbers are printed with two digits in writer epochs. */
export const MAX_SLOTS = 100;

export interface WriterSlot {
  slot: number;
  lease: Lease;
  /** `s${slot:02}-e${epoch:06}`, e.g. `s03-e000007`. */
  writerEpoch: string;
}

export interface AcquireWriterSlotOptions {
  pipeline: string;
  experiment: string;
  owner: string;
  /** Number of slots of the experiment (default 16). */
  slots?: number;
  ttlMs: number;
  /** Take exactly this slot (0..slots-1) instead of searching; LeaseHeldError if it is held. */
  slot?: number;
  /** Source of the random first slot, in [0, 1) (tests pin it). Default Math.random. */
  random?: () => number;
}

export function slotKey(pipeline: string, experiment: string, slot: number): string {
  return `${validateName('pipeline', pipeline)}/${validateName('experiment', experiment)}/slot/${slot}`;
}

export function maintainerKey(pipeline: string, experiment: string): string {
  return `${validateName('pipeline', pipeline)}/${validateName('experiment', experiment)}/maintainer`;
}

export function formatWriterEpoch(slot: number, epoch: number): string {
  if (!Number.isSafeInteger(slot) || slot < 0 || slot >= MAX_SLOTS) {
    throw new InvalidInputError(`slot must be an integer in 0..${MAX_SLOTS - 1}`, { field: 'slot' });
  }
  if (!Number.isSafeInteger(epoch) || epoch < 1) {
    throw new InvalidInputError('epoch must be an integer >= 1', { field: 'epoch' });
  }
  return `s${String(slot).padStart(2, '0')}-e${String(epoch).padStart(6, '0')}`;
}

const WRITER_EPOCH_RE = /^s(\d{2})-e(\d{6,15})$/;

/**
 * Inverse of formatWriterEpoch. Epochs above 999999 print with more digits (still parsed;
 * they no longer sort as text, so compare parsed numbers).
 */
export function parseWriterEpoch(writerEpoch: string): { slot: number; epoch: number } {
  const m = typeof writerEpoch === 'string' ? WRITER_EPOCH_RE.exec(writerEpoch) : null;
  const slot = Number(m?.[1]);
  const epoch = Number(m?.[2]);
  if (!m || epoch < 1 || (m[2]!.length > 6 && m[2]!.startsWith('0'))) {
    throw new InvalidInputError(`not a writer epoch: ${JSON.stringify(writerEpoch)} (expected e.g. s03-e000007)`, {
      field: 'writerEpoch',
    });
  }
  return { slot, epoch };
}

/**
 * Takes a free writer slot: tries every slot once, starting at a random one (so writers spread
 * out instead of all fighting over slot 0). Throws LeaseHeldError if all are held (its holder:
 * the one that expires first), or the first error that is not LeaseHeldError.
 * Requests: 1 per slot tried (DynamoDB: one conditional UpdateItem each).
 */
export async function acquireWriterSlot(store: LeaseStore, options: AcquireWriterSlotOptions): Promise<WriterSlot> {
  const { pipeline, experiment, owner, ttlMs } = options;
  const slots = options.slots ?? DEFAULT_SLOTS;
  if (!Number.isSafeInteger(slots) || slots < 1 || slots > MAX_SLOTS) {
    throw new InvalidInputError(`slots must be an integer in 1..${MAX_SLOTS}`, { field: 'slots' });
  }
  validateOwner(owner);
  validateTtl(ttlMs);
  slotKey(pipeline, experiment, 0); // validates the names before any I/O
  if (options.slot !== undefined) {
    const slot = options.slot;
    if (!Number.isSafeInteger(slot) || slot < 0 || slot >= slots) {
      throw new InvalidInputError(`slot must be an integer in 0..${slots - 1}`, { field: 'slot' });
    }
    const lease = await store.acquire(slotKey(pipeline, experiment, slot), owner, ttlMs);
    return { slot, lease, writerEpoch: formatWriterEpoch(slot, lease.epoch) };
  }
  const start = Math.min(slots - 1, Math.floor((options.random ?? Math.random)() * slots));
  let soonest: LeaseHeldError | undefined;
  for (let i = 0; i < slots; i++) {
    const slot = (start + i) % slots;
    try {
      const lease = await store.acquire(slotKey(pipeline, experiment, slot), owner, ttlMs);
      return { slot, lease, writerEpoch: formatWriterEpoch(slot, lease.epoch) };
    } catch (e) {
      if (!(e instanceof LeaseHeldError)) throw e;
      if (!soonest || (e.holder?.expiresAtMs ?? Infinity) < (soonest.holder?.expiresAtMs ?? Infinity)) soonest = e;
    }
  }
  throw new LeaseHeldError(
    `all ${slots} writer slots of ${pipeline}/${experiment} are held; ` +
      `the first frees at ${soonest?.holder?.expiresAtMs ?? 'unknown'}`,
    soonest?.holder,
    { cause: soonest },
  );
}

/** Takes the experiment's maintainer lease (LeaseHeldError if another maintainer holds it). */
export async function acquireMaintainer(
  store: LeaseStore,
  options: { pipeline: string; experiment: string; owner: string; ttlMs: number },
): Promise<Lease> {
  return store.acquire(maintainerKey(options.pipeline, options.experiment), options.owner, options.ttlMs);
}

export interface LeaseKeeperOptions {
  /** The ttl each renewal asks for. */
  ttlMs: number;
  /** Renewal period; default ttlMs / 3 (so two renewals may fail before expiry). */
  intervalMs?: number;
  /** Called once when the lease is lost (FencedError). */
  onLost?: (error: FencedError) => void;
  /** Used only by `expired()`; defaults to the system clock. */
  clock?: Clock;
}

/**
 * Renews a lease in the background every ttl/3 from construction on (the timer is unref'd, so
 * it never keeps a process alive). `new LeaseKeeper(store, lease, ttlMs)` is short for
 * `{ ttlMs }`. Stops for good on FencedError (`lost` becomes true, `onLost` is called);
 * other errors (UnavailableError...) are kept in `lastError` and the next tick tries again.
 */
export class LeaseKeeper {
  private lease: Lease;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private stopped = false;
  private lostError: FencedError | undefined;
  /** The last renewal error that was not a FencedError (cleared by a successful renewal). */
  lastError: unknown;
  private readonly options: LeaseKeeperOptions;
  private readonly intervalMs: number;
  private readonly clock: Clock;

  constructor(
    private readonly store: LeaseStore,
    lease: Lease,
    options: LeaseKeeperOptions | number,
  ) {
    this.options = typeof options === 'number' ? { ttlMs: options } : options;
    validateTtl(this.options.ttlMs);
    this.lease = lease;
    this.intervalMs = Math.max(1, Math.floor(this.options.intervalMs ?? this.options.ttlMs / 3));
    this.clock = this.options.clock ?? systemClock;
    this.schedule();
  }

  /** The latest lease (its expiry moves on with each renewal; key, owner and epoch never change). */
  current(): Lease {
    return this.lease;
  }

  get lost(): boolean {
    return this.lostError !== undefined;
  }

  /** The FencedError that ended the keeper, if any. */
  get lostReason(): FencedError | undefined {
    return this.lostError;
  }

  /** Whether the last renewed expiry has passed (the lease may be taken over at any moment). */
  expired(): boolean {
    return this.lease.expiresAtMs <= this.clock.nowMs();
  }

  /** Renews now (waits for a renewal already running first). Throws what the renewal threw. */
  async renewNow(): Promise<Lease> {
    if (this.lostError) throw this.lostError;
    await this.inFlight;
    if (this.lostError) throw this.lostError;
    let failure: unknown;
    const run = this.store.renew(this.lease, this.options.ttlMs).then(
      (next) => {
        this.lease = next;
        this.lastError = undefined;
      },
      (e: unknown) => {
        failure = e;
        if (e instanceof FencedError) this.markLost(e);
        else this.lastError = e;
      },
    );
    this.inFlight = run;
    await run;
    if (this.inFlight === run) this.inFlight = undefined;
    if (failure !== undefined) throw failure;
    return this.lease;
  }

  /** Stops renewing (the lease stays held until it expires); waits for a renewal in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.inFlight;
  }

  /** Stops, then releases the lease (a no-op if it was already superseded). */
  async release(): Promise<void> {
    await this.stop();
    if (!this.lostError) await this.store.release(this.lease);
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // Errors are recorded by renewNow (lost / lastError); the next tick tries again.
      this.renewNow().then(
        () => this.reschedule(),
        () => this.reschedule(),
      );
    }, this.intervalMs);
    this.timer.unref();
  }

  private reschedule(): void {
    if (!this.stopped && !this.lostError && this.timer === undefined) this.schedule();
  }

  private markLost(e: FencedError): void {
    if (this.lostError) return;
    this.lostError = e;
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    try {
      this.options.onLost?.(e);
    } catch {
      // a throwing callback must not break the keeper's bookkeeping
    }
  }
}
