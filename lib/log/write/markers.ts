/**
 * The writer's coordination records (docs/design/invariants.md, "Acks"): item markers (which
 * writer last began writing an item), claims (the first ack of a checkpoint), and the
 * deleted-seq records an item's deletes left. Owned by ShardWriter (lib/log/write/writer.ts),
 * one per writer: its nonce tells this writer's bodies from every other's.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.ts';
import type { CoordStore } from '../../coord/types.ts';
import { CorruptError, UnavailableError } from '../../errors.ts';
import { guard } from '../../guards.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { Ack } from '../../types.ts';
import { claimKey, floorDir, itemKey } from '../layout.ts';

/** Item markers put by deleteItem start with this word (writers' start with their epoch). */
export const DELETED_MARKER = 'deleted';

/** Tries of an item marker PUT (each with a new body) before the group fails. */
const MARKER_PUT_ATTEMPTS = 3;

export class Markers {
  /** Tells this writer's claims from another's (a retried claim PUT may find its own body). */
  private readonly claimNonce = randomUUID();
  /** Numbers this writer's marker bodies, so each PUT is told from every earlier one. */
  private markerSeq = 0;

  constructor(
    private readonly ctx: { objects: ObjectStore; coord: (o?: { create: boolean }) => Promise<CoordStore> },
    private readonly opts: { clock: Clock; claimRetentionMs: number },
  ) {}

  /**
   * PUT the item's marker (`lead`: the writer epoch, or DELETED_MARKER), retried on a transient
   * failure with a new body each time: the store sends a PUT once (ObjectStore.put), and a failed
   * one may still land later, which is harmless only because no failed body is ever trusted.
   * Returns the body that was answered.
   */
  async putMarker(itemId: string, lead: string): Promise<string> {
    const coord = await this.ctx.coord();
    for (let attempt = 0; ; attempt++) {
      const body = guard('unique-marker-bodies') ? `${lead} ${this.claimNonce} ${++this.markerSeq}` : `${lead} ${this.claimNonce}`;
      try {
        await coord.put(itemKey(itemId), body);
        return body;
      } catch (e) {
        if (!(e instanceof UnavailableError) || attempt + 1 >= MARKER_PUT_ATTEMPTS) throw e;
        await this.opts.clock.sleep(25 * 2 ** attempt);
      }
    }
  }

  /** The highest seq each item was ever deleted through (lib/log/layout.ts floorDir); absent: never. */
  async floorsOf(itemIds: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (!guard('deleted-seq-records')) return out;
    await Promise.all(
      itemIds.map(async (id) => {
        for (const n of await this.floorSeqs(id)) out.set(id, Math.max(out.get(id) ?? 0, n));
      }),
    );
    return out;
  }

  /** Every seq the item's deletes wrote a deleted-seq record for (one listing). */
  async floorSeqs(itemId: string): Promise<number[]> {
    return (await this.ctx.objects.list(floorDir(itemId))).map((name) => {
      const n = Number(name);
      if (!/^\d{12}$/.test(name) || !Number.isSafeInteger(n)) throw new CorruptError(`deleted-seq record ${floorDir(itemId)}/${name} of item ${JSON.stringify(itemId)} is not a seq`);
      return n;
    });
  }

  /** The claims of a group's new checkpoints, before its epoch check (a mutant's order only). */
  async claimAll(plans: Array<{ fresh: Ack[] }>, writerEpoch: string): Promise<void> {
    if (guard('claims')) await Promise.all(plans.flatMap((p) => p.fresh.map((ack) => this.claim(ack, writerEpoch))));
  }

  /**
   * Claim a checkpoint's first ack; turns `ack` into the winner's duplicate if another writer won.
   * A claim in the table holds the ack's seqs and its number of events, not the event ids: those
   * follow from the batch, which the checkpoint id names, so every claimant has the same ones,
   * and a claim stays a few hundred bytes for any batch (a table item holds at most 400 KB).
   */
  async claim(ack: Ack, writerEpoch: string): Promise<void> {
    const by = `${writerEpoch}/${this.claimNonce}`;
    const key = claimKey(ack.checkpointId);
    const coord = await this.ctx.coord();
    // As objects, claims keep the ids too: versions before 0.2.0 (which only use objects) read a
    // claim as a whole ack. Elsewhere no id at all: nothing reads the item id back,
    // and a SQLite file keeps a deleted row's bytes until they are overwritten, where a purged
    // item's id must not stay (docs/design/deletion.md, "Purge").
    const ids = coord.kind === 'objects' ? { itemId: ack.itemId, eventIds: ack.eventIds } : {};
    const body = JSON.stringify({ checkpointId: ack.checkpointId, ...ids, events: ack.eventIds.length, firstSeq: ack.firstSeq, lastSeq: ack.lastSeq, claimedBy: by });
    for (let attempt = 0; attempt < 3; attempt++) {
      if (await coord.putIfAbsent(key, body, { expiresAfterMs: this.opts.claimRetentionMs })) return;
      const got = await coord.get(key);
      if (got === null) continue; // deleted by maintenance meanwhile: claim again
      const first = JSON.parse(got) as Partial<Ack> & { events?: number; claimedBy?: string };
      if (first.claimedBy === by) return; // our own earlier attempt landed
      const events = first.eventIds?.length ?? first.events;
      if (first.checkpointId !== ack.checkpointId || events !== ack.eventIds.length || typeof first.firstSeq !== 'number' || typeof first.lastSeq !== 'number') {
        throw new CorruptError(`the claim of checkpoint ${ack.checkpointId} is not one of its batch (${events} events, expected ${ack.eventIds.length}): ${got.slice(0, 200)}`);
      }
      Object.assign(ack, { firstSeq: first.firstSeq, lastSeq: first.lastSeq, duplicate: true });
      return;
    }
    throw new UnavailableError(`claim of checkpoint ${ack.checkpointId} kept vanishing`);
  }
}
