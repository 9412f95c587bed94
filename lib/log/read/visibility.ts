/**
 * Which shard generations a read sees, from one listing of the meta folder and the seals it names
 * (docs/design/fencing.md):
 *  - retired (merged into base): skipped;
 *  - its epoch has a seal: visible up to the sealed version if the seal lists it, else invisible;
 *  - its epoch has no seal but a later epoch of the same slot has one: invisible (a zombie
 *    created it after the takeover);
 *  - its epoch has a fence but no seal yet: being sealed; readers wait for the seal;
 *  - otherwise (the slot's live epoch): visible at its latest version.
 *
 * And whether what a read saw still holds on a later listing (`stable`): the consistent read
 * (lib/log/read/reader.ts `LogReader.read`) starts over when it does not.
 */
import { guard } from '../../guards.ts';
import { maxEpochPerSlot, parseShardName, type MetaNames, type Seal, type ShardName } from '../layout.ts';

export interface ShardView extends ShardName {
  /** Version readers see; null = latest. */
  version: number | null;
  sealed: boolean;
  /**
   * What the reader keeps of the generation is keyed by this: its name within the log's id
   * (lib/log/layout.ts `logIdKey`). A log made again at the same place may reuse the name,
   * and a read of the old log still in flight may store what it read after the
   * caches were cleared: under the old id, no read of the new log takes it.
   */
  key: string;
}

/** The key of what is kept of `name` (a generation, a writer epoch) in the log `logId`. */
export const keyOf = (logId: string, name: string) => `${logId}/${name}`;

export interface ShardListing {
  /** The log's id (lib/log/layout.ts `logIdKey`; '' when it has none). */
  logId: string;
  /** The base dataset exists (its marker is listed). */
  baseExists: boolean;
  visible: ShardView[];
  /** Generations that exist but readers ignore (zombie writes after a seal). */
  invisible: ShardName[];
  retired: ShardName[];
  /** Generations of epochs that are fenced and not yet sealed (a takeover in progress). */
  pending: ShardName[];
  /** Seals of epochs that still have generations. */
  seals: Map<string, Seal>;
  /** Every sealed writer epoch (names only). */
  sealedEpochs: string[];
  /** Every fenced writer epoch (names only; sealed ones included). */
  fencedEpochs: string[];
  /** Deleted items: hash of the item id -> the highest deleted seq (docs/design/deletion.md). */
  tombstones: ReadonlyMap<string, number>;
}

/** The listing of `meta`, given the seals of its epochs that still have generations. */
export function listingFrom(meta: MetaNames, seals: Map<string, Seal>): ShardListing {
  const { baseExists, gens, sealEpochs, fenceEpochs, retired, tombstones } = meta;
  const shards = gens.map((n) => parseShardName(n)).filter((s): s is ShardName => s !== null);
  // Highest sealed epoch per slot: unsealed epochs at or below it are zombies.
  const maxSealed = maxEpochPerSlot(sealEpochs);
  // Highest fenced epoch per slot: a generation of an epoch at or below it may become
  // invisible (or be sealed below what it shows) any moment: wait for the seals.
  const maxFenced = maxEpochPerSlot(fenceEpochs);
  const listing: ShardListing = {
    logId: meta.logId,
    baseExists,
    visible: [],
    invisible: [],
    retired: [],
    pending: [],
    seals,
    sealedEpochs: sealEpochs,
    fencedEpochs: fenceEpochs,
    tombstones,
  };
  for (const s of shards) {
    if (retired.has(s.name)) {
      listing.retired.push(s);
      continue;
    }
    const seal = seals.get(s.writerEpoch);
    if (seal) {
      const v = seal.gens[String(s.generation)];
      if (v === undefined) listing.invisible.push(s);
      else listing.visible.push({ ...s, version: v, sealed: true, key: keyOf(meta.logId, s.name) });
    } else if ((maxSealed.get(s.slot) ?? 0) >= s.epoch && guard('zombie-generations-invisible')) {
      listing.invisible.push(s);
    } else if ((maxFenced.get(s.slot) ?? 0) >= s.epoch && guard('wait-for-seal')) {
      listing.pending.push(s);
    } else {
      listing.visible.push({ ...s, version: null, sealed: false, key: keyOf(meta.logId, s.name) });
    }
  }
  return listing;
}

/**
 * The visible generations in groups a read takes one after another, newest first within a group
 * (groups may run side by side): one group per writer epoch of its generations read at the latest
 * version, one per generation read at its seal. An epoch commits to one generation at a time (each
 * commit lands, or ends the epoch, before the next is sent), in generation order, and never again
 * to one below a generation it has committed to; so a generation read after a newer one holds
 * every commit made before any the newer one showed. Read oldest first (or at once), a read could
 * take an older generation before a commit, the newer one after the next: an item's later batch
 * without the earlier one (docs/design/invariants.md, "Reads"). A sealed version never changes.
 */
export function epochGroups(visible: readonly ShardView[]): ShardView[][] {
  if (!guard('read-newest-first')) return visible.map((v) => [v]);
  const live = new Map<string, ShardView[]>();
  const out: ShardView[][] = [];
  for (const v of visible) {
    if (v.version !== null) {
      out.push([v]);
      continue;
    }
    let g = live.get(v.writerEpoch);
    if (!g) live.set(v.writerEpoch, (g = []));
    g.push(v);
  }
  for (const g of live.values()) out.push(g.sort((a, b) => b.generation - a.generation));
  return out;
}

/** The visible generations in an order a sequential read may take them (`epochGroups`, flattened). */
export function readOrder(visible: readonly ShardView[]): ShardView[] {
  return epochGroups(visible).flat();
}

/**
 * Whether every generation `read` saw is still there and unretired, and, if read at its latest
 * version, no epoch at or above its own in its slot was fenced or sealed meanwhile (its epoch is
 * over: the seal decides what of it stays).
 */
export function stable(read: readonly ShardView[], now: MetaNames): boolean {
  const gens = new Set(now.gens);
  const ended = maxEpochPerSlot([...now.fenceEpochs, ...now.sealEpochs]);
  return read.every(
    (v) =>
      (!guard('relist-sees-retirement') || (gens.has(v.name) && !now.retired.has(v.name))) &&
      (v.version !== null || !guard('relist-sees-fence') || (ended.get(v.slot) ?? 0) < v.epoch),
  );
}
