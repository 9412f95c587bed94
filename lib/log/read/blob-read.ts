/**
 * A blob's bytes by its event id (the seed's two-step read): locate the event by light columns,
 * then take exactly its row's blob. One consistent read (LogReader.read): if the row moved
 * meanwhile (merge, retirement, compaction), it starts over.
 */
import { verifyBlob } from '../../codec.ts';
import { InvalidInputError, NotFoundError, UnavailableError } from '../../errors.ts';
import { rowsFromArrow } from '../../schema.ts';
import { deletedThrough } from '../deleted.ts';
import type { LogReader } from './reader.ts';
import { sqlString, type LanceTables, type Table } from '../tables.ts';

export async function loadBlobOf(ctx: { reader: LogReader; tables: LanceTables; uri: string }, eventId: string): Promise<Uint8Array> {
  const bytes = await ctx.reader.read(async (listing) => {
    const tables: Table[] = [];
    const base = await ctx.tables.base(listing.baseExists);
    if (base) tables.push(base);
    for (const v of listing.visible) tables.push(await ctx.reader.shardTable(v));
    return blobIn(tables, eventId, listing.tombstones);
  });
  if (bytes === null) throw new NotFoundError(`no event ${eventId} in ${ctx.uri}`);
  return bytes;
}

/**
 * The blob of event `eventId` from the first of `tables` holding it, or null when none does or
 * `tombstones` hide it. Also what a snapshot's blobs are read by (lib/log/snapshot/view.ts).
 */
export async function blobIn(tables: readonly Table[], eventId: string, tombstones: ReadonlyMap<string, number>): Promise<Uint8Array | null> {
  const filter = `event_id = ${sqlString(eventId)}`;
  for (const t of tables) {
    const hit = await t.query().where(filter).withRowId().select(['event_id', 'item_id', 'item_seq', 'payload_size', 'payload_checksum']).limit(1).toArrow();
    if (hit.numRows === 0) continue;
    // A deleted item's blobs are gone for readers like its other events.
    // (rowsFromArrow, not get(): apache-arrow's get() drops a leading U+FEFF of an id.)
    const [row] = rowsFromArrow(hit);
    if (row!.item_seq <= deletedThrough(tombstones, row!.item_id)) return null;
    const rowId = hit.getChild('_rowid')!.get(0) as bigint;
    const checksum = hit.getChild('payload_checksum')!.get(0) as string | null;
    const size = hit.getChild('payload_size')!.get(0) as bigint | number | null;
    if (checksum === null) throw new InvalidInputError(`event ${eventId} holds no blob`, { field: 'eventId' });
    const taken = await t.takeRowIds([rowId]).select(['event_id', 'value_blob']).toArrow();
    if (taken.numRows !== 1 || taken.getChild('event_id')!.get(0) !== eventId) {
      throw new UnavailableError(`the row of event ${eventId} moved while it was read`);
    }
    const bytes = new Uint8Array(taken.getChild('value_blob')!.get(0) as Uint8Array);
    verifyBlob(bytes, checksum, size === null ? null : Number(size), `blob of event ${eventId}`);
    return bytes;
  }
  return null;
}
