/**
 * What the log store asks of the lease store: a writer shard slot (with its writer epoch
 * string), the experiment's maintainer lease, and a keeper that renews a lease in the
 * background. Backend-agnostic: everything goes through the LeaseStore interface.
 */
import { type Clock, startTimer, systemClock } from '../clock.ts';
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
  /** The log's id when its lease keys are scoped by it (lib/coord/choose.ts `CoordRecord`); null or absent: names only. */
  logId?: string | null;
  owner: string;
  /** Number of slots of the experiment (default 16). */
  slots?: number;
  ttlMs: number;
  /** Take exactly this slot (0..slots-1) instead of searching; LeaseHeldError if it is held. */
  slot?: number;
  /** Source of the random first slot and back-off jitter, in [0, 1) (tests pin it). Default Math.random. */
  random?: () => number;
  /**
   * How long to keep trying while every slot (or the pinned `slot`) is held, in ms of `clock`.
   * Default: `ttlMs` when searching (a crashed holder's slot frees within one ttl), 0 with a
   * pinned `slot` (a takeover of one slot is a decision the caller makes again, e.g. the
   * maintainer skips a slot a writer just took). 0 tries once.
   */
  waitMs?: number;
  /** Deadline and back-off sleeps (Clock.sleep); default the system clock. */
  clock?: Clock;
  /** Told once, when every slot it may take is held and it starts to wait: who holds them, until when. */
  onWait?: SlotWaitListener;
  /** Asked before each wait: true ends it at once with LeaseHeldError (the writer is closing). */
  stop?: () => boolean;
}

/** A writer waiting for a slot: every slot it may take is held. */
export interface SlotWait {
  pipeline: string;
  experiment: string;
  slots: number;
  /** The pinned slot, or null when any slot will do. */
  slot: number | null;
  /** The holders, by slot; `expiresAtMs` is when each lease ends unless renewed. */
  holders: Array<{ slot: number; owner: string; epoch: number; expiresAtMs: number }>;
  /** When the first of them ends unless renewed (null: unknown). */
  firstFreeAtMs: number | null;
  /** When the writer gives up (LeaseHeldError). */
  untilMs: number;
}

export type SlotWaitListener = (wait: SlotWait) => void;

/** Back-off between passes over the slots: 50 ms doubling to 1 s, with jitter (x0.5..1.5). */
export const SLOT_WAIT_FIRST_MS = 50;
export const SLOT_WAIT_MAX_MS = 1000;

/**
 * The prefix of a log's lease keys: `<pipeline>/<experiment>`, and the log's id after them when
 * its record scopes its leases (every log made or repaired by this version), so that logs of the
 * same names under other roots sharing the table, or the same log before a repair, never share a
 * slot. Ids are UUIDs: no name of the one form is a key of the other.
 */
export function leasePrefix(pipeline: string, experiment: string, logId?: string | null): string {
  const names = `${validateName('pipeline', pipeline)}/${validateName('experiment', experiment)}`;
  if (logId === undefined || logId === null) return names;
  if (!/^[0-9a-f-]{36}$/.test(logId)) throw new InvalidInputError(`not a log id: ${JSON.stringify(logId)}`, { field: 'logId' });
  return `${names}/${logId}`;
}

export function slotKey(pipeline: string, experiment: string, slot: number, logId?: string | null): string {
  return `${leasePrefix(pipeline, experiment, logId)}/slot/${slot}`;
}

export function maintainerKey(pipeline: string, experiment: string, logId?: string | null): string {
  return `${leasePrefix(pipeline, experiment, logId)}/maintainer`;
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
 * Takes a free writer slot ("writers beyond the slots wait for a free slot"). A pass tries
 * every slot once, starting at a random one (so writers spread out instead of all fighting over
 * slot 0); while all are held, passes repeat with back-off (SLOT_WAIT_FIRST_MS doubling to
 * SLOT_WAIT_MAX_MS, jittered, never sleeping past the first holder's expiry or the deadline)
 * until `waitMs` has passed on `clock`. Then LeaseHeldError naming every slot's holder and when
 * the first frees (its `holder`: the one that expires first). Any other error is thrown at once.
 * With a pinned `slot`, only that slot is tried, with the same waiting.
 * Requests: 1 per slot tried per pass (DynamoDB: one conditional UpdateItem each).
 */
export async function acquireWriterSlot(store: LeaseStore, options: AcquireWriterSlotOptions): Promise<WriterSlot> {
  const { pipeline, experiment, owner, ttlMs } = options;
  const logId = options.logId ?? null;
  const slots = options.slots ?? DEFAULT_SLOTS;
  if (!Number.isSafeInteger(slots) || slots < 1 || slots > MAX_SLOTS) {
    throw new InvalidInputError(`slots must be an integer in 1..${MAX_SLOTS}`, { field: 'slots' });
  }
  validateOwner(owner);
  validateTtl(ttlMs);
  slotKey(pipeline, experiment, 0, logId); // validates the names before any I/O
  const pinned = options.slot;
  if (pinned !== undefined && (!Number.isSafeInteger(pinned) || pinned < 0 || pinned >= slots)) {
    throw new InvalidInputError(`slot must be an integer in 0..${slots - 1}`, { field: 'slot' });
  }
  const waitMs = options.waitMs ?? (pinned === undefined ? ttlMs : 0);
  if (!Number.isSafeInteger(waitMs) || waitMs < 0) {
    throw new InvalidInputError('waitMs must be an integer >= 0', { field: 'waitMs' });
  }
  const clock = options.clock ?? systemClock;
  const random = options.random ?? Math.random;
  const candidates = pinned === undefined ? slots : 1;
  const startMs = clock.nowMs();
  const deadline = startMs + waitMs;
  let backoff = SLOT_WAIT_FIRST_MS;
  let told = false;
  for (;;) {
    const start = pinned ?? Math.min(slots - 1, Math.floor(random() * slots));
    const held: Array<{ slot: number; error: LeaseHeldError }> = [];
    for (let i = 0; i < candidates; i++) {
      const slot = (start + i) % slots;
      try {
        const lease = await store.acquire(slotKey(pipeline, experiment, slot, logId), owner, ttlMs);
        return { slot, lease, writerEpoch: formatWriterEpoch(slot, lease.epoch) };
      } catch (e) {
        if (!(e instanceof LeaseHeldError)) throw e;
        held.push({ slot, error: e });
      }
    }
    held.sort((a, b) => (a.error.holder?.expiresAtMs ?? Infinity) - (b.error.holder?.expiresAtMs ?? Infinity));
    const now = clock.nowMs();
    const stopped = options.stop?.() === true;
    if (now >= deadline || stopped) throw allHeld(pipeline, experiment, slots, pinned, held, now - startMs, stopped);
    if (!told && options.onWait) {
      told = true;
      const holders = held.flatMap(({ slot, error }) => (error.holder ? [{ slot, owner: error.holder.owner, epoch: error.holder.epoch, expiresAtMs: error.holder.expiresAtMs }] : [])).sort((a, b) => a.slot - b.slot);
      try {
        options.onWait({ pipeline, experiment, slots, slot: pinned ?? null, holders, firstFreeAtMs: held[0]?.error.holder?.expiresAtMs ?? null, untilMs: deadline });
      } catch {
        // a throwing listener must not end the wait
      }
    }
    // Wake when the first holder expires if that is sooner than the back-off (a crashed writer's
    // slot is taken as soon as it frees), never before 1 ms, never past the deadline.
    const firstFree = held[0]?.error.holder?.expiresAtMs ?? Infinity;
    const jittered = Math.round(backoff * (0.5 + random()));
    await clock.sleep(Math.max(1, Math.min(jittered, firstFree - now, deadline - now)));
    backoff = Math.min(backoff * 2, SLOT_WAIT_MAX_MS);
  }
}

/** The LeaseHeldError of a wait that ran out: every slot tried, its holder, the first to free. */
function allHeld(
  pipeline: string,
  experiment: string,
  slots: number,
  pinned: number | undefined,
  held: Array<{ slot: number; error: LeaseHeldError }>,
  waitedMs: number,
  stopped = false,
): LeaseHeldError {
  const first = held[0];
  const holders = held
    .slice()
    .sort((a, b) => a.slot - b.slot)
    .map(({ slot, error: e }) =>
      e.holder ? `slot ${slot}: ${JSON.stringify(e.holder.owner)} until ${e.holder.expiresAtMs}` : `slot ${slot}: held`,
    )
    .join('; ');
  const what =
    pinned === undefined
      ? `all ${slots} writer slots of ${pipeline}/${experiment} are held`
      : `writer slot ${pinned} of ${pipeline}/${experiment} is held`;
  return new LeaseHeldError(
    `${what} (waited ${waitedMs} ms${stopped ? ', then stopped waiting: the log is closing; nothing was written' : ''}): ${holders}; the first frees at ${first?.error.holder?.expiresAtMs ?? 'unknown'}` +
      (first ? ` (slot ${first.slot})` : ''),
    first?.error.holder,
    { cause: first?.error },
  );
}

/** Takes the experiment's maintainer lease (LeaseHeldError if another maintainer holds it). */
export async function acquireMaintainer(
  store: LeaseStore,
  options: { pipeline: string; experiment: string; logId?: string | null; owner: string; ttlMs: number },
): Promise<Lease> {
  return store.acquire(maintainerKey(options.pipeline, options.experiment, options.logId), options.owner, options.ttlMs);
}

export interface LeaseKeeperOptions {
  /** The ttl each renewal asks for. */
  ttlMs: number;
  /** Renewal period; default ttlMs / 3 (so two renewals may fail before expiry). */
  intervalMs?: number;
  /** Called once when the lease is lost (FencedError). */
  onLost?: (error: FencedError) => void;
  /** Times the renewals and `expired()`; defaults to the system clock. */
  clock?: Clock;
}

/**
 * Renews a lease in the background every ttl/3 from construction on (on the clock's timer: a
 * real one never keeps a process alive). `new LeaseKeeper(store, lease, ttlMs)` is short for
 * `{ ttlMs }`. Stops for good on FencedError (`lost` becomes true, `onLost` is called);
 * other errors (UnavailableError...) are kept in `lastError` and the next tick tries again.
 */
export class LeaseKeeper {
  private lease: Lease;
  private timer: (() => void) | undefined;
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

  /**
   * Renews now (waits for a renewal already running first, then sends its own). Throws what the
   * renewal threw. The one running is not taken for this one's answer: it may have been answered
   * before the process was paused past the lease, and then tells nothing of the lease now
   * (a maintenance pass ran its next steps beside the maintainer that took over).
   */
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
    this.timer?.();
    this.timer = undefined;
    await this.inFlight;
  }

  /** Stops, then releases the lease (a no-op if it was already superseded). */
  async release(): Promise<void> {
    await this.stop();
    if (!this.lostError) await this.store.release(this.lease);
  }

  private schedule(): void {
    this.timer = startTimer(this.clock, this.intervalMs, () => {
      this.timer = undefined;
      // Errors are recorded by renewNow (lost / lastError); the next tick tries again.
      this.renewNow().then(
        () => this.reschedule(),
        () => this.reschedule(),
      );
    });
  }

  private reschedule(): void {
    if (!this.stopped && !this.lostError && this.timer === undefined) this.schedule();
  }

  private markLost(e: FencedError): void {
    if (this.lostError) return;
    this.lostError = e;
    this.stopped = true;
    this.timer?.();
    this.timer = undefined;
    try {
      this.options.onLost?.(e);
    } catch {
      // a throwing callback must not break the keeper's bookkeeping
    }
  }
}
