/**
 * A writer's shard generations (docs/design/shards.md, "Merge"): the slot state they belong to,
 * rotation, the generation made ahead, names given up after a failed making, and the
 * retirement of generations no commit took. Owned by ShardWriter (lib/log/write/writer.ts),
 * which tells it the current slot and whether it is closing.
 */
import { DgclError, UnavailableError } from '../../errors.ts';
import { guard } from '../../guards.ts';
import type { LeaseKeeper } from '../../lease/slots.ts';
import type { Lease, LeaseStore } from '../../lease/types.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { genKey, shardName } from '../layout.ts';
import { retireGeneration, type MergeHooks } from '../maintain/merge.ts';
import { failedBeforeMarker, type LanceTables, type Table } from '../tables.ts';

/**
 * The next generation is made this many commits before the rotation (docs/design/shards.md,
 * "Merge"): its making (~10-30 ms with its first fsync round, more beside a merge) is then done
 * when its first commit comes, even when acks follow each other without a pause.
 */
export const MAKE_AHEAD_COMMITS = 4;
/** ... or once its commits reach this share of `mergeEveryBytes`. */
export const MAKE_AHEAD_SHARE = 0.75;
/** Merge rounds a given-up generation's marker is looked for before the name is left to the seal (retireGivenUp). */
const GIVEN_UP_ROUNDS = 3;

export interface SlotState {
  slot: number;
  /** The log's coordination record the slot's lease was taken under (its scope; null: none yet). */
  scopeRecord: string | null;
  lease: Lease;
  writerEpoch: string;
  keeper: LeaseKeeper;
  generation: number;
  table: Table | null;
  commitsInGen: number;
  /** Bytes of the current generation's commits (as encoded for them). */
  bytesInGen: number;
  /** The next generation, made MAKE_AHEAD_COMMITS before the rotation; taken by its first commit. */
  creating: { gen: string; table: Promise<Table> } | null;
  /**
   * Names whose making failed after their marker PUT was sent (openGeneration), until retired
   * once the marker is seen, or left to the seal after GIVEN_UP_ROUNDS rounds without it
   * (retireGivenUp).
   */
  givenUp: Array<{ gen: string; rounds: number }>;
}

export interface Frozen {
  st: SlotState;
  name: string;
  table: Table;
  /** Set once its base commit succeeded: a retry after a failed retirement only retires. */
  inBase: { rows: number | null };
}

export class Generations {
  /**
   * Dropped slots whose made-ahead generation no commit took (yet: the commit running when the
   * slot was dropped may still take it). Retired between commits (retireAbandoned), so that
   * nothing of them outlives close().
   */
  private abandoned: SlotState[] = [];
  /** Retirements of abandoned made-ahead generations in flight (awaited by close()). */
  readonly retiring = new Set<Promise<void>>();

  constructor(
    private readonly ctx: { tables: LanceTables; objects: ObjectStore; leases: LeaseStore },
    private readonly opts: { hooks?: MergeHooks },
    /** The writer's slot now (null: none). */
    private readonly current: () => SlotState | null,
    /** Whether the writer's close() began. */
    private readonly closing: () => boolean,
  ) {}

  /** A dropped slot whose made-ahead generation no commit took (yet): retired by retireAbandoned. */
  abandon(st: SlotState): void {
    this.abandoned.push(st);
  }

  /**
   * After a rotation between commits (the idle timer's, mergeOwn's): give up the generation made
   * ahead that no commit took, so that a writer that stopped leaves no live generation (every
   * read in every process checks each for a newer version). Its name is given up like a failed
   * making's (the next commit makes the one after it, on its ack path, so no commit meets the
   * retirement) and retired the way given-up names are: only in an epoch confirmed current (a
   * retirement under a maintainer's merge of the sealed epoch failed that merge),
   * and once its marker is seen, asked again after later merge rounds and by close() (a marker
   * PUT that timed out may land later). close() and idle() wait for it.
   */
  giveUpAhead(st: SlotState): Promise<void> {
    const ahead = st.creating;
    if (!ahead || ahead.gen !== shardName(st.writerEpoch, st.generation) || st.table) return Promise.resolve();
    st.creating = null;
    st.generation++;
    const p: Promise<void> = ahead.table
      .then(
        () => true,
        (e: unknown) => !failedBeforeMarker(e), // a making that failed before its marker left nothing listed
      )
      .then((listed) => {
        if (!listed) return;
        st.givenUp.push({ gen: ahead.gen, rounds: 0 });
        return this.retireGivenUp(st);
      })
      .catch(() => undefined) // what is left is asked again after later merges, by close(), or the seal's
      .finally(() => this.retiring.delete(p));
    this.retiring.add(p);
    return p;
  }

  /**
   * Freeze the current generation: later commits go to a new one. Synchronous, and only called
   * between commits, so no commit can still land in the frozen generation.
   */
  rotate(): Frozen | null {
    const st = this.current();
    if (!st || !st.table || st.commitsInGen === 0) return null;
    const frozen = { st, name: shardName(st.writerEpoch, st.generation), table: st.table, inBase: { rows: null } };
    st.generation++;
    st.table = null;
    st.commitsInGen = 0;
    st.bytesInGen = 0;
    return frozen;
  }

  /**
   * Make the next generation now, MAKE_AHEAD_COMMITS before the rotation, in the background, so
   * that its first commit does not wait for its making. Until that commit it is an empty
   * generation, as a new one is for a moment anyway; one never committed to is retired by
   * close(), or merged (empty) by the maintainer once its epoch is sealed. Its name is never
   * used for another: the next rotation moves on to it, and close() ends the epoch.
   */
  makeAhead(st: SlotState): void {
    const gen = shardName(st.writerEpoch, st.generation + 1);
    if (this.current() !== st || this.closing() || st.creating?.gen === gen) return;
    const table = this.ctx.tables.createShard(gen);
    table.catch(() => undefined); // its first commit gives the name up and makes the next
    st.creating = { gen, table };
  }

  /**
   * The table of the slot's current generation: the one made ahead, or made now. A name whose
   * making failed is never made again: the making may have landed (its marker put, the answer
   * lost), and a second making of the same name after a takeover had sealed the epoch and a
   * maintainer had merged and retired the generation brought its marker back over a deleted
   * dataset, which every later read then failed on, for good (simulation seed 18370). So the
   * name is given up and the next one made; after a second failure the commit fails. A given-up
   * name is not retired at once: its marker may still land (a PUT that timed out), and one
   * landing after the retirement is a marker without a dataset in a live epoch, which reads fail
   * on (seed 20544). Made (and synced) before its marker, the dataset is there if the marker is:
   * an empty generation, retired once its marker is seen (retireGivenUp), or else merged (empty)
   * and retired by the maintainer after the epoch's seal.
   */
  async openGeneration(st: SlotState): Promise<Table> {
    const tried: string[] = [];
    for (;;) {
      const gen = shardName(st.writerEpoch, st.generation);
      const ahead = st.creating;
      if (ahead?.gen === gen) st.creating = null;
      try {
        return await (ahead?.gen === gen ? ahead.table : this.ctx.tables.createShard(gen));
      } catch (e) {
        if (shardName(st.writerEpoch, st.generation) === gen && guard('give-up-failed-names')) st.generation++;
        if (!failedBeforeMarker(e) && guard('give-up-failed-names')) st.givenUp.push({ gen, rounds: 0 });
        tried.push(gen);
        // A slot dropped meanwhile (a background merge found the epoch over) makes nothing more.
        if (tried.length >= 2 || this.current() !== st) {
          if (e instanceof DgclError) throw e;
          throw new UnavailableError(`making shard generation ${tried.join(', then ')} failed: ${errMsg(e)}`, { cause: e });
        }
      }
    }
  }

  /**
   * Retire the slot's given-up generations whose marker is there (after a merge round, and by
   * close()): otherwise each stays listed, an empty dataset every read opens, until the epoch is
   * sealed and the maintainer merges it. Only once its marker is seen: the marker is sent once,
   * so a marker that is there has no other copy to come, while one not there yet may still land
   * (a PUT that timed out), and landing after the retirement it would be a marker without a
   * dataset in a live epoch. Those are asked again after the next rounds, then
   * left to the seal (a PUT lands within its timeout or, nearly always, never). Nothing is
   * retired in an epoch not confirmed current (over, or the lease store not answering): they are
   * left to the seal, and the maintainer merges them (a retirement under its merge failed that
   * merge once).
   */
  async retireGivenUp(st: SlotState): Promise<void> {
    const names = st.givenUp.splice(0);
    const current = await this.ctx.leases.assertCurrent(st.lease).then(
      () => true,
      () => false,
    );
    if (!current) return;
    await Promise.all(
      names.map(async (g) => {
        const landed =
          !guard('retire-given-up-once-marker-seen') ||
          (await this.ctx.objects.get(genKey(g.gen)).then(
            (body) => body !== null,
            () => false,
          ));
        if (!landed) {
          if (++g.rounds < GIVEN_UP_ROUNDS) st.givenUp.push(g);
          return;
        }
        await retireGeneration({ ...this.ctx, hooks: this.opts.hooks }, g.gen, { version: null, rows: 0 }).catch(() => st.givenUp.push(g));
      }),
    );
  }

  /**
   * Retire the slot's made-ahead generation that no commit took (close(), and retireAbandoned
   * for a dropped slot), so that no reader lists it after this writer is gone.
   */
  async retireUnused(st: SlotState): Promise<void> {
    const ahead = st.creating;
    st.creating = null;
    // Taken by no commit (a commit takes it before it adds anything), so empty. Retired even if
    // its making failed, once its marker is there (it may have failed after the marker landed).
    // Without the marker, its PUT may still land (timed out), and one landing after
    // the retirement would be a marker without a dataset, which reads fail on until the epoch is
    // sealed: left to the seal and the maintainer. The marker is sent once, so a
    // marker that is there has no other copy to come.
    if (!ahead) return;
    const made = await ahead.table.then(
      () => true,
      () => false,
    );
    if (!made && (await this.ctx.objects.get(genKey(ahead.gen)).catch(() => null)) === null) return;
    await retireGeneration({ ...this.ctx, hooks: this.opts.hooks }, ahead.gen, { version: null, rows: 0 });
  }

  /**
   * Between commits: retire the made-ahead generations of dropped slots that no commit took
   * (none can any more: only the commit running when its slot was dropped could). In the
   * background; close() waits for them.
   */
  retireAbandoned(): void {
    for (const st of this.abandoned.splice(0)) {
      const p: Promise<void> = this.retireUnused(st)
        .catch(() => undefined) // what is left is the maintainer's (a sealed epoch's generation)
        .finally(() => this.retiring.delete(p));
      this.retiring.add(p);
    }
  }
}

function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
