/**
 * `stats()`: the base and every unmerged shard generation of one consistent read, each labelled
 * with what it waits for. A generation nobody will merge but maintenance (its writer's lease
 * expired or was released, the slot moved to another epoch, or the local holder process died)
 * is `abandoned`, and the stats say what to run; before, a killed writer's shard read as "live"
 * for as long as nobody maintained the log.
 */
import type { LogStats, ShardState, ShardStats } from '../../api.ts';
import type { Clock } from '../../clock.ts';
import { DgclError } from '../../errors.ts';
import { slotKey } from '../../lease/slots.ts';
import { readCoordRecord } from '../../coord/choose.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { Lease, LeaseStore } from '../../lease/types.ts';
import type { LogReader, ShardListing } from './reader.ts';
import type { LanceTables } from '../tables.ts';

export interface StatsContext {
  uri: string;
  pipeline: string;
  experiment: string;
  tables: LanceTables;
  reader: LogReader;
  leases: LeaseStore;
  clock: Clock;
  objects: ObjectStore;
}

/** What maintenance is asked to do about unmerged generations of writers that are gone. */
export const MAINTAIN_HINT = 'run `dgcl maintain` (or log.maintain()) to merge them';

export async function statsOf(c: StatsContext, listing: ShardListing): Promise<LogStats> {
  const base = await c.tables.base(listing.baseExists);
  const baseStats = base
    ? await (async () => {
        const s = await base.stats();
        return {
          version: await base.version(),
          rows: s.numRows,
          fragments: s.fragmentStats.numFragments,
          indexes: (await base.listIndices()).map((i) => i.name),
        };
      })()
    : { version: 0, rows: 0, fragments: 0, indexes: [] };
  const writers = await writerStates(c, listing);
  const shards: ShardStats[] = [];
  for (const v of listing.visible) {
    const t = await c.reader.shardTable(v);
    const state: ShardState = v.sealed ? 'sealed' : (writers.get(v.slot)?.(v.epoch) ?? 'unsealed');
    shards.push({
      name: v.name,
      slot: v.slot,
      epoch: v.epoch,
      generation: v.generation,
      version: await t.version(),
      rows: await t.countRows(),
      sealedAtVersion: v.sealed ? v.version : null,
      retired: false,
      state,
    });
  }
  for (const r of listing.retired) {
    shards.push({ name: r.name, slot: r.slot, epoch: r.epoch, generation: r.generation, version: 0, rows: 0, sealedAtVersion: null, retired: true, state: 'retired' });
  }
  return { uri: c.uri, base: baseStats, shards, hint: hintOf(shards) };
}

/**
 * Per slot with an unsealed generation: the state of a generation of a given epoch, from the
 * slot's lease. No lease store to ask (an s3:// root read without DGCL_LEASE_TABLE), or one that
 * does not answer: no entry (the generation stays `unsealed`, unknown).
 */
async function writerStates(c: StatsContext, listing: ShardListing): Promise<Map<number, (epoch: number) => ShardState>> {
  const slots = [...new Set(listing.visible.filter((v) => !v.sealed).map((v) => v.slot))];
  const out = new Map<number, (epoch: number) => ShardState>();
  if (slots.length === 0) return out;
  // The slot leases are scoped as the log's record says (lib/coord/choose.ts); a record this
  // version cannot read leaves the generations unknown, as a lease store that does not answer does.
  let record;
  try {
    record = (await readCoordRecord(c.objects))?.record ?? null;
  } catch (e) {
    if (e instanceof DgclError) return out;
    throw e;
  }
  const logId = record !== null && record.scoped ? record.id : null;
  await Promise.all(
    slots.map(async (slot) => {
      const key = slotKey(c.pipeline, c.experiment, slot, logId);
      let lease: Lease | null;
      let gone = false;
      try {
        lease = await c.leases.read(key);
        gone = (await c.leases.holderIsGone?.(key)) ?? false;
      } catch (e) {
        if (e instanceof DgclError) return;
        throw e;
      }
      const now = c.clock.nowMs();
      const held = lease !== null && lease.owner !== '' && lease.expiresAtMs > now && !gone;
      out.set(slot, (epoch) => (held && lease!.epoch === epoch ? 'live' : 'abandoned'));
    }),
  );
  return out;
}

function hintOf(shards: readonly ShardStats[]): string | null {
  const waiting = shards.filter((s) => s.state === 'abandoned' || s.state === 'sealed');
  if (waiting.length === 0) return null;
  const slots = [...new Set(waiting.map((s) => s.slot))].sort((a, b) => a - b);
  const n = waiting.length;
  return `${n} unmerged generation${n === 1 ? '' : 's'} of writers that are gone (slot${slots.length === 1 ? '' : 's'} ${slots.join(', ')}): ${MAINTAIN_HINT}`;
}
