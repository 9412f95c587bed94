/**
 * The coordination store a local log recorded (lib/coord/choose.ts), opened beside it, for tests
 * that look at item markers and claims directly. Close it after use.
 */
import { ObjectCoordStore } from '../../lib/coord/objects.ts';
import { coordDbKey, SqliteCoordStore } from '../../lib/coord/sqlite.ts';
import type { CoordStore } from '../../lib/coord/types.ts';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CHOICE_KEY, parseCoordRecord, readCoordRecord } from '../../lib/coord/choose.ts';
import type { LocalObjectStore } from '../../lib/storage/local.ts';
import type { ObjectStore } from '../../lib/storage/objects.ts';

export async function localCoord(objects: LocalObjectStore): Promise<CoordStore> {
  const record = await objects.get(CHOICE_KEY);
  const r = record === null ? null : parseCoordRecord(record);
  if (r?.kind === 'sqlite') return SqliteCoordStore.open(objects.dir, { create: false, id: r.id });
  if (r?.kind === 'objects' && r.id === null) return new ObjectCoordStore(objects);
  throw new Error(`the log ${objects.baseUri} records no local coordination store: ${record}`);
}

/** The id a log's lease keys are scoped by (lib/lease/slots.ts `slotKey`), from its record; null: names only. */
export async function leaseLogIdOf(objects: ObjectStore): Promise<string | null> {
  const r = await readCoordRecord(objects);
  return r !== null && r.record.scoped ? r.record.id : null;
}

/** The same for a local log folder (`.../log.lance`). */
export function leaseLogIdAt(logDir: string): string | null {
  let body: string;
  try {
    body = readFileSync(path.join(logDir, ...CHOICE_KEY.split('/')), 'utf8');
  } catch {
    return null;
  }
  const r = parseCoordRecord(body);
  return r !== null && r.scoped ? r.id : null;
}

/** The path of a local log's SQLite file, as its record names it (`.../log.lance` folder). */
export function coordDbPath(logDir: string): string {
  const body = readFileSync(path.join(logDir, ...CHOICE_KEY.split('/')), 'utf8');
  const r = parseCoordRecord(body);
  if (r?.kind !== 'sqlite') throw new Error(`the log ${logDir} records no SQLite file: ${body}`);
  return path.join(logDir, ...coordDbKey(r.id).split('/'));
}
