/**
 * What reads hide of deleted items (docs/design/deletion.md): a tombstone `tomb.<hash>.<seq>`
 * in the meta folder, which every read lists anyway, hides the item's rows up to that seq.
 * Pure; no request is made. A log without tombstones pays one `size` check per read.
 */
import type { EventRow } from '../types.ts';
import { itemHash } from './layout.ts';

/** Hashes of item ids met by this process (item ids repeat across rows and reads). */
const hashes = new Map<string, string>();
const HASH_CACHE = 100_000;

function hashOf(itemId: string): string {
  let h = hashes.get(itemId);
  if (h === undefined) {
    if (hashes.size >= HASH_CACHE) hashes.clear();
    hashes.set(itemId, (h = itemHash(itemId)));
  }
  return h;
}

/** The highest deleted seq of `itemId` (0: none deleted). */
export function deletedThrough(tombstones: ReadonlyMap<string, number>, itemId: string): number {
  return tombstones.size === 0 ? 0 : (tombstones.get(hashOf(itemId)) ?? 0);
}

/** `rows` without those a tombstone hides. */
export function withoutDeleted<R extends Pick<EventRow, 'item_id' | 'item_seq'>>(tombstones: ReadonlyMap<string, number>, rows: R[]): R[] {
  if (tombstones.size === 0) return rows;
  return rows.filter((r) => r.item_seq > deletedThrough(tombstones, r.item_id));
}
