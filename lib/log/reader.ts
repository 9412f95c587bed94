/**
 * Union reads: the base table plus every visible shard generation, as rows. De-duplication by
 * event_id and ordering are the fold's job (lib/fold.ts), so a row present both in a shard and in
 * the base (a merge in progress or interrupted) is harmless.
 *
 * Visibility of a shard generation (docs/design/fencing.md):
 *  - retired (merged into base): skipped;
 *  - its epoch has a seal: visible up to the sealed version if the seal lists it, else invisible;
 *  - its epoch has no seal but a later epoch of the same slot has one: invisible (a zombie
 *    created it after the takeover);
 *  - otherwise (the slot's live epoch): visible at its latest version.
 */
import { rowsFromArrow } from '../schema.ts';
import type { ObjectStore } from '../storage/objects.ts';
import type { EventRow } from '../types.ts';
import {
  META_DIR,
  parseMetaNames,
  parseShardName,
  sealKey,
  type Seal,
  type ShardName,
} from './layout.ts';
import type { LanceTables, Table } from './tables.ts';
import { CorruptError } from '../errors.ts';

export interface ShardView extends ShardName {
  /** Version readers see; null = latest. */
  version: number | null;
  sealed: boolean;
}

export interface ShardListing {
  /** The base dataset exists (its marker is listed). */
  baseExists: boolean;
  visible: ShardView[];
  /** Generations that exist but readers ignore (zombie writes after a seal). */
  invisible: ShardName[];
  retired: ShardName[];
  /** Seals of epochs that still have generations. */
  seals: Map<string, Seal>;
  /** Every sealed writer epoch (names only). */
  sealedEpochs: string[];
}

export class LogReader {
  private readonly sealCache = new Map<string, Seal>();

  constructor(
    private readonly objects: ObjectStore,
    private readonly tables: LanceTables,
  ) {}

  async readSeal(writerEpoch: string): Promise<Seal | null> {
    const cached = this.sealCache.get(writerEpoch);
    if (cached) return cached;
    const body = await this.objects.get(sealKey(writerEpoch));
    if (body === null) return null;
    let seal: Seal;
    try {
      seal = JSON.parse(body) as Seal;
    } catch (e) {
      throw new CorruptError(`seal of ${writerEpoch} is not valid JSON`, { cause: e });
    }
    this.sealCache.set(writerEpoch, seal); // seals are immutable
    return seal;
  }

  async listShards(): Promise<ShardListing> {
    const { baseExists, gens, sealEpochs, retired } = parseMetaNames(await this.objects.list(META_DIR));
    const shards = gens.map((n) => parseShardName(n)).filter((s): s is ShardName => s !== null);
    const seals = new Map<string, Seal>();
    const needed = new Set(shards.map((s) => s.writerEpoch));
    await Promise.all(
      sealEpochs
        .filter((e) => needed.has(e))
        .map(async (e) => {
          const s = await this.readSeal(e);
          if (s) seals.set(e, s);
        }),
    );
    // Highest sealed epoch per slot: unsealed epochs at or below it are zombies.
    const maxSealed = new Map<number, number>();
    for (const e of sealEpochs) {
      const p = parseShardName(`${e}-g000000`);
      if (p) maxSealed.set(p.slot, Math.max(maxSealed.get(p.slot) ?? 0, p.epoch));
    }
    const listing: ShardListing = { baseExists, visible: [], invisible: [], retired: [], seals, sealedEpochs: sealEpochs };
    for (const s of shards) {
      if (retired.has(s.name)) {
        listing.retired.push(s);
        continue;
      }
      const seal = seals.get(s.writerEpoch);
      if (seal) {
        const v = seal.gens[String(s.generation)];
        if (v === undefined) listing.invisible.push(s);
        else listing.visible.push({ ...s, version: v, sealed: true });
      } else if ((maxSealed.get(s.slot) ?? 0) >= s.epoch) {
        listing.invisible.push(s);
      } else {
        listing.visible.push({ ...s, version: null, sealed: false });
      }
    }
    return listing;
  }

  async shardTable(v: ShardView): Promise<Table> {
    return v.version === null ? this.tables.shard(v.name) : this.tables.shardAt(v.name, v.version);
  }

  /**
   * Rows matching `filter` (a Lance SQL predicate, or null for all) from base + visible shards
   * (but those in `skip`, whose rows the caller has in memory).
   * A shard retired between listing and reading makes the whole read start over, so rows that
   * moved into the base meanwhile are not missed.
   */
  async scan(filter: string | null, columns: readonly string[], skip?: ReadonlySet<string>): Promise<EventRow[]> {
    for (let attempt = 0; ; attempt++) {
      const listing = await this.listShards();
      try {
        const parts = await Promise.all([
          this.tables.base(listing.baseExists).then((t) => (t ? query(t, filter, columns) : [])),
          ...listing.visible
            .filter((v) => !skip?.has(v.name))
            .map(async (v) => query(await this.shardTable(v), filter, columns)),
        ]);
        return parts.flat();
      } catch (e) {
        if (attempt >= 4) throw e;
        for (const v of listing.visible) this.tables.forget(v.name);
      }
    }
  }
}

async function query(t: Table, filter: string | null, columns: readonly string[]): Promise<EventRow[]> {
  let q = t.query().select([...columns]);
  if (filter) q = q.where(filter);
  return rowsFromArrow(await q.toArrow());
}
