/**
 * The writer of one process: owns a shard slot (a lease with an epoch), appends checkpoint
 * batches to its own shard generation, one Lance commit per group of queued requests (group
 * commit), and merges its own generations into the base.
 *
 * Ack protocol (docs/design/fencing.md): read the items' visible events -> assign seqs -> commit
 * rows to the shard -> claim each new checkpoint -> confirm the epoch is still the slot's
 * current one -> ack. A commit made after a takeover is above the seal, so no reader sees it,
 * and the confirmation fails, so nobody is told it is durable.
 */
import { toRows } from '../batch.ts';
import type { Clock } from '../clock.ts';
import { CorruptError, DgclError, FencedError, InternalError, InvalidInputError, UnavailableError } from '../errors.ts';
import { acquireWriterSlot, LeaseKeeper } from '../lease/slots.ts';
import type { Lease, LeaseStore } from '../lease/types.ts';
import { rowsToArrow } from '../schema.ts';
import type { ObjectStore } from '../storage/objects.ts';
import type { Ack, EventRow, PreparedBatch } from '../types.ts';
import { claimKey, parseShardName, sealKey, shardName, type Seal } from './layout.ts';
import { mergeGeneration, type MergeHooks } from './merge.ts';
import type { LogReader } from './reader.ts';
import { sqlIn, type LanceTables, type Table } from './tables.ts';

export interface WriterOptions {
  pipeline: string;
  experiment: string;
  owner: string;
  /** Number of shard slots of the experiment (writers beyond it wait for a free slot). */
  slots: number;
  /** Take this slot (tests, takeovers); default: any free one. */
  slot?: number;
  leaseTtlMs: number;
  /** Merge the own shard into the base after this many commits to one generation. */
  mergeEveryCommits: number;
  /** Upper bound of batches combined into one commit (one request is never split). */
  maxBatchesPerCommit: number;
  clock: Clock;
  hooks?: WriterHooks;
}

export interface WriterHooks extends MergeHooks {
  /** Called after the items were read and seqs assigned, before the shard commit (tests). */
  beforeCommit?(itemIds: readonly string[]): void | Promise<void>;
  /** Called after the shard commit, before claims and the epoch check (tests: crash here). */
  afterCommit?(shard: string, version: number): void | Promise<void>;
}

interface Frozen {
  st: SlotState;
  name: string;
  table: Table;
}

interface Request {
  batches: PreparedBatch[];
  resolve(acks: Ack[]): void;
  reject(e: unknown): void;
}

/** What the writer needs to know of an item to validate and sequence a batch. */
interface ItemTrack {
  created: boolean;
  rootItemId: string | null;
  parentItemId: string | null;
  terminal: boolean;
  lastSeq: number;
  /** checkpoint_id -> (event_id -> seq) */
  checkpoints: Map<string, Map<string, number>>;
}

/** Columns the writer reads to sequence batches: no values, no blobs. */
export const TRACK_COLUMNS = [
  'event_id',
  'item_id',
  'root_item_id',
  'parent_item_id',
  'item_seq',
  'checkpoint_id',
  'event_type',
  'writer_epoch',
] as const;

/** Placeholder epoch for a validation pass before the slot is taken; never written. */
const PENDING_EPOCH = 'pending';

interface SlotState {
  slot: number;
  lease: Lease;
  writerEpoch: string;
  keeper: LeaseKeeper;
  generation: number;
  table: Table | null;
  commitsInGen: number;
}

export class ShardWriter {
  private queue: Request[] = [];
  private running: Promise<void> | null = null;
  private state: SlotState | null = null;
  private closed = false;
  /**
   * Light rows this writer committed to its own not-yet-merged generations, by generation. It
   * is their only writer, so sequencing reads them from here instead of from storage (whose
   * cost grows with every commit until the merge).
   */
  private ownRows = new Map<string, EventRow[]>();
  /** The background merge of a frozen generation, if one runs (one at a time). */
  private merging: Promise<unknown> | null = null;

  constructor(
    private readonly ctx: { tables: LanceTables; objects: ObjectStore; reader: LogReader; leases: LeaseStore },
    private readonly opts: WriterOptions,
  ) {}

  get writerEpoch(): string | null {
    return this.state?.writerEpoch ?? null;
  }

  append(batches: PreparedBatch[]): Promise<Ack[]> {
    if (this.closed) return Promise.reject(new InternalError('the log was closed'));
    if (batches.length === 0) return Promise.resolve([]);
    return new Promise<Ack[]>((resolve, reject) => {
      this.queue.push({ batches, resolve, reject });
      this.kick();
    });
  }

  private exclusiveJobs: Array<() => Promise<void>> = [];

  /** Run `fn` between commits (nothing is being committed while it runs). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.exclusiveJobs.push(() => fn().then(resolve, reject));
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
      const job = this.exclusiveJobs.shift();
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
        await this.commitGroup(group);
      } catch (e) {
        for (const r of group) r.reject(e);
      }
    }
  }

  private async commitGroup(group: Request[]): Promise<void> {
    // Validate and sequence before taking a slot, so rejected input writes nothing (no lease,
    // no seal). A writer that has to take a slot first seals its predecessor, then reads the
    // items again: rows a zombie committed before the seal are visible from then on.
    let plan = await this.plan(group, this.state?.writerEpoch ?? PENDING_EPOCH);
    if (plan.rows.length === 0) {
      for (const p of plan.plans) p.req.resolve(p.acks);
      return;
    }
    const st = await this.ensureSlot();
    if (plan.epoch !== st.writerEpoch) plan = await this.plan(plan.plans.map((p) => p.req), st.writerEpoch);
    const { rows, plans } = plan;
    if (rows.length > 0) {
      await this.opts.hooks?.beforeCommit?.(plan.itemIds);
      const table = st.table ?? (st.table = await this.ctx.tables.createShard(shardName(st.writerEpoch, st.generation)));
      try {
        await table.add(rowsToArrow(rows) as never);
      } catch (e) {
        throw new UnavailableError(`commit to shard ${shardName(st.writerEpoch, st.generation)} failed: ${errMsg(e)}`, { cause: e });
      }
      st.commitsInGen++;
      const gen = shardName(st.writerEpoch, st.generation);
      const mine = this.ownRows.get(gen) ?? [];
      for (const r of rows) mine.push({ ...r, value_blob: null });
      this.ownRows.set(gen, mine);
      if (this.opts.hooks?.afterCommit) await this.opts.hooks.afterCommit(shardName(st.writerEpoch, st.generation), await table.version());
      // The epoch check comes before the claims: a zombie (its commit above the seal, never
      // visible) must not leave a claim that would later answer for the real copy.
      try {
        await this.ctx.leases.assertCurrent(st.lease);
      } catch (e) {
        if (e instanceof FencedError) this.dropSlot();
        throw e instanceof DgclError ? e : new UnavailableError(`epoch check failed: ${errMsg(e)}`, { cause: e });
      }
      // Claims: the first writer of a checkpoint to claim it defines its ack; a concurrent
      // duplicate (another writer committed the same batch) reports that ack as a duplicate.
      await Promise.all(
        plans.flatMap((p) =>
          p.fresh.map(async (ack) => {
            const won = await this.ctx.objects.putIfAbsent(claimKey(ack.checkpointId), JSON.stringify(ack));
            if (won) return;
            const body = await this.ctx.objects.get(claimKey(ack.checkpointId));
            if (body === null) return;
            const first = JSON.parse(body) as Ack;
            Object.assign(ack, { ...first, duplicate: true });
          }),
        ),
      );
    }
    for (const p of plans) p.req.resolve(p.acks);

    // Merge in the background: commits go on into the next generation meanwhile. A failed
    // merge leaves the generation visible; close() seals it and the maintainer merges it.
    if (st.commitsInGen >= this.opts.mergeEveryCommits && !this.merging) {
      const frozen = this.rotate();
      if (frozen) {
        this.merging = this.mergeFrozen(frozen)
          .catch(() => undefined)
          .finally(() => {
            this.merging = null;
          });
      }
    }
  }

  private async plan(group: Request[], writerEpoch: string) {
    const itemIds = [...new Set(group.flatMap((r) => r.batches.map((b) => b.itemId)))];
    const wanted = new Set(itemIds);
    // Snapshot the own rows before reading storage: a background merge that finishes during
    // the read moves them into the base (maybe after we read it) and drops them from memory.
    const own = [...this.ownRows.entries()];
    const existing = await this.ctx.reader.scan(sqlIn('item_id', itemIds), TRACK_COLUMNS, new Set(own.map(([name]) => name)));
    for (const [, rows] of own) for (const r of rows) if (wanted.has(r.item_id)) existing.push(r);
    const tracks = buildTracks(existing);
    const eventTsUs = this.opts.clock.nowMs() * 1000;
    const rows: EventRow[] = [];
    const plans: Array<{ req: Request; acks: Ack[]; fresh: Ack[] }> = [];
    for (const req of group) {
      try {
        const overlay = new Map<string, ItemTrack>();
        const acks: Ack[] = [];
        const fresh: Ack[] = [];
        const reqRows: EventRow[] = [];
        for (const b of req.batches) {
          const t = overlay.get(b.itemId) ?? cloneTrack(tracks.get(b.itemId));
          overlay.set(b.itemId, t);
          const { ack, rows: batchRows } = sequence(b, t, writerEpoch, eventTsUs);
          acks.push(ack);
          if (batchRows.length > 0) {
            fresh.push(ack);
            reqRows.push(...batchRows);
          }
        }
        for (const [id, t] of overlay) tracks.set(id, t);
        rows.push(...reqRows);
        plans.push({ req, acks, fresh });
      } catch (e) {
        req.reject(e);
      }
    }
    return { epoch: writerEpoch, itemIds, rows, plans };
  }

  private async ensureSlot(): Promise<SlotState> {
    if (this.state && !this.state.keeper.lost) return this.state;
    if (this.state) this.dropSlot();
    const { slot, lease, writerEpoch } = await acquireWriterSlot(this.ctx.leases, {
      pipeline: this.opts.pipeline,
      experiment: this.opts.experiment,
      owner: this.opts.owner,
      slots: this.opts.slots,
      ttlMs: this.opts.leaseTtlMs,
      ...(this.opts.slot !== undefined ? { slot: this.opts.slot } : {}),
    });
    const keeper = new LeaseKeeper(this.ctx.leases, lease, this.opts.leaseTtlMs);
    try {
      await sealPredecessors(this.ctx, slot, lease.epoch, writerEpoch, this.opts.clock);
    } catch (e) {
      keeper.stop();
      throw e;
    }
    this.state = { slot, lease, writerEpoch, keeper, generation: 1, table: null, commitsInGen: 0 };
    return this.state;
  }

  private dropSlot(): void {
    this.state?.keeper.stop();
    this.state = null;
    // A takeover decides what of our generations is visible (the seal): read them from storage.
    this.ownRows.clear();
  }

  /** Merge the own shard into the base now (between commits). */
  mergeOwn(): Promise<{ mergedRows: number; shards: string[] }> {
    return this.exclusive(() => this.mergeOwnUnlocked());
  }

  /**
   * Merge the own shard between commits (mergeOwn, close): after any background merge, freeze
   * the current generation and merge it.
   */
  private async mergeOwnUnlocked(): Promise<{ mergedRows: number; shards: string[] }> {
    await this.merging;
    const frozen = this.rotate();
    return frozen ? this.mergeFrozen(frozen) : { mergedRows: 0, shards: [] };
  }

  /**
   * Freeze the current generation: later commits go to a new one. Synchronous, and only called
   * between commits, so no commit can still land in the frozen generation.
   */
  private rotate(): Frozen | null {
    const st = this.state;
    if (!st || !st.table || st.commitsInGen === 0) return null;
    const frozen = { st, name: shardName(st.writerEpoch, st.generation), table: st.table };
    st.generation++;
    st.table = null;
    st.commitsInGen = 0;
    return frozen;
  }

  private async mergeFrozen(f: Frozen): Promise<{ mergedRows: number; shards: string[] }> {
    const version = await f.table.version();
    // A takeover may have sealed this generation below `version` (we were a zombie for a
    // while); then only the sealed part may reach the base, and the maintainer will do it.
    const seal = await this.ctx.reader.readSeal(f.st.writerEpoch);
    if (seal) return { mergedRows: 0, shards: [] };
    try {
      await this.ctx.leases.assertCurrent(f.st.lease);
    } catch (e) {
      if (e instanceof FencedError) {
        if (this.state === f.st) this.dropSlot();
        return { mergedRows: 0, shards: [] };
      }
      throw e;
    }
    const mergedRows = await mergeGeneration({ ...this.ctx, hooks: this.opts.hooks }, f.name, version);
    this.ownRows.delete(f.name);
    return { mergedRows, shards: [f.name] };
  }

  /** Merge, seal the own epoch (a clean end), release the slot. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.exclusive(async () => {
      const st = this.state;
      if (!st) return;
      try {
        await this.mergeOwnUnlocked();
        const s = this.state;
        if (s) {
          await sealOwnEpoch(this.ctx, s.writerEpoch, this.opts.clock);
          await this.ctx.leases.release(s.lease);
        }
      } finally {
        this.dropSlot();
      }
    });
    this.closed = true;
  }
}

/** Validate one batch against its item and give it seqs; mutates the track. */
function sequence(
  b: PreparedBatch,
  t: ItemTrack,
  writerEpoch: string,
  eventTsUs: number,
): { ack: Ack; rows: EventRow[] } {
  const eventIds = b.events.map((e) => e.eventId);
  const seen = t.checkpoints.get(b.checkpointId);
  if (seen) {
    const seqs = eventIds.map((id) => seen.get(id));
    if (seqs.some((s) => s === undefined)) {
      throw new InternalError(`checkpoint ${b.checkpointId} of item ${b.itemId} is only partly in the log`);
    }
    return {
      ack: { itemId: b.itemId, checkpointId: b.checkpointId, eventIds, firstSeq: seqs[0]!, lastSeq: seqs.at(-1)!, duplicate: true },
      rows: [],
    };
  }
  if (b.create && t.created) {
    throw new InvalidInputError(`item ${JSON.stringify(b.itemId)} already exists; only its first batch may have "create"`, { field: 'create' });
  }
  if (!b.create && !t.created) {
    throw new InvalidInputError(`item ${JSON.stringify(b.itemId)} does not exist: its first batch must have "create"`, { field: 'itemId' });
  }
  if (t.terminal) {
    throw new InvalidInputError(`item ${JSON.stringify(b.itemId)} is terminal: no event may follow a TERMINAL event`, { field: 'itemId' });
  }
  const firstSeq = t.lastSeq + 1;
  const rows = toRows(b, {
    firstSeq,
    writerEpoch,
    eventTsUs,
    ...(t.rootItemId !== null ? { rootItemId: t.rootItemId, parentItemId: t.parentItemId } : {}),
  });
  const ids = new Map<string, number>();
  for (const r of rows) ids.set(r.event_id, r.item_seq);
  t.checkpoints.set(b.checkpointId, ids);
  t.lastSeq = firstSeq + rows.length - 1;
  if (b.create) {
    t.created = true;
    t.rootItemId = b.create.rootItemId;
    t.parentItemId = b.create.parentItemId;
  }
  if (b.events.some((e) => e.eventType === 'TERMINAL')) t.terminal = true;
  return {
    ack: { itemId: b.itemId, checkpointId: b.checkpointId, eventIds, firstSeq, lastSeq: t.lastSeq, duplicate: false },
    rows,
  };
}

function emptyTrack(): ItemTrack {
  return { created: false, rootItemId: null, parentItemId: null, terminal: false, lastSeq: 0, checkpoints: new Map() };
}

function cloneTrack(t: ItemTrack | undefined): ItemTrack {
  if (!t) return emptyTrack();
  return { ...t, checkpoints: new Map(t.checkpoints) };
}

function buildTracks(rows: readonly EventRow[]): Map<string, ItemTrack> {
  const tracks = new Map<string, ItemTrack>();
  // Copies of one event: keep the smallest seq, as the fold does.
  const best = new Map<string, EventRow>();
  for (const r of rows) {
    const b = best.get(r.event_id);
    if (!b || r.item_seq < b.item_seq || (r.item_seq === b.item_seq && r.writer_epoch < b.writer_epoch)) best.set(r.event_id, r);
  }
  for (const r of best.values()) {
    let t = tracks.get(r.item_id);
    if (!t) tracks.set(r.item_id, (t = emptyTrack()));
    if (r.event_type === 'ITEM_CREATED') {
      t.created = true;
      t.rootItemId = r.root_item_id;
      t.parentItemId = r.parent_item_id;
    } else if (t.rootItemId === null) {
      t.rootItemId = r.root_item_id;
      t.parentItemId = r.parent_item_id;
    }
    if (r.event_type === 'TERMINAL') t.terminal = true;
    t.lastSeq = Math.max(t.lastSeq, r.item_seq);
    let ck = t.checkpoints.get(r.checkpoint_id);
    if (!ck) t.checkpoints.set(r.checkpoint_id, (ck = new Map()));
    ck.set(r.event_id, r.item_seq);
  }
  return tracks;
}

/**
 * The takeover step of a new epoch: seal every earlier epoch of the slot that still has
 * generations and no seal, then the direct predecessor (even without generations, so that a
 * zombie of it creating one later stays invisible). Ascending order: a crash in between never
 * leaves an unsealed epoch with acknowledged data below a sealed one.
 */
export async function sealPredecessors(
  ctx: { objects: ObjectStore; reader: LogReader; tables: LanceTables },
  slot: number,
  epoch: number,
  sealedBy: string,
  clock: Clock,
): Promise<void> {
  const listing = await ctx.reader.listShards();
  const byEpoch = new Map<number, { writerEpoch: string; gens: string[] }>();
  for (const s of [...listing.visible, ...listing.invisible, ...listing.retired]) {
    if (s.slot !== slot || s.epoch >= epoch) continue;
    const e = byEpoch.get(s.epoch) ?? { writerEpoch: s.writerEpoch, gens: [] };
    if (!listing.retired.some((r) => r.name === s.name)) e.gens.push(s.name);
    byEpoch.set(s.epoch, e);
  }
  // An epoch at or below a sealed one would be read as a zombie's (e.g. after DynamoDB TTL
  // deleted a lease record untouched for its grace period and the counter restarted).
  for (const sealed of listing.sealedEpochs) {
    const p = parseShardName(`${sealed}-g000000`);
    if (p && p.slot === slot && p.epoch >= epoch) {
      throw new CorruptError(`slot ${slot} was given epoch ${epoch}, but epoch ${p.epoch} of it is already sealed; the lease record was reset (DynamoDB TTL?). Release the slot and raise its epoch above ${p.epoch}.`);
    }
  }
  const prev = `s${String(slot).padStart(2, '0')}-e${String(epoch - 1).padStart(6, '0')}`;
  if (epoch > 1 && !byEpoch.has(epoch - 1)) byEpoch.set(epoch - 1, { writerEpoch: prev, gens: [] });
  for (const e of [...byEpoch.keys()].sort((a, b) => a - b)) {
    const { writerEpoch, gens } = byEpoch.get(e)!;
    if (listing.seals.has(writerEpoch) || (await ctx.reader.readSeal(writerEpoch))) continue;
    await writeSeal(ctx, writerEpoch, gens, sealedBy, clock);
  }
}

/** Seal an epoch's own generations at their current versions (a writer's clean end). */
export async function sealOwnEpoch(
  ctx: { objects: ObjectStore; reader: LogReader; tables: LanceTables },
  writerEpoch: string,
  clock: Clock,
): Promise<void> {
  const listing = await ctx.reader.listShards();
  const gens = [...listing.visible, ...listing.invisible].filter((s) => s.writerEpoch === writerEpoch).map((s) => s.name);
  await writeSeal(ctx, writerEpoch, gens, writerEpoch, clock);
}

async function writeSeal(
  ctx: { objects: ObjectStore; tables: LanceTables },
  writerEpoch: string,
  gens: readonly string[],
  sealedBy: string,
  clock: Clock,
): Promise<void> {
  const versions: Record<string, number> = {};
  for (const name of gens) {
    const t = await ctx.tables.shard(name);
    await t.checkoutLatest();
    versions[String(parseShardName(name)!.generation)] = await t.version();
  }
  const seal: Seal = { writerEpoch, gens: versions, sealedBy, sealedAtMs: clock.nowMs() };
  await ctx.objects.putIfAbsent(sealKey(writerEpoch), JSON.stringify(seal));
}

function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
