/**
 * The coordination store a local log recorded (lib/coord/choose.ts), opened beside it, for tests
 * that look at item markers and claims directly. Close it after use.
 */
import { ObjectCoordStore } from '../../lib/coord/objects.ts';
import { SqliteCoordStore } from '../../lib/coord/sqlite.ts';
import type { CoordStore } from '../../lib/coord/types.ts';
import { CHOICE_KEY } from '../../lib/coord/choose.ts';
import type { LocalObjectStore } from '../../lib/storage/local.ts';

export async function localCoord(objects: LocalObjectStore): Promise<CoordStore> {
  const record = await objects.get(CHOICE_KEY);
  if (record === 'sqlite') return SqliteCoordStore.open(objects.dir, { create: false });
  if (record === 'objects') return new ObjectCoordStore(objects);
  throw new Error(`the log ${objects.baseUri} records no local coordination store: ${record}`);
}
