/**
 * The writer of one process: owns a shard slot (a lease with an epoch), appends checkpoint
 * batches to its own shard generation, one Lance commit per group of queued requests (group
 * commit), and merges its own generations into the base.
 *
 * Ack protocol (docs/design/fencing.md, docs/design/invariants.md): read the items' visible
 * events -> assign seqs -> commit rows to the shard -> confirm the epoch is still the slot's
 * current one -> claim each new checkpoint -> ack. A commit made after a takeover is above the
 * seal, so no reader sees it, and the confirmation fails, so nobody is told it is durable.
 *
 * What the writer keeps in memory (its own rows, item tracks) only ever holds confirmed commits.
 * A commit whose outcome is unknown (the add or the epoch check failed) ends the epoch: the
 * writer seals it at whatever landed, forgets its memory, and continues under a new epoch, so a
 * late-landing commit can never surface, and a retry reads the truth from storage.
 */
import type { LogContext } from './log-context.ts';
import { DgclError, FencedError, InternalError, PermissionDeniedError, UnavailableError } from '../../errors.ts';
import { permissionOf } from '../read/damage.ts';
import { guard } from '../../guards.ts';
import type { Lease } from '../../lease/types.ts';
import type { Ack, EventRow, PreparedBatch } from '../../types.ts';
import type { Table as ArrowTable } from 'apache-arrow';
import { deleteItemNow } from './delete-item.ts';
import { PENDING_EPOCH, planGroup, RecordsRebuiltError, type Request } from './plan.ts';
import { CHOICE_KEY } from '../../coord/choose.ts';
import { Generations, MAKE_AHEAD_COMMITS, MAKE_AHEAD_SHARE, type SlotState } from './generations.ts';
import { OwnMemory } from './own-memory.ts';
import { OwnMerges } from './own-merges.ts';
import { Markers } from './markers.ts';
import { shardName } from '../layout.ts';
import { sealOwnEpoch } from '../maintain/seal.ts';
import { takeSlot } from './slot.ts';
import type { ItemTrack } from './sequence.ts';
import { commitData, committedBytes, committedTable } from './lance-add.ts';
import type { WriterOptions } from './writer-options.ts';

export type { WriterHooks, WriterOptions } from './writer-options.ts';

/** Bytes counted per row for the size bound where a commit's encoded size is not known. */
const GUESSED_ROW_BYTES = 512;

export class ShardWriter {
  private queue: Request[] = [];
  private running: Promise<void> | null = null;
  private state: SlotState | null = null;
  private closing = false;
  private closed = false;
  /** An epoch ended by a failed commit whose seal is not written yet: sealed before any new commit. */
  private unsealed: SlotState | null = null;
  /** The lease of the epoch close() sealed, until released (a close() whose release failed is run again). */
  private unreleased: Lease | null = null;
  /** Item markers, claims and deleted-seq records (coordination records). */
  private readonly markers: Markers;
  /** Own rows, the landing commit and merge copies: memory of confirmed commits. */
  private readonly memory: OwnMemory;
  /** Generations made ahead, given up, abandoned and retired; rotation. */
  private readonly gens: Generations;
  /** Frozen generations and their merges: in the background, between commits, when idle. */
  private readonly merges: OwnMerges;
  /** Tracks of items this writer sequenced (LRU, `cachedItems`); see planGroup (lib/log/write/plan.ts). */
  private tracks = new Map<string, { track: ItemTrack; marker: string }>();
  private exclusiveJobs: Array<() => Promise<void>> = [];

  constructor(
    private readonly ctx: LogContext & {
      /** Resolves once the log's base is known readable; refuses a group otherwise (nothing written). */
      checkBase?: () => Promise<void>;
    },
    private readonly opts: WriterOptions,
  ) {
    this.markers = new Markers(ctx, opts);
    this.memory = new OwnMemory(opts);
    this.gens = new Generations(ctx, opts, () => this.state, () => this.closing);
    this.merges = new OwnMerges(ctx, opts, this.memory, this.gens, {
      current: () => this.state,
      closing: () => this.closing,
      busy: () => this.queue.length > 0 || !!this.running,
      fenced: (st) => {
        if (this.state === st) this.dropSlot();
      },
    });
  }

  /**
   * The light rows of `items` in own generation `gen` from the commits confirmed so far
   * (lib/log/write/own-memory.ts `OwnMemory.itemRows`).
   */
  ownItemRows(gen: string, items: readonly string[]): EventRow[] | null {
    return this.memory.itemRows(gen, items);
  }

  get writerEpoch(): string | null {
    return this.state?.writerEpoch ?? null;
  }

  append(batches: PreparedBatch[]): Promise<Ack[]> {
    if (this.closing) return Promise.reject(new InternalError('the log is closed (or closing): open it again to append'));
    if (batches.length === 0) return Promise.resolve([]);
    return new Promise<Ack[]>((resolve, reject) => {
      this.queue.push({ batches, resolve, reject });
      this.kick();
    });
  }

  /** Run `fn` between commits (nothing is being committed while it runs). */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const fail = (e: unknown) => reject(e instanceof DgclError ? e : new UnavailableError(`${errMsg(e)}`, { cause: e }));
      this.exclusiveJobs.push(() => fn().then(resolve, fail));
      this.kick();
    });
  }

  private kick(): void {
    if (this.running) return;
    this.running = this.loop().finally(() => {
      this.running = null;
      if (this.queue.length > 0 || this.exclusiveJobs.length > 0) this.kick();
    });
  }

  private async loop(): Promise<void> {
    while (this.queue.length > 0 || this.exclusiveJobs.length > 0) {
      // Closing: requests that were queued before close() are served before it runs.
      const job = this.closing && this.queue.length > 0 ? undefined : this.exclusiveJobs.shift();
      if (job) {
        await job();
        continue;
      }
      const group: Request[] = [];
      let n = 0;
      while (this.queue.length > 0) {
        const next = this.queue[0]!;
        if (group.length > 0 && n + next.batches.length > this.opts.maxBatchesPerCommit) break;
        group.push(this.queue.shift()!);
        n += next.batches.length;
      }
      if (group.length === 0) continue;
      try {
        await this.ctx.checkBase?.();
        await this.commitGroup(group);
      } catch (e) {
        // Taking a slot (its takeover's seals) may fail on Lance's plain errors: storage trouble.
        const err = e instanceof DgclError ? e : new UnavailableError(`append failed: ${errMsg(e)}`, { cause: e });
        for (const r of group) r.reject(err);
      }
      this.gens.retireAbandoned();
    }
  }

  private async commitGroup(group: Request[]): Promise<void> {
    // Validate and sequence before taking a slot, so rejected input writes nothing (no lease,
    // no seal). A writer that has to take a slot first seals its predecessor, then reads the
    // items again: rows a zombie committed before the seal are visible from then on.
    let plan = await this.rebuiltEndsEpoch(() => this.plan(group, this.state?.writerEpoch ?? PENDING_EPOCH));
    if (plan.rows.length === 0) {
      for (const p of plan.plans) p.req.resolve(p.acks);
      return;
    }
    const st = await this.ensureSlot();
    if (plan.epoch !== st.writerEpoch) plan = await this.rebuiltEndsEpoch(() => this.plan(plan.plans.map((p) => p.req), st.writerEpoch));
    await this.rebuiltEndsEpoch(() => this.sameScope(st));
    const { rows, plans } = plan;
    if (rows.length === 0) {
      for (const p of plans) p.req.resolve(p.acks);
      return;
    }
    // The generation this group commits to; moves on if making it fails (openGeneration).
    let gen = shardName(st.writerEpoch, st.generation);
    const writing = new Set(rows.map((r) => r.item_id));
    let committing = false;
    /** The commit's bytes as encoded (a guess per row where not encoded): the size bound and the copy's. */
    let committed = 0;
    let committedCopy: ArrowTable | null = null;
    try {
      // Items we begin writing: mark them ours before the commit, so a writer that cached them
      // reads them again instead of trusting its copy. Each PUT has a body of its own (epoch +
      // counter): a PUT that times out and lands later must not pass for a newer one.
      // Every PUT ends (its tries included) before the group is answered: one failing must not
      // leave another's retry writing after the caller was told, or after close().
      const begun = guard('marker-before-commit') ? [...writing].filter((id) => plan.markers.get(id) !== plan.ownMarkers.get(id)) : [];
      const puts = await Promise.allSettled(
        begun.map(async (id) => {
          const body = await this.markers.putMarker(id, st.writerEpoch);
          plan.ownMarkers.set(id, body);
          plan.markers.set(id, body);
        }),
      );
      for (const p of puts) if (p.status === 'rejected') throw p.reason;
      // Durable before the rows: a power cut that kept the rows but lost a new item's marker
      // would make the item look new (no marker: never written) and its next batch reuse its
      // seqs. A store whose answered writes are durable has no sync.
      // The rows are encoded (pure, ~9 ms for 2,500 rows) while the fsync runs on the thread pool.
      // An encode that throws fails the group before anything was sent: no epoch ends.
      const coord = await this.ctx.coord();
      const syncing = begun.length > 0 ? coord.sync?.() : undefined;
      syncing?.catch(() => undefined); // awaited below; a failed encode must not leave it unhandled
      const data = commitData(rows);
      committed = committedBytes(data) ?? rows.length * GUESSED_ROW_BYTES;
      committedCopy = committedTable(data);
      await syncing;
      await this.opts.hooks?.beforeCommit?.(plan.itemIds, st.table ? gen : null, st.writerEpoch);
      const table = st.table ?? (st.table = await this.gens.openGeneration(st));
      gen = shardName(st.writerEpoch, st.generation);
      if (guard('landing-mark')) this.memory.landing = { gen, items: writing };
      committing = true;
      await table.add(data as never);
      if (!guard('claim-after-epoch-check')) await this.markers.claimAll(plans, st.writerEpoch);
      st.commitsInGen++;
      st.bytesInGen += committed;
      this.merges.lastCommitMs = this.opts.clock.nowMs();
      if (this.opts.hooks?.afterCommit) await this.opts.hooks.afterCommit(gen, await table.version());
      // Durable (fsync; a no-op on object stores) and confirmed before the claims and the ack.
      // The two run at once: the epoch check must start after the commit became visible (the
      // add returned), not after it became durable. A failed fsync ends the epoch even if the
      // check passed, as before it. The epoch check comes before the claims: a zombie (its
      // commit above the seal, never visible) must not leave a claim that would later answer
      // for the real copy.
      const [synced, confirmed] = await Promise.allSettled([this.ctx.tables.sync(gen), guard('epoch-check') ? this.ctx.leases.assertCurrent(st.lease) : undefined]);
      if (synced.status === 'rejected') throw synced.reason;
      if (confirmed.status === 'rejected') throw confirmed.reason;
    } catch (e) {
      // The cached tracks stay true: a failure before the add changed nothing they rest on (the
      // plan dropped each one whose marker is no longer ours), and after it the epoch ends,
      // which drops them all.
      if (committing && guard('end-epoch-on-unknown-outcome')) await this.endEpoch(st, e);
      else if (committing) this.keepCommit(st, gen, rows, plan, committedCopy, committed);
      // endEpoch dropped the slot (and with it what was kept) if it was still ours; else it had
      // been dropped before: nothing of this generation is kept either way.
      if (this.memory.landing?.gen === gen) this.memory.landing = null;
      throw e instanceof DgclError ? e : new UnavailableError(`commit to shard ${gen} failed: ${errMsg(e)}`, { cause: e });
    }
    // Confirmed: from here on the rows are visible to every read, forever.
    this.keepCommit(st, gen, rows, plan, committedCopy, committed);
    // Claims: the first writer of a checkpoint to claim it defines its ack; a concurrent
    // duplicate (another writer committed the same batch) reports that ack as a duplicate.
    // A claim that fails fails only its own request: the data is durable, and a retry is
    // answered from the log as a duplicate. So a refused claim PUT is UNAVAILABLE, not
    // PERMISSION_DENIED, which would say a retry cannot help.
    await Promise.all(
      plans.map(async (p) => {
        try {
          if (guard('claims') && guard('claim-after-epoch-check')) await Promise.all(p.fresh.map((ack) => this.markers.claim(ack, st.writerEpoch)));
          p.req.resolve(p.acks);
        } catch (e) {
          const refused = e instanceof PermissionDeniedError ? e : permissionOf(e, this.ctx.objects.baseUri);
          if (refused) p.req.reject(new UnavailableError(`the batch is written (durable), but its claim was refused: ${refused.message}; a retry is answered from the log (duplicate: true)`, { cause: refused }));
          else p.req.reject(e instanceof DgclError ? e : new UnavailableError(`claim failed: ${errMsg(e)}`, { cause: e }));
        }
      }),
    );

    // Merge in the background: commits go on into the next generation meanwhile. A failed
    // merge is tried again after a later commit, and by close(); the maintainer merges what is
    // left once the epoch is sealed.
    const { mergeEveryCommits, mergeEveryBytes } = this.opts;
    if (st.commitsInGen >= Math.max(1, mergeEveryCommits - MAKE_AHEAD_COMMITS) || st.bytesInGen >= mergeEveryBytes * MAKE_AHEAD_SHARE) this.gens.makeAhead(st);
    if (st.commitsInGen >= mergeEveryCommits || st.bytesInGen >= mergeEveryBytes) {
      const f = this.gens.rotate();
      if (f) this.merges.frozen.push(f);
    }
    this.merges.startMerge();
    this.merges.armIdleMerge();
  }

  /**
   * Keep a confirmed commit: its rows (what this process's reads and sequencing take from memory),
   * its merge copy and its items' tracks. The rows are kept and the landing mark cleared in one
   * synchronous step: no read sees neither. Only while the slot is still ours: a background merge
   * that found the epoch fenced dropped it (and all of the generation kept so far) while this
   * commit was being confirmed.
   */
  private keepCommit(st: SlotState, gen: string, rows: EventRow[], plan: { tracks: Map<string, ItemTrack>; markers: Map<string, string | null>; ownMarkers: Map<string, string> }, copy: ArrowTable | null, bytes: number): void {
    this.memory.landing = null;
    if (this.state === st) {
      this.memory.keep(gen, rows, copy, bytes);
      for (const [id, track] of plan.tracks) {
        const marker = plan.ownMarkers.get(id);
        if (marker === undefined || plan.markers.get(id) !== marker) continue;
        this.tracks.delete(id); // re-insert: the Map's order is the LRU order
        this.tracks.set(id, { track, marker });
      }
    }
    for (const old of this.tracks.keys()) {
      if (this.tracks.size <= this.opts.cachedItems) break;
      this.tracks.delete(old);
    }
  }

  /**
   * After a commit whose outcome is unknown: end the epoch. Seal it at whatever landed (a commit
   * landing later stays invisible), drop the slot and everything remembered of it. If the seal
   * cannot be written now, no commit happens before it is.
   */
  private async endEpoch(st: SlotState, cause: unknown): Promise<void> {
    if (this.state === st) this.dropSlot();
    this.merges.frozen = this.merges.frozen.filter((f) => f.st !== st);
    if (cause instanceof FencedError || !guard('seal-own-epoch-before-next')) return; // the new owner seals it
    this.unsealed = st;
    await this.sealUnsealed().catch(() => undefined);
  }

  /** `release: 'later'`: keep the sealed epoch's lease in `unreleased` for the caller (close()). */
  private async sealUnsealed(release: 'quietly' | 'later' = 'quietly'): Promise<void> {
    const st = this.unsealed;
    if (!st) return;
    await sealOwnEpoch(this.ctx, st.writerEpoch, this.opts.clock);
    this.unsealed = null;
    if (release === 'later') this.unreleased = st.lease;
    else await this.ctx.leases.release(st.lease).catch(() => undefined);
  }

  /**
   * `plan`, ending the epoch when it finds the log's records rebuilt: the slot is a lease of the old
   * scope, which the repair took (its next renewal would fail). Sealed now, at what it committed,
   * the writer takes a slot of the new records at once, instead of after its lease keeper found out.
   */
  private async rebuiltEndsEpoch<T>(plan: () => Promise<T>): Promise<T> {
    try {
      return await plan();
    } catch (e) {
      if (e instanceof RecordsRebuiltError && this.state) {
        // A log dropped under the writer has no record at all: nothing is left to hide its commits
        // from, and a seal would make files appear at a place that holds no log.
        if ((await this.ctx.objects.get(CHOICE_KEY).catch(() => '')) === null) this.dropSlot();
        else await this.endEpoch(this.state, e);
      }
      throw e;
    }
  }

  /**
   * The records the group was planned with are those the slot was taken under: another user of
   * this log's records (a maintenance pass in this process) may have found them rebuilt and moved
   * to the new ones, with no error seen here. No request: the record kept in memory.
   */
  private async sameScope(st: SlotState): Promise<void> {
    const now = (await this.ctx.leaseScope({ create: true })).record;
    if (st.scopeRecord !== null && now !== st.scopeRecord) {
      throw new RecordsRebuiltError(`the records of the log ${this.ctx.objects.baseUri} were rebuilt (a repair or adoption) while this writer held slot ${st.slot}; nothing was written, retry`);
    }
  }

  /** Read, validate and sequence a group (lib/log/write/plan.ts `planGroup`). */
  private plan(group: Request[], writerEpoch: string) {
    return planGroup({ ctx: this.ctx, opts: this.opts, tracks: this.tracks, ownRows: this.memory.ownRows, markers: this.markers }, group, writerEpoch);
  }

  private async ensureSlot(): Promise<SlotState> {
    if (this.state && !this.state.keeper.lost) return this.state;
    if (this.state) this.dropSlot();
    await this.sealUnsealed();
    // A log repaired or adopted meanwhile has new records: nothing cached of the old ones holds.
    this.state = await takeSlot(this.ctx, this.opts, () => this.closing, () => this.tracks.clear());
    return this.state;
  }

  private dropSlot(): void {
    const st = this.state;
    st?.keeper.stop();
    if (st?.creating) this.gens.abandon(st);
    if (st) this.ctx.tables.forget(shardName(st.writerEpoch, st.generation));
    this.state = null;
    // A takeover decides what of our generations is visible (the seal): read them from storage,
    // on fresh handles (ours were opened without read consistency).
    for (const gen of this.memory.ownRows.keys()) this.ctx.tables.forget(gen);
    this.memory.clear();
    this.tracks.clear();
  }

  /**
   * Delete an item (docs/design/deletion.md): between commits, put the item's marker (no writer's
   * cached copy of it is trusted after this), read its last visible seq, and write the tombstone
   * hiding its events up to it. Writes no Lance row and takes no slot. An item without visible
   * events is not deleted (`deleted: false`), so a retried delete is harmless, unless the item
   * was created again meanwhile: `guardSeq` (the last seq the caller saw, checked by
   * checkDeleteOptions) then decides (lib/log/write/delete-guard.ts); a refused delete writes no
   * tombstone and no deleted-seq record (the marker PUT only makes writers re-read the item).
   * Run by lib/log/write/delete-item.ts `deleteItemNow`.
   */
  deleteItem(itemId: string, guardSeq?: number): Promise<{ itemId: string; deleted: boolean; throughSeq: number }> {
    if (this.closing) return Promise.reject(new InternalError('the log is closed (or closing): open it again to delete'));
    return this.exclusive(() => deleteItemNow({ ctx: this.ctx, opts: this.opts, tracks: this.tracks, ownRows: this.memory.ownRows, markers: this.markers }, itemId, guardSeq));
  }

  /**
   * Resolves once nothing is being committed and no background merge or retirement runs. The
   * commit loop first: a commit answers its callers before it starts the merge it triggers.
   */
  async idle(): Promise<void> {
    while (this.running || this.merges.merging || this.gens.retiring.size > 0) {
      await this.running?.catch(() => undefined);
      await this.merges.merging;
      await Promise.allSettled([...this.gens.retiring]);
    }
  }

  /** Merge the own shard into the base now (between commits), leaving no generation made ahead. */
  mergeOwn(): Promise<{ mergedRows: number; shards: string[] }> {
    return this.exclusive(async () => {
      const merged = await this.merges.mergeOwnUnlocked();
      const st = this.state;
      if (st) await this.gens.giveUpAhead(st);
      return merged;
    });
  }

  /**
   * Serve what was queued, merge (best effort: the maintainer merges what is left), seal the own
   * epoch (a clean end), release the slot. Appends after close() began are refused.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closing = true;
    this.merges.stopIdleTimer();
    await this.exclusive(async () => {
      await this.merges.mergeOwnUnlocked().catch(() => undefined);
      const st = this.state;
      if (st) await this.gens.retireUnused(st).catch(() => undefined);
      if (st) {
        this.dropSlot();
        this.unsealed = st;
      }
      this.merges.frozen = [];
      this.gens.retireAbandoned();
      await Promise.allSettled([...this.gens.retiring]);
      await this.sealUnsealed('later');
      // The slot is free for the next writer now rather than when its lease expires: a release
      // that fails fails the close, and a close() again (this job again) retries it.
      const lease = this.unreleased;
      if (lease) {
        await this.ctx.leases.release(lease).catch((e: unknown) => {
          if (e instanceof DgclError && !e.retryable) throw e;
          throw new UnavailableError(`releasing writer slot lease ${lease.key} (epoch ${lease.epoch}) failed: ${errMsg(e)}; close() again to retry, or the slot frees when the lease expires`, { cause: e });
        });
        this.unreleased = null;
      }
    });
    this.closed = true;
  }
}

function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
