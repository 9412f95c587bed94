/**
 * Union reads: the base table plus every visible shard generation, as rows. De-duplication by
 * event_id and ordering are the fold's job (lib/fold.ts), so a row present both in a shard and in
 * the base (a merge in progress or interrupted) is harmless.
 *
 * Which generations a read sees is decided in lib/log/read/visibility.ts.
 *
 * Every read that touched a shard generation lists the meta folder again afterwards and starts
 * over if what it read changed meanwhile (docs/design/invariants.md, "Reads"): a generation
 * retired or deleted under it (its newest versions may already be gone, and Lance would open an
 * older one without error), or an epoch it read at the latest version fenced (the versions it saw
 * may be above the seal about to be written). So a read returns only rows every later read keeps.
 */
import { guard } from '../../guards.ts';
import type * as arrow from 'apache-arrow';
import type { Clock } from '../../clock.ts';
import { CorruptError, DgclError, InternalError, PermissionDeniedError, UnavailableError } from '../../errors.ts';
import { COLUMN_NAMES, LIGHT_COLUMNS, rowsFromArrow } from '../../schema.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { EventRow } from '../../types.ts';
import { META_DIR, parseMetaNames, parseShardName, sealKey, type MetaNames, type Seal } from '../layout.ts';
import { damageKey, damaged, DAMAGE_MIN_MS, DAMAGE_REPEATS, permissionOf, type DamageProbe } from './damage.ts';
import { withoutDeleted } from '../deleted.ts';
import { writeSeal } from '../write-seal.ts';
import { ShardItemIndex } from './shard-index.ts';
import { TailCache } from './tail-cache.ts';
import { projection, type LanceTables, type Table } from '../tables.ts';
import { epochGroups, keyOf, listingFrom, stable, type ShardListing, type ShardView } from './visibility.ts';

export type { ShardListing, ShardView } from './visibility.ts';

/** Attempts of one read before it gives up on a layout that keeps changing under it. */
const READ_ATTEMPTS = 10;
/**
 * Attempts a read may add while the same decoding failure repeats, so that one first seen near
 * the end still gets DAMAGE_MIN_MS to show it lasts (the back-off is at most 400 ms).
 */
const DAMAGE_EXTRA_ATTEMPTS = Math.ceil(DAMAGE_MIN_MS / 400) + 1;
/** Meta folder listings tried while seals they name vanish before their GET (listShards). */
const LIST_ATTEMPTS = 5;
/** Attempts that wait for a takeover to write its seal before the reader writes it itself. */
const SEAL_WAITS = 4;

/**
 * The filter selects rows of `items` only: every row of them, or (with `keep`) those `keep.test`
 * accepts, the filter's other conditions restated over rows (reading `keep.columns`); it must
 * select exactly what the SQL filter selects.
 */
export interface ItemScope {
  items: readonly string[];
  keep?: { columns: readonly string[]; test: (row: EventRow) => boolean };
}

/**
 * The base rows of one item (LIGHT_COLUMNS) read some other way than a Lance query (the fold
 * projection: lib/log/projection/projection.ts), or null to query. `base` is the latest handle.
 */
export type BaseItemRows = (base: Table, itemId: string) => Promise<EventRow[] | null>;

/**
 * The light rows of `items` this process's writer committed to generation `gen` and confirmed,
 * kept in memory (lib/log/write/own-memory.ts `OwnMemory.itemRows`); null when `gen` is not one of its unmerged
 * generations (read it from storage). Shared: never change them.
 */
export type OwnItemRows = (gen: string, items: readonly string[]) => readonly EventRow[] | null;

export class LogReader {
  /** Seals by keyOf(log id, writer epoch). */
  private readonly sealCache = new Map<string, Seal>();
  /** The log id of the last listing. */
  private logId = '';
  private readonly shardIndex = new ShardItemIndex();
  private readonly tail = new TailCache();
  private closed = false;

  constructor(
    private readonly objects: ObjectStore,
    private readonly tables: LanceTables,
    private readonly clock: Clock,
    private readonly baseItemRows?: BaseItemRows,
    private readonly ownItemRows?: OwnItemRows,
    /** Told each listing a read starts from; may refuse the read (a log that does not exist). */
    private readonly checkListing?: (listing: ShardListing) => Promise<void>,
    /**
     * The item's marker (lib/log/write/markers.ts: which writer last began writing it), for point
     * reads; null if it has none, undefined if this process cannot read the log's markers (no check).
     */
    private readonly itemMarker?: (itemId: string) => Promise<string | null | undefined>,
  ) {}

  async readSeal(writerEpoch: string, logId = this.logId): Promise<Seal | null> {
    const key = keyOf(logId, writerEpoch);
    const cached = this.sealCache.get(key);
    if (cached) return cached;
    const body = await this.objects.get(sealKey(writerEpoch));
    if (body === null) return null;
    let seal: Seal;
    try {
      seal = JSON.parse(body) as Seal;
    } catch (e) {
      throw new CorruptError(`seal of ${writerEpoch} is not valid JSON`, { cause: e });
    }
    this.sealCache.set(key, seal); // seals are immutable (within a log)
    return seal;
  }

  /**
   * The listing of a fresh meta folder listing. A seal deleted between the listing and its GET
   * (LayoutChangedError) only means the listing is stale: list again. Callers outside `read`
   * (a writer sealing its slot's predecessors, maintenance steps) would otherwise fail on it;
   * each retry needs another seal deleted meanwhile, so a few attempts settle it.
   */
  async listShards(): Promise<ShardListing> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.listingOf(parseMetaNames(await this.objects.list(META_DIR)));
      } catch (e) {
        if (!(e instanceof LayoutChangedError) || attempt >= LIST_ATTEMPTS) throw e;
      }
    }
  }

  /** The listing of one meta folder listing the caller made (decisions from one snapshot). */
  async listingOf(meta: MetaNames): Promise<ShardListing> {
    if (this.tables.noteLogId(meta.logId)) {
      // Another log at this place: what was kept by generation name may be the old log's.
      this.sealCache.clear();
      this.shardIndex.retain(new Set());
      this.tail.clear();
    }
    this.logId = meta.logId;
    const seals = new Map<string, Seal>();
    const needed = new Set(meta.gens.map((n) => parseShardName(n)?.writerEpoch));
    await Promise.all(
      meta.sealEpochs
        .filter((e) => needed.has(e))
        .map(async (e) => {
          const s = await this.readSeal(e, meta.logId);
          // Listed, then gone: maintenance deletes a seal once its epoch's generations are merged
          // and gone. The listing is stale: without the seal its generations would count as a
          // zombie's (skipped, and the base that now holds their rows may be unknown to it).
          if (!s && guard('relist-on-vanished-seal')) throw new LayoutChangedError(`the seal of ${e} was deleted while the log was listed`);
          if (!s) return;
          seals.set(e, s);
        }),
    );
    return listingFrom(meta, seals);
  }

  /** Drop what this process holds of a generation: its handles and its item index. */
  private forget(v: ShardView): void {
    this.tables.forgetHandles(v.name);
    this.shardIndex.forget(v.key);
    this.tail.forget(v.key);
  }

  /**
   * Every row of a visible generation at the version the listing shows, with `columns`, and how
   * many (the count the read saw). With `keep`, the batches are the process's
   * (lib/log/read/tail-cache.ts): never release or change them.
   */
  async wholeGeneration(v: ShardView, columns: readonly string[], keep: boolean): Promise<{ batches: arrow.RecordBatch[]; count: number }> {
    return this.tail.rows(await this.shardTable(v), v.key, columns, keep);
  }

  /** The items with a row at an offset in [from, to) of a visible generation (holding at least `to` rows). */
  async itemsIn(v: ShardView, from: number, to: number): Promise<Set<string>> {
    return this.shardIndex.itemsIn(await this.shardTable(v), v.key, from, to);
  }

  /** The rows of `items` below offset `count` of a visible generation, with `columns` (lib/log/read/shard-index.ts). */
  async itemBatches(v: ShardView, items: ReadonlySet<string>, columns: readonly string[], count: number): Promise<arrow.RecordBatch[]> {
    return this.shardIndex.batchesOf(await this.shardTable(v), v.key, items, columns, count);
  }

  /** Whether item `id` has a row below offset `count` of a visible generation (holding at least `count` rows). */
  async holds(v: ShardView, id: string, count: number): Promise<boolean> {
    return this.shardIndex.holds(await this.shardTable(v), v.key, id, count);
  }

  /**
   * The log is closed: drop what the reader keeps of generations, and refuse later reads (they
   * would open tables on closed clients and fill the caches again). A read already running
   * finishes.
   */
  close(): void {
    this.closed = true;
    this.shardIndex.retain(new Set());
    this.tail.clear();
  }

  async shardTable(v: ShardView): Promise<Table> {
    return v.version === null || !guard('sealed-version') ? this.tables.shard(v.name) : this.tables.shardAt(v.name, v.version);
  }

  /**
   * Run `fn` on a listing and check afterwards that nothing it may have read changed; start over
   * (with back-off) otherwise. `fn` reads the base and the listing's visible generations but
   * those in `skip` (whose rows the caller has in memory). Errors that are not about storage
   * (not found, corrupt data, bad input) are not retried, but thrown only once the layout is
   * known to have held still (else the attempt starts over). `probe`: how a decoding failure
   * that keeps coming back is told to be damage (lib/log/read/damage.ts); the writer's reads pass
   * `none`, so no scan of the log holds its appends. `item`: a point read of that one item (see
   * `markerHeld`).
   */
  async read<T>(fn: (listing: ShardListing) => Promise<T>, skip?: ReadonlySet<string>, probe: DamageProbe = 'scan', item?: string): Promise<T> {
    if (this.closed) throw new InternalError('the log is closed: open it again to read');
    let lastError: unknown;
    /** The decoding failure every attempt since `sinceMs` ended with, `times` in a row (damage?). */
    let suspect = null as { key: string; times: number; sinceMs: number } | null;
    let attempt = 0;
    for (; attempt < READ_ATTEMPTS || (suspect !== null && attempt < READ_ATTEMPTS + DAMAGE_EXTRA_ATTEMPTS); attempt++) {
      if (attempt > 0) await this.clock.sleep(Math.min(400, 5 * 2 ** attempt));
      // Read before the listing: a generation made after the listing is never read, and the
      // base is read at its latest version (see markerHeld). undefined: no check.
      let before: string | null | undefined;
      if (item !== undefined && this.itemMarker && guard('point-read-marker-check')) {
        try {
          before = await this.itemMarker(item);
        } catch (e) {
          lastError = e; // storage trouble (the store's other failures are out of reach: undefined)
          suspect = null;
          continue;
        }
      }
      let listing: ShardListing;
      try {
        listing = await this.listShards();
      } catch (e) {
        if (!(e instanceof LayoutChangedError)) throw e;
        lastError = e;
        suspect = null; // damage needs the same failure in a row, on reads that ran
        continue;
      }
      await this.checkListing?.(listing);
      if (listing.pending.length > 0) {
        suspect = null;
        // A takeover is between its fence and its seal. Give it a moment, then finish it: the
        // fence proves the old epoch can no longer be confirmed, so any version read now covers
        // everything it acknowledged.
        if (attempt < SEAL_WAITS) continue;
        await this.completeSeals(listing).catch((e: unknown) => {
          // A reader that may not write (read-only credentials) cannot finish the seal, but the
          // taker writes it in a moment: keep waiting for it, as for storage trouble.
          const refused = e instanceof PermissionDeniedError ? e : permissionOf(e, this.objects.baseUri);
          if (refused) {
            const epochs = [...new Set(listing.pending.map((s) => s.writerEpoch))].join(', ');
            lastError = new UnavailableError(
              `a takeover of writer epoch ${epochs} is between its fence and its seal, and this process may not write the seal (${refused.message}); the taker, or a writer or maintenance with write access, writes it: retry`,
              { cause: refused },
            );
            return;
          }
          if (e instanceof DgclError && !(e instanceof UnavailableError)) throw e;
          lastError = e; // storage trouble: try again on the next attempt
        });
        continue;
      }
      const visible = new Set(listing.visible.map((v) => v.key));
      this.shardIndex.retain(visible);
      this.tail.retain(visible);
      const read = listing.visible.filter((v) => !skip?.has(v.name));
      let result: T | undefined;
      let failed = false;
      let definite: unknown;
      try {
        result = await fn(listing);
      } catch (e) {
        if (e instanceof ReadAgainError) {
          lastError = e;
          suspect = null;
          continue;
        }
        failed = true;
        if (e instanceof DgclError && !(e instanceof UnavailableError)) definite = e;
        else lastError = e;
        definite ??= permissionOf(e, this.objects.baseUri) ?? undefined; // a refusal: retrying cannot help
        if (definite !== undefined && !guard('errors-after-layout-check')) throw definite;
      }
      // Also before an error `fn` decided on (NotFound: the item's rows were not there): rows
      // that moved under the read (a generation retired, deleted newest manifest first, so Lance
      // showed an older version) make any answer of this attempt wrong, errors included.
      if (read.length > 0 && !stable(read, parseMetaNames(await this.objects.list(META_DIR)))) {
        for (const v of read) this.forget(v);
        lastError ??= new UnavailableError('the log layout changed during the read');
        suspect = null; // damage needs the same failure with the layout unchanged, in a row
        continue;
      }
      if (before !== undefined && (!failed || definite !== undefined)) {
        const moved = await this.markerHeld(item!, before).catch((e: unknown) => e);
        if (moved !== false) {
          lastError = moved;
          suspect = null;
          continue;
        }
      }
      if (definite !== undefined) throw definite;
      if (!failed) return result as T;
      // The layout held still: an I/O error of storage or Lance; try again on fresh handles,
      // the base's too: one pinned at a version number a deleted log also had (made again or
      // restored at the same place) names that log's files, gone.
      for (const v of read) this.forget(v);
      this.tables.forgetBase();
      // Unless it is the same decoding failure again and again, for a while: a damaged file, if
      // a probe finds it (lib/log/read/damage.ts).
      const key = damageKey(lastError);
      const now = this.clock.nowMs();
      suspect = key === null ? null : suspect?.key === key ? { ...suspect, times: suspect.times + 1 } : { key, times: 1, sinceMs: now };
      if (suspect !== null && suspect.times >= DAMAGE_REPEATS && now - suspect.sinceMs >= DAMAGE_MIN_MS && probe !== 'none') {
        const datasets = [...(listing.baseExists ? [{ name: 'base', open: async () => (await this.tables.base(true))! }] : []), ...read.map((v) => ({ name: v.name, open: () => this.shardTable(v) }))];
        const corrupt = await damaged({ tables: this.tables, objects: this.objects }, datasets, lastError, { depth: probe, reads: suspect.times, spanMs: now - suspect.sinceMs });
        if (corrupt) throw corrupt;
        // Every dataset read without that failure: it passed, or is nowhere the probe can name.
        suspect = null;
      }
    }
    if (lastError instanceof DgclError) throw lastError;
    throw new UnavailableError(`read of ${this.objects.baseUri} did not settle after ${attempt} attempts: ${errMsg(lastError)}`, { cause: lastError });
  }

  /**
   * A point read's check that the item stayed with its writer: false if its marker is still
   * `before` (read before the listing), else the error to start over with. Each writer epoch's
   * generations are read newest first, which keeps a read from showing an item's batch without
   * the earlier ones of the same writer; but an item that moved to another writer meanwhile has
   * batches in two writers' generations (or one the listing missed, or in the base, read at its
   * latest version, through a merge), and the read may have taken the one before a batch landed
   * and the other after the next landed. A writer puts a marker of its own before it commits a
   * batch of an item whose marker is not its own, so an unchanged marker means no batch went to
   * another writer during the read.
   */
  private async markerHeld(item: string, before: string | null): Promise<false | ReadAgainError> {
    const after = await this.itemMarker!(item);
    return after === before ? false : new ReadAgainError(`item ${JSON.stringify(item)} began with another writer while it was read`);
  }

  /**
   * Rows matching `filter` (a Lance SQL predicate, or null for all) from base + visible shards
   * (but those in `skip`, whose rows the caller has in memory), without deleted items' rows.
   * `item`: a point read of that one item (see `read`).
   */
  scan(filter: string | null, columns: readonly string[], skip?: ReadonlySet<string>, scope?: ItemScope, item?: string): Promise<EventRow[]> {
    return this.read((listing) => this.scanListing(listing, filter, columns, skip, scope ? { scope } : {}), skip, 'scan', item);
  }

  /**
   * Rows matching `filter` from the base and the listing's visible generations (but `skip`): one
   * query of a consistent read (call it inside `read`, which checks the layout afterwards). With a
   * `scope` (the filter selects only rows of these items), a generation is read through its item
   * index (lib/log/read/shard-index.ts): the items' rows are taken by offset (none: no query) and kept
   * by `scope.keep`.
   */
  async scanListing(
    listing: ShardListing,
    filter: string | null,
    columns: readonly string[],
    skip?: ReadonlySet<string>,
    options: { includeDeleted?: boolean; scope?: ItemScope } = {},
  ): Promise<EventRow[]> {
    const scope = options.scope;
    const shardRows = async (v: ShardView): Promise<EventRow[]> => {
      if (!scope) return query(await this.shardTable(v), filter, columns);
      const keep = scope.keep;
      const wanted = keep ? [...new Set([...columns, ...keep.columns])] : columns;
      const mine = this.ownRows(listing, v, scope.items, wanted);
      const rows = mine ?? (await this.shardIndex.rowsOf(await this.shardTable(v), v.key, scope.items, wanted));
      return keep ? rows.filter(keep.test) : rows;
    };
    // All of one item's light rows (a fold, a trajectory): maybe without a query of the base.
    const whole = scope?.items.length === 1 && !scope.keep && this.baseItemRows && columns.length === LIGHT_COLUMNS.length && LIGHT_COLUMNS.every((c) => columns.includes(c));
    const baseRows = async (t: Table): Promise<EventRow[]> => (whole && (await this.baseItemRows!(t, scope.items[0]!))) || query(t, filter, columns);
    // Each epoch's generations newest first, one after another (epochGroups); epochs side by side.
    const shards = new Map<string, EventRow[]>();
    const groups = epochGroups(listing.visible.filter((v) => !skip?.has(v.name)));
    // Once one part failed the read is over (it starts again on fresh handles): the others stop.
    let failed = false;
    const parts = Promise.all([
      this.tables.base(listing.baseExists).then((t) => (t ? baseRows(t) : [])),
      ...groups.map(async (g) => {
        for (const v of g) if (!failed) shards.set(v.name, await shardRows(v));
      }),
    ]);
    parts.catch(() => (failed = true));
    const [baseParts] = await parts;
    const rows = [...baseParts, ...listing.visible.flatMap((v) => shards.get(v.name) ?? [])];
    return options.includeDeleted || !guard('tombstones-hide') ? rows : withoutDeleted(listing.tombstones, rows);
  }

  /**
   * The rows of `items` in `v` from this process's writer's memory, as a read of `columns` would
   * return them (the others null), or null to read storage. Only for a generation the writer made
   * in this listing's log, and without blob bytes (not kept). What the writer keeps of it is
   * every commit it confirmed, and it acks nothing before: every acked row of it, without a
   * version check or a read per column and fragment (what a take of a live writer's rows costs:
   * docs/design/performance.md, "Unmerged shards"). The writer answers null for items of a
   * commit that may have landed and is not kept yet (storage already shows it to every reader),
   * and a commit never confirmed ends the epoch, which drops the memory. So a sealed generation
   * it still keeps shows the same rows as at its seal: a commit it confirmed passed its epoch
   * check after landing, before the takeover's fence, so the seal (listed after the fence)
   * holds it; one it did not confirm is either the commit being made or ended the epoch.
   */
  private ownRows(listing: ShardListing, v: ShardView, items: readonly string[], columns: readonly string[]): EventRow[] | null {
    if (!this.ownItemRows || columns.includes('value_blob') || this.tables.madeInLog(v.name) !== listing.logId) return null;
    const mine = this.ownItemRows(v.name, items);
    return mine && mine.map((r) => projectRow(r, columns));
  }

  /**
   * Seal the epochs of pending generations (a takeover that stalled or died), oldest first.
   * Safe: a fence at or above an epoch of the slot means its lease moved on, so it can no longer
   * confirm a commit, and every commit it confirmed is in the versions read now.
   */
  private async completeSeals(listing: ShardListing): Promise<void> {
    const pending = [...new Map(listing.pending.map((s) => [s.writerEpoch, s])).values()].sort((a, b) => a.slot - b.slot || a.epoch - b.epoch);
    for (const s of pending) await writeSeal({ objects: this.objects, tables: this.tables }, s.writerEpoch, 'reader', this.clock);
  }
}

/** The meta folder changed between its listing and what the listing named (read again). */
class LayoutChangedError extends UnavailableError {}

/**
 * What a read found changed under it (lib/log/read/tail-cut.ts): `read()` starts it over on the
 * handles and caches it has, which stay right (a generation's rows below a count never change).
 */
export class ReadAgainError extends UnavailableError {}

/** A copy of `r` with only `columns` (the others null, as rowsFromArrow leaves columns not read). */
function projectRow(r: EventRow, columns: readonly string[]): EventRow {
  const out: Record<string, unknown> = {};
  for (const c of COLUMN_NAMES) out[c] = null;
  for (const c of columns) out[c] = r[c as keyof EventRow];
  return out as unknown as EventRow;
}

async function query(t: Table, filter: string | null, columns: readonly string[]): Promise<EventRow[]> {
  let q = t.query().select(projection(columns));
  if (filter) q = q.where(filter);
  return rowsFromArrow(await q.toArrow());
}

function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
