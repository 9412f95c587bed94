/**
 * Every visible event of a log, every column (blob bytes included), each event once, as of one
 * consistent read: what `copyLog` writes into its target (lib/log/admin/copy.ts).
 *
 * The read path's rules, reused: the listing decides which shard generations are visible and
 * at which versions (lib/log/read/reader.ts), `streamListing` picks one copy per event between
 * the unmerged tail and the base (lib/log/read/stream.ts), and tombstones hide deleted items'
 * rows (lib/log/deleted.ts). Done in two parts, because rows are written to the target between
 * reads (an async step a stream's visitor cannot take):
 *   1. inside one consistent read (it starts over while the layout changes under it): the base
 *      pinned at its current version, and the tail's chosen copies, kept in memory (the tail is
 *      what writers have not merged yet: at most a few generations per slot);
 *   2. after it: the pinned base streamed, without the events whose chosen copy is in the tail.
 * Tombstones are applied to both parts afterwards, to the copy the read keeps (as streamListing
 * does: a deleted copy in the tail that beats the base's hides the base's too).
 * A base version stays readable until maintenance removes it (`versionRetentionMs` after a newer
 * one): a copy that takes longer than that beside maintenance may fail (UNAVAILABLE) and is run
 * again.
 */
import { COLUMN_NAMES } from '../../schema.ts';
import type { EventRow } from '../../types.ts';
import { deletedThrough } from '../deleted.ts';
import type { LogReader, ShardListing } from '../read/reader.ts';
import { releaseBatch } from '../read/release.ts';
import { batchRows, pinnedBase, rowCollector, stream, streamListing } from '../read/stream.ts';
import type { LanceTables, Table } from '../tables.ts';

export interface Snapshot {
  listing: ShardListing;
  /** The base at the read's version, or null while the log has none. */
  base: Table | null;
  /** The tail's chosen copies (not filtered by tombstones yet). */
  tail: EventRow[];
}

/** Part 1: the listing, the pinned base and the tail, from one consistent read. */
export function readSnapshot(reader: LogReader, tables: LanceTables): Promise<Snapshot> {
  return reader.read(async (listing) => {
    const base = await pinnedBase(tables, listing);
    const tail: EventRow[] = [];
    await streamListing(reader, listing, base, { columns: COLUMN_NAMES }, rowCollector(tail), { skipBase: true, keepDeleted: true });
    return { listing, base, tail };
  });
}

/**
 * Part 2: every event of the snapshot that no tombstone hides, base first, in groups of at most
 * `maxRows` rows, each handed to `sink` (awaited before the next is read).
 */
export async function eachVisibleGroup(snap: Snapshot, maxRows: number, maxBytes: number, sink: (rows: EventRow[]) => Promise<void>): Promise<void> {
  const tombs = snap.listing.tombstones;
  const alive = (r: EventRow) => tombs.size === 0 || r.item_seq > deletedThrough(tombs, r.item_id);
  const inTail = new Set(snap.tail.map((r) => r.event_id));
  let group: EventRow[] = [];
  let bytes = 0;
  const take = async (r: EventRow) => {
    group.push(r);
    bytes += rowBytes(r);
    if (group.length >= maxRows || bytes >= maxBytes) {
      const full = group;
      group = [];
      bytes = 0;
      await sink(full);
    }
  };
  if (snap.base) {
    for await (const b of stream(snap.base, null, COLUMN_NAMES)) {
      const rows = batchRows(b);
      releaseBatch(b);
      for (const r of rows) if (!inTail.has(r.event_id) && alive(r)) await take(r);
    }
  }
  for (const r of snap.tail) if (alive(r)) await take(r);
  if (group.length > 0) await sink(group);
}

/** About how many bytes a row takes (its variable-width cells, plus a fixed part). */
function rowBytes(r: EventRow): number {
  let n = 128;
  for (const v of [r.value_str, r.value_json, r.error_dump, r.traceback, r.query_tags_json]) if (typeof v === 'string') n += v.length;
  if (r.value_blob) n += r.value_blob.byteLength;
  return n;
}
