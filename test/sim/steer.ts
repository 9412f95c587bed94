/**
 * The steered windows of the relist, listings, sealing and unfenced foci (test/sim/config.ts `steer`; the own-merges
 * focus's are in steer-merges.ts, the late focus's in steer-late.ts, the swept focus's in steer-swept.ts, on the same core: steer-core.ts): reads put into the windows of the
 * read side's re-listing, the retired marker, the vanished seal and the read order of generations (docs/design/invariants.md,
 * "Reads"), by reactions at the protocol points the log reports to its test hooks and by holds
 * (scheduler.ts `hold`) that end when another actor's protocol step lands, instead of random
 * pauses that end after a number of steps. Each window is a race a guard decides:
 *  - fence:      a writer about to commit loses its lease; it waits until a takeover sealed its
 *                epoch, then commits anyway (a zombie's commit above the seal). A read started
 *                then lists the log before the fence and waits, once it listed, until that
 *                commit landed: it reads the generation at its latest version, zombie commit
 *                included, and only its second listing shows the fence (`relist-sees-fence`).
 *  - unfenced:   the same writer commits once a sealer of its epoch read its generation's version;
 *                a read starts as the commit lands, and that sealer seals once the read ended
 *                (`fence-before-seal`).
 *  - retirement: a writer's merge is about to commit a generation into the base. A read starts
 *                and the merger waits until the read has read the base; the read's requests to
 *                the generation wait until the retirement deleted a manifest of it (Lance then
 *                opens an older version: fewer rows), and the merger waits until the read ended,
 *                so its second listing still lists the generation (`relist-sees-retirement`,
 *                `retired-marker`).
 *  - seal:       the log's first merge, by maintenance (no base yet: writers never rotate). A
 *                read in a new process lists the log before the base exists; its GETs of the
 *                seals it listed wait until maintenance deleted a seal (an epoch whose
 *                generations it just merged away), so the seal it needs is gone
 *                (`relist-on-vanished-seal`).
 *  - rotation:   a writer is about to commit to a generation while it has the next one made
 *                ahead (listed). A read of the whole log starts; the commit waits until the read
 *                counted the older generation's rows, and the read then waits until the writer's
 *                first commit to the newer one landed: an item's batch goes into the older
 *                generation after the read took it, and maybe the item's next into the newer one
 *                before (`read-newest-first`).
 *  - moved:      the same, as the item moves to another writer: a listing (`recount-live-generations`).
 *  - point:      the same, a point read of the item, which counts no other generation before the
 *                one the commit waits for (`point-read-marker-check`).
 *  - listed:     a writer about to make its epoch's first generation loses its lease; another
 *                writer takes the slot over, and the fences of that epoch and later ones of the slot
 *                wait until a read started after the generation's first commit landed has ended
 *                (the writer waits until the takeover is at its fence): the read lists the
 *                generation, finds no fence and returns the commit. The seal must list the
 *                generation: it comes after the fence (`seal-lists-after-fence`).
 *  - zombie:     the same writer, taken over, makes its generation only once its epoch's seal
 *                (without generations) was cleaned up: as that seal lands the new holder's lease
 *                runs out and a third writer takes the slot, and as that takeover's seal lands a
 *                maintenance pass starts, which deletes the seals of epochs without generations
 *                but the slot's highest. The zombie's generation, of an epoch below a sealed one
 *                without a seal of its own, is never read (`zombie-generations-invisible`). Half
 *                the time the zombie's epoch check then times out, and it seals its own epoch
 *                (a seal of nothing, below a sealed one). In steer-zombie.ts, with the
 *                `superseded` window that carries it on (steer-late.ts).
 * Every steered read is followed, once it ended, by a read of the same item and kind (I3 needs
 * a later read to show less). The holds have caps: a window that does not come (the takeover
 * took another slot, the merge failed) ends the wait.
 */
import { BASE_KEY, META_DIR, parseShardName, sealKey, shardName, shardPrefix } from '../../lib/log/layout.ts';
import type { MergeStep } from '../../lib/log/maintain/merge.ts';
import type { WriterHooks } from '../../lib/log/write/writer.ts';
import { simContext, type Op } from './scheduler.ts';
import { byMaintainer, FENCE, GEN_MARKER, ITEM_KINDS, passEnded, PASS_WAIT, RETIRED, SEAL, WAIT, type SteerCore, type SteerHost, type SteerRead } from './steer-core.ts';
import { ended, fenced, frozen } from './steer-late.ts';
import { overtaken, purge, stale, vanish } from './steer-merges.ts';
import { swept } from './steer-swept.ts';
import { zombie } from './steer-zombie.ts';
import type { ItemModel } from './workload.ts';

export type { SteerHost, SteerRead } from './steer-core.ts';

export class Steering implements SteerCore {
  private left: number;
  /** Predicates over landed requests, each told once (then dropped). */
  private watchers: Array<{ match: (op: Op) => boolean; then: (op: Op) => void }> = [];
  baseMade = false;
  /** Generations whose `gen.` marker landed. */
  private readonly marked = new Set<string>();
  /** The item ids of each actor's commit in progress (beforeCommit to afterCommit). */
  private readonly committing = new Map<string, readonly string[]>();
  /** The writer process of each generation a commit landed in. */
  private readonly genWriter = new Map<string, string>();
  /** The rotation and moved windows' reads, set once each ended. */
  private readonly splitReads: Array<{ seen: boolean }> = [];
  /** Told each commit that landed: its generation and item ids. */
  private readonly commitWatchers: Array<(shard: string, ids: readonly string[]) => void> = [];
  /** The step until which a `zombie` window waits for its seal's clean-up (0 once it came; Infinity while its `superseded` window runs). */
  zombieUntil = 0;
  /** The number of commits that landed in each generation (from afterCommit). */
  readonly commits = new Map<string, number>();
  /** The items of each generation's commits (from afterCommit). */
  readonly genItems = new Map<string, ItemModel[]>();
  /** Generations whose `retired.` marker landed (merged into the base). */
  readonly retired = new Set<string>();
  readonly sealed = new Set<string>();

  constructor(readonly h: SteerHost) {
    this.left = h.cfg.steer?.count ?? 0;
  }

  /** Each actor's request that landed last (the overtaken window's). */
  private readonly lastLanded = new Map<string, Op>();

  /** Told of every request released without a fault (scheduler.ts `onLanded`). */
  landed(op: Op): void {
    if (/putIfAbsent$/.test(op.spec.kind)) {
      if (op.spec.target === BASE_KEY) this.baseMade = true;
      else if (op.spec.target.startsWith(GEN_MARKER)) this.marked.add(op.spec.target.slice(GEN_MARKER.length));
      else if (op.spec.target.startsWith(RETIRED)) this.retired.add(op.spec.target.slice(RETIRED.length));
      else if (op.spec.target.startsWith(SEAL)) this.sealed.add(op.spec.target.slice(SEAL.length, -'.json'.length));
    }
    const mode = this.h.cfg.steer?.window;
    if (mode === 'seal') this.orphan(op);
    else if (mode === 'overtaken') {
      overtaken(this, op, this.lastLanded.get(op.actor));
      this.lastLanded.set(op.actor, op);
    }
    if (this.watchers.length === 0) return;
    const hit = this.watchers.filter((w) => w.match(op));
    if (hit.length === 0) return;
    this.watchers = this.watchers.filter((w) => !hit.includes(w));
    for (const w of hit) w.then(op);
  }

  /** A flag set once a request `match` accepts lands. */
  watch(match: (op: Op) => boolean, then?: (op: Op) => void): { seen: boolean } {
    const flag = { seen: false };
    this.watchers.push({
      match,
      then: (op) => {
        flag.seen = true;
        then?.(op);
      },
    });
    return flag;
  }

  /** Whether to steer at this point (`always`: the window comes once a seed). */
  take(always = false): boolean {
    const s = this.h.cfg.steer;
    if (!s || this.left <= 0 || !this.h.sched.faultsOn || (!always && !this.h.rng.chance(s.chance))) return false;
    this.left--;
    return true;
  }

  untake(): void {
    this.left++;
  }

  /** The steered read, then a read of the same item and kind once it ended. */
  readThen(o: SteerRead, onStart: (actor: string, ended: { seen: boolean }, done: Promise<unknown>) => void): boolean {
    const kind = o.kind ?? (o.item ? this.h.rng.pick([...ITEM_KINDS, 'all']) : 'all');
    return this.h.read({
      ...o,
      kind,
      started: (actor, p) => {
        const ended = { seen: false };
        void p.finally(() => {
          ended.seen = true;
          this.h.read({ kind, ...(o.item ? { item: o.item } : {}) });
        });
        onStart(actor, ended, p);
      },
    });
  }

  pendingOf(actor: string): Op[] {
    return this.h.sched.pending.filter((op) => op.actor === actor);
  }

  hooks(proc: string): WriterHooks {
    const mode = this.h.cfg.steer?.window;
    return {
      beforeCommit: (ids, shard, epoch) => {
        const me = simContext.getStore()?.actor;
        if (me) this.committing.set(me, ids);
        if (mode === 'ended') ended(this, proc, ids, epoch);
        else if (mode === 'fenced') fenced(this, proc, ids, epoch);
        if (shard === null) {
          if (mode === 'listed') this.listed(proc, ids, epoch);
          else if (mode === 'zombie' || mode === 'superseded') zombie(this, proc, ids, epoch);
          else if (mode === 'swept') swept(this, proc, epoch);
          return;
        }
        if (mode === 'fence') this.fence(proc, ids, shard);
        else if (mode === 'unfenced') this.unfenced(proc, ids, shard);
        else if (mode === 'rotation') this.rotation(proc, ids, shard);
        else if (mode === 'moved' || mode === 'point') this.moved(proc, ids, shard, mode === 'point');
      },
      afterCommit: (shard) => {
        this.commits.set(shard, (this.commits.get(shard) ?? 0) + 1);
        if (mode === 'frozen') frozen(this, proc, shard);
        const mine = this.h.inFlight(proc);
        if (mine.length > 0) this.genItems.set(shard, [...new Set([...(this.genItems.get(shard) ?? []), ...mine])]);
        const me = simContext.getStore()?.actor;
        const ids = (me ? this.committing.get(me) : undefined) ?? [];
        this.genWriter.set(shard, proc);
        for (const c of this.commitWatchers) c(shard, ids);
      },
      beforeMergeStep: (step, shard) => {
        if (mode === 'rotation' || mode === 'moved' || mode === 'point') this.mergeAfterReads(step);
        else if (mode === 'retirement') this.retirement(proc, step, shard);
        else if (mode === 'seal') this.seal(proc, step, shard);
        else if (mode === 'purge') purge(this, proc, step, shard);
        else if (mode === 'vanish') vanish(this, proc, step, shard);
        else if (mode === 'stale') stale(this, proc, step, shard);
      },
    };
  }

  /** The writer about to commit into `shard` (listed: one made after a fence is never read) is taken over; null if it cannot be. */
  private takenOverCommitting(proc: string, shard: string): { me: string; epoch: string } | null {
    const me = simContext.getStore()?.actor;
    const epoch = parseShardName(shard)?.writerEpoch;
    if (!me || !epoch || !this.marked.has(shard) || !this.take()) return null;
    this.expire(`the lease of ${proc} runs out as it commits`);
    if (!this.h.deliverVia([proc])) return null; // nobody to take the slot over now
    return { me, epoch };
  }

  /** Window `fence`: the writer about to commit is taken over and commits after the seal. */
  private fence(proc: string, ids: readonly string[], shard: string): void {
    const taken = this.takenOverCommitting(proc, shard);
    if (!taken) return;
    const { me, epoch } = taken;
    const { sched } = this.h;
    const sealed = this.watch((op) => op.spec.target === sealKey(epoch) && /putIfAbsent$/.test(op.spec.kind));
    sched.hold(me, `the seal of ${epoch}`, WAIT, () => sealed.seen);
    const committed = this.watch((op) => /lance\.add$/.test(op.spec.kind) && op.spec.target === shard);
    const mine = this.h.inFlight(proc).filter((it) => ids.includes(it.id));
    this.readThen({ ...(mine.length > 0 ? { item: this.h.rng.pick(mine) } : {}) }, (reader, ended) => {
      // Once it listed the log (before the fence, with luck): wait for the zombie's commit.
      this.watch(
        (op) => op.actor === reader && op.spec.kind === 'obj.list' && op.spec.target === META_DIR,
        () => sched.hold(reader, `the commit of ${proc} (epoch ${epoch})`, WAIT, () => committed.seen || ended.seen),
      );
      // Then the zombie waits until the read ended (its epoch's end retires a generation it made
      // ahead: a second listing would start the read over for that instead).
      this.watch(
        (op) => /lance\.add$/.test(op.spec.kind) && op.spec.target === shard,
        () => sched.hold(me, `${reader}'s read ended`, WAIT, () => ended.seen),
      );
    });
  }

  /**
   * Window `unfenced`: the writer about to commit is taken over and commits once a sealer of its
   * epoch (the takeover, or a reader completing the seal) read its generation's version, and a
   * read starts as the commit lands; that sealer seals once the read ended. The read lists after
   * the fence (`fence-before-seal`), so it waits for the seal, or writes it, and shows the commit
   * only if the seal holds it; without a fence it reads the commit at the latest version, and the
   * seal then names the version before it.
   */
  private unfenced(proc: string, ids: readonly string[], shard: string): void {
    const me = this.takenOverCommitting(proc, shard)?.me;
    if (!me) return;
    const { sched } = this.h;
    let ended: { seen: boolean } | null = null;
    const versionRead = this.watch(
      (op) => op.actor !== me && op.spec.kind === 'lance.version' && op.spec.target === shard,
      (op) => sched.hold(op.actor, `a read of ${proc}'s commit ended`, WAIT, () => ended?.seen ?? false),
    );
    sched.hold(me, `the takeover read the version of ${shard}`, WAIT, () => versionRead.seen);
    const mine = this.h.inFlight(proc).filter((it) => ids.includes(it.id));
    this.watch(
      (op) => op.actor === me && /lance\.add$/.test(op.spec.kind) && op.spec.target === shard,
      () => {
        const started = this.readThen({ ...(mine.length > 0 ? { item: this.h.rng.pick(mine) } : {}) }, (_reader, e) => (ended = e));
        if (!started) ended = { seen: true };
      },
    );
  }

  /** Window `listed`: the writer about to make a generation is taken over; the fence waits for a read of its commit. */
  private listed(proc: string, ids: readonly string[], epoch: string): void {
    const me = simContext.getStore()?.actor;
    const self = parseShardName(`${epoch}-g000000`);
    if (!me || !self || !this.take()) return;
    const { sched } = this.h;
    this.expire(`the lease of ${proc} runs out as it makes a generation`);
    const mine = this.h.inFlight(proc).filter((it) => ids.includes(it.id));
    if (!this.h.deliverVia([proc])) return; // nobody to take the slot over now
    // The fences of this epoch and later ones of its slot (a takeover's own comes first).
    const fence = (op: Op) => {
      if (op.actor === me || !/putIfAbsent$/.test(op.spec.kind) || !op.spec.target.startsWith(FENCE)) return false;
      const f = parseShardName(`${op.spec.target.slice(FENCE.length)}-g000000`);
      return f !== null && f.slot === self.slot && f.epoch >= self.epoch;
    };
    // The read's end (set once it started), or a read that could not start.
    let ended: { seen: boolean } | null = null;
    let none = false;
    sched.hold('*', `a read of ${proc}'s commit ended`, 3 * WAIT, () => none || (ended?.seen ?? false), fence);
    // The writer waits until the takeover is at its fence: its generation comes after whatever
    // the sealer did before it.
    sched.hold(me, 'the takeover at its fence', WAIT, () => sched.pending.some(fence));
    this.watch(
      (op) => op.actor === me && /lance\.add$/.test(op.spec.kind),
      () => {
        if (!sched.faultsOn) return;
        const item = mine.length > 0 ? { item: this.h.rng.pick(mine) } : {};
        if (!this.readThen(item, (_reader, e) => (ended = e))) none = true;
      },
    );
  }

  /** Move the clock past every lease's ttl (a lease runs out at a protocol point). */
  expire(why: string): void {
    const { sched, time, cfg } = this.h;
    time.ms += cfg.leaseTtlMs + 1;
    sched.note(`clock +${cfg.leaseTtlMs + 1} (${why})`);
  }

  /** Window `rotation`: a whole-log read across a writer's rotation to its made-ahead generation. */
  private rotation(proc: string, ids: readonly string[], shard: string): void {
    const name = parseShardName(shard);
    const next = name && shardName(name.writerEpoch, name.generation + 1);
    if (!next || !this.marked.has(next)) return;
    // A listing, or a point read of an item of this commit (its generations read side by side).
    const mine = this.h.inFlight(proc).filter((it) => ids.includes(it.id));
    const read: SteerRead = mine.length > 0 && this.h.rng.chance(0.5) ? { item: this.h.rng.pick(mine), kind: 'fields' } : { kind: 'items' };
    this.split(shard, (gen) => gen === next, () => proc, read);
  }

  /** Windows `moved` and `point`: a whole-log read (a point read of the item) while an item moves from one writer to another. */
  private moved(proc: string, ids: readonly string[], shard: string, point: boolean): void {
    const name = parseShardName(shard);
    if (!name || !this.marked.has(shard)) return;
    const epoch = name.writerEpoch;
    // To a live writer whose generation a listing reads after this one (a higher slot).
    const live = new Set(this.h.writers());
    const others = [...this.genWriter].filter(([gen, w]) => w !== proc && live.has(w) && (parseShardName(gen)?.slot ?? -1) > name.slot).map(([, w]) => w);
    if (others.length === 0) return;
    const to = this.h.rng.pick([...new Set(others)]);
    const mine = this.h.inFlight(proc).filter((it) => ids.includes(it.id));
    if (point && mine.length === 0) return;
    // A point read of one query (latest events takes a second, at new counts). It counts each
    // writer's generations side by side: it counts this one first.
    const read: SteerRead = point ? { item: this.h.rng.pick(mine), kind: this.h.rng.pick(['fold', 'trajectory', 'fields'] as const) } : { kind: 'items' };
    this.split(shard, (gen) => parseShardName(gen)?.writerEpoch !== epoch, () => to, read, point);
  }

  /**
   * A read starts as a commit to `shard` is about to go out; the commit waits until the read
   * counted `shard`'s rows, the read then waits until an item committed to `shard` after that
   * count was committed to a generation `then` accepts (its next batches go through writer
   * `via()` meanwhile, one at a time). `countFirst`: the read counts no other generation before `shard`.
   */
  private split(shard: string, then: (gen: string) => boolean, via: () => string, read: SteerRead, countFirst = false): void {
    const me = simContext.getStore()?.actor;
    if (!me || !this.take()) return;
    const { sched } = this.h;
    const started = this.readThen(read, (reader, ended, done) => {
      const late = new Set<string>();
      const both = { seen: false };
      const counted = this.watch(
        (op) => op.actor === reader && op.spec.kind === 'lance.countRows' && op.spec.target === shard,
        () => {
          this.commitWatchers.push((gen, ids) => {
            // Once the read ended this window is over (a hold now would end at once, freeing an item another window holds).
            if (ended.seen) return;
            if (gen === shard) for (const id of ids) late.add(id);
            else if (then(gen) && ids.some((id) => late.has(id))) {
              both.seen = true;
              // Nothing more of them until the read ended (the checker skips an item with an append unanswered at its end).
              for (const id of ids) if (late.has(id)) this.h.holdItem(id, done);
            }
          });
          sched.hold(reader, `an item committed to ${shard}, then to another generation`, 2 * WAIT, () => {
            if (both.seen || ended.seen) return true;
            for (const id of late) this.h.deliverItem(via(), id);
            return false;
          });
        },
      );
      sched.hold(me, `${reader} counted the rows of ${shard}`, WAIT, () => counted.seen || ended.seen);
      if (countFirst) sched.hold(reader, `its count of ${shard}`, WAIT, () => counted.seen || ended.seen, (op) => op.spec.kind === 'lance.countRows' && op.spec.target !== shard);
      this.splitReads.push(ended);
    });
    if (!started) this.left++; // no reader free: the next point may steer
  }

  /**
   * Windows `rotation` and `moved`: a merge whose retirement would start a steered read over fails its base
   * commit while one runs (it stays queued, and is tried again after a later commit). A hold
   * would hold the writer's commits too: they are the same actor.
   */
  private mergeAfterReads(step: MergeStep): void {
    const me = simContext.getStore()?.actor;
    if (me && step === 'base-commit' && this.splitReads.some((r) => !r.seen)) this.h.sched.failNext(me, /mergeInsert/, 'failBefore');
  }

  /** Window `retirement`: a read spanning a writer's merge of its generation into the base. */
  private retirement(proc: string, step: MergeStep, shard: string): void {
    const me = simContext.getStore()?.actor;
    if (step !== 'base-commit' || !me || !proc.startsWith('w') || !this.take()) return;
    const { sched, rng } = this.h;
    const its = this.genItems.get(shard) ?? [];
    const onShard = (op: Op) => op.spec.target === shard;
    const started = this.readThen({ ...(its.length > 0 && rng.chance(0.8) ? { item: rng.pick(its) } : {}) }, (reader, ended) => {
      // The merger waits until the read has read the base (it waits for the generation now).
      sched.hold(me, `${reader} read the base`, WAIT, () => {
        const p = this.pendingOf(reader);
        return ended.seen || (p.length > 0 && p.every(onShard));
      });
      const versions = `${shardPrefix(shard)}/_versions/`;
      const gone = this.watch(
        (op) => /deletePrefix\.delete$/.test(op.spec.kind) && op.spec.target.startsWith(versions) && op.spec.target.endsWith('.manifest'),
        // Then the merger waits until the read ended: its second listing still lists the generation.
        () => sched.hold(me, `${reader}'s read ended`, WAIT, () => ended.seen),
      );
      sched.hold(reader, `a manifest of ${shard} deleted`, WAIT, () => gone.seen || ended.seen, onShard);
    });
    if (!started) this.left++; // no reader free: the next point may steer
  }

  /**
   * Window `seal`, before the first merge: as maintenance reads a slot's lease (to take it if its
   * writer left generations and ran out), the lease runs out. The pass then seals the writer's
   * epoch and its own (a later epoch without generations: the slot's highest seal, kept), so the
   * seals of the epochs it merges are cleaned up at its end.
   */
  private orphan(op: Op): void {
    if (this.baseMade || !this.h.sched.faultsOn || op.spec.kind !== 'lease.read' || !byMaintainer(op) || !/\/slot\//.test(op.spec.target)) return;
    this.expire(`the lease of ${op.spec.target} runs out as ${op.actor} reads it`);
  }

  /** Window `seal`: a new process reads as the log's first merge (by maintenance) begins. */
  private seal(proc: string, step: MergeStep, shard: string): void {
    const me = simContext.getStore()?.actor;
    const its = this.genItems.get(shard) ?? [];
    // A generation with rows (a commit landed in it; one made ahead may have none).
    if (step !== 'read' || this.baseMade || !me || !proc.startsWith('m') || its.length === 0 || !this.take(true)) return;
    const { sched, rng } = this.h;
    const sealGet = (op: Op) => op.spec.kind === 'obj.get' && op.spec.target.startsWith(`${META_DIR}/seal.`);
    // Mostly the whole log (every acknowledged item of the merged generations).
    const item = rng.chance(0.2) ? rng.pick(its) : undefined;
    const started = this.readThen({ fresh: true, ...(item ? { item } : {}) }, (reader, ended) => {
      const listed = this.watch((op) => op.actor === reader && op.spec.kind === 'obj.list' && op.spec.target === META_DIR);
      sched.hold(me, `${reader} listed the log`, WAIT, () => listed.seen || ended.seen);
      // Until the seal of the merged generation's epoch is gone (cleaned up once a later epoch
      // of its slot is sealed: at the end of this pass, or of a later one), and that pass ended
      // (its clean-up deletes the other seals the read listed right after).
      const epoch = parseShardName(shard)?.writerEpoch ?? '';
      const over = { seen: false };
      this.watch(
        (op) => /obj\.delete$/.test(op.spec.kind) && op.spec.target === sealKey(epoch),
        () => this.watch(passEnded, () => (over.seen = true)),
      );
      sched.hold(reader, `the seal of ${epoch} deleted, and the pass`, PASS_WAIT, () => over.seen || ended.seen, sealGet);
    });
    if (!started) this.left++; // no reader free: the next point may steer
  }
}
