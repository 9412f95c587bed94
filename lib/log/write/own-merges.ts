/**
 * Merging a writer's own frozen generations into the base (docs/design/shards.md, "Merge"): in
 * the background after a commit, between commits (mergeOwn, close), and once the writer is idle.
 * Owned by ShardWriter (lib/log/write/writer.ts), which tells it its slot, whether it is closing
 * or busy, and drops its slot when a merge finds the epoch fenced.
 */
import { startTimer } from '../../clock.ts';
import { FencedError } from '../../errors.ts';
import { guard } from '../../guards.ts';
import type { LeaseStore } from '../../lease/types.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { mergeGeneration } from '../maintain/merge.ts';
import type { LogReader } from '../read/reader.ts';
import type { LanceTables } from '../tables.ts';
import type { Frozen, Generations, SlotState } from './generations.ts';
import type { OwnMemory } from './own-memory.ts';
import type { WriterOptions } from './writer-options.ts';

/** What OwnMerges asks of its writer. */
export interface MergingWriter {
  /** The writer's slot now (null: none). */
  current(): SlotState | null;
  /** Whether the writer's close() began. */
  closing(): boolean;
  /** Whether a request is queued or the commit loop runs. */
  busy(): boolean;
  /** A merge found the epoch of `st` fenced: drop the slot if it is still the writer's. */
  fenced(st: SlotState): void;
}

export class OwnMerges {
  /** Frozen generations waiting for their merge (a failed merge is retried after later commits). */
  frozen: Frozen[] = [];
  /** When this writer's last commit was confirmed (its clock), and the idle merge's timer. */
  lastCommitMs = 0;
  private idleTimer: (() => void) | null = null;
  /** The background merge of a frozen generation, if one runs (one at a time). */
  merging: Promise<unknown> | null = null;

  constructor(
    private readonly ctx: { tables: LanceTables; objects: ObjectStore; reader: LogReader; leases: LeaseStore },
    private readonly opts: WriterOptions,
    private readonly memory: OwnMemory,
    private readonly gens: Generations,
    private readonly w: MergingWriter,
  ) {}

  /** Stop the idle merge's timer (close()). */
  stopIdleTimer(): void {
    this.idleTimer?.();
    this.idleTimer = null;
  }

  /** Merge the frozen generations in the background, one merge at a time; commits go on meanwhile. */
  startMerge(): void {
    if (this.frozen.length === 0 || this.merging) return;
    // The merge starts once the next generation exists: made by the next commit while the
    // merge's base commit and fsync ran, it took several acks' time (the slowest acks). The
    // merge's base commit still slows the ack it overlaps (Lance's runtime on 2 cores).
    const ready = this.w.current()?.creating?.table;
    this.merging = (async () => {
      await ready?.catch(() => undefined);
      return this.mergeFrozenAll();
    })()
      .catch(() => undefined)
      .finally(() => {
        this.merging = null;
        // Failed: tried again after a later commit, by close(), or once the writer is idle.
        if (this.frozen.length > 0) this.armIdleMerge();
      });
  }

  /**
   * After a commit: merge the current generation once `mergeIdleMs` passed without another, so
   * a writer that stops writing (but keeps its log open) leaves nothing unmerged for long: every
   * read of the log, in every process, pays for each live generation (docs/design/shards.md,
   * "Merge"). The timer does not keep the process alive. Off (mergeIdleMs 0) by default on
   * hosts that freeze processes between requests (lib/index.ts `freezingHost`): a merge it
   * started after a request returned could be frozen mid-way (docs/design/deletion.md).
   */
  armIdleMerge(delay = this.opts.mergeIdleMs): void {
    const wait = this.opts.mergeIdleMs;
    if (wait <= 0 || this.idleTimer || this.w.closing()) return;
    this.idleTimer = startTimer(this.opts.clock, Math.max(1, delay), () => {
      this.idleTimer = null;
      const st = this.w.current();
      if (this.w.closing() || !st) return;
      if (this.w.busy()) return this.armIdleMerge();
      // Time through the writer's clock (a test's stands still until moved).
      const idleFor = this.opts.clock.nowMs() - this.lastCommitMs;
      // At most `wait`: a clock set back would otherwise put the next look beyond it.
      if (idleFor < wait) return this.armIdleMerge(Math.min(wait, wait - idleFor));
      // Nothing runs (no commit, no exclusive job): between commits, as rotate() needs. The
      // merge runs in the background like the one a commit starts, so an append that comes
      // meanwhile is not held by it; without a generation made ahead, its commit makes one.
      const f = this.gens.rotate();
      if (f) this.frozen.push(f);
      this.startMerge();
      void this.gens.giveUpAhead(st);
    });
  }

  /**
   * Merge the own shard between commits (mergeOwn, close): after any background merge, freeze
   * the current generation and merge every frozen one.
   */
  async mergeOwnUnlocked(): Promise<{ mergedRows: number; shards: string[] }> {
    await this.merging;
    const f = this.gens.rotate();
    if (f) this.frozen.push(f);
    return this.mergeFrozenAll();
  }

  /** Merge frozen generations oldest first; one that fails stays queued (and stops the round). */
  private async mergeFrozenAll(): Promise<{ mergedRows: number; shards: string[] }> {
    const out = { mergedRows: 0, shards: [] as string[] };
    while (this.frozen.length > 0) {
      const f = this.frozen[0]!;
      const r = await this.mergeFrozen(f);
      if (this.frozen[0] === f) this.frozen.shift();
      out.mergedRows += r.mergedRows;
      out.shards.push(...r.shards);
    }
    const st = this.w.current();
    if (st && st.givenUp.length > 0) await this.gens.retireGivenUp(st);
    return out;
  }

  private async mergeFrozen(f: Frozen): Promise<{ mergedRows: number; shards: string[] }> {
    const version = await f.table.version();
    // A takeover may have sealed this generation below `version` (we were a zombie for a
    // while); then only the sealed part may reach the base, and the maintainer will do it.
    const checked = guard('merge-own-only-in-current-epoch');
    const seal = checked ? await this.ctx.reader.readSeal(f.st.writerEpoch) : null;
    if (seal) {
      // Fenced (a takeover sealed the epoch): the maintainer merges the sealed part.
      this.w.fenced(f.st);
      return { mergedRows: 0, shards: [] };
    }
    try {
      if (checked) await this.ctx.leases.assertCurrent(f.st.lease);
    } catch (e) {
      if (e instanceof FencedError) {
        this.w.fenced(f.st);
        return { mergedRows: 0, shards: [] };
      }
      throw e;
    }
    const copy = f.inBase.rows === null ? await this.memory.copyOf(f.name, f.table) : undefined;
    const mergedRows = await mergeGeneration({ ...this.ctx, hooks: this.opts.hooks }, f.name, version, copy, f.inBase);
    this.memory.merged(f.name);
    return { mergedRows, shards: [f.name] };
  }
}
