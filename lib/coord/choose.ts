/**
 * Which store a log keeps its item markers and claims in, decided once per log and recorded in
 * the log itself (`_dgcl/coordination`), so every process agrees whatever it was configured
 * with, and an upgrade never moves records a running writer trusts:
 *  - `table <logId>`: the lease table (lib/coord/dynamo.ts), keys scoped by the log's id. Chosen
 *    for a log that has nothing committed yet, when the lease store can hold records and the
 *    opener did not ask for objects;
 *  - `objects`: objects beside the log. Chosen for local lease files, on request
 *    (`coordination: 'objects'`, e.g. while processes of a version before this record still
 *    write), and for a log that already has data written before the table held them (its markers
 *    are objects: a writer that looked only in the table would take an item with events for a
 *    new one).
 * The record is created with a conditional put: two processes proposing at once both read the
 * winner's. A log deleted and made again gets a new id, so no record of the old one is met.
 *
 * A table log's records are part of the log. Before its choice record, a log writes a sentinel
 * record in the table naming the log's location (`_dgcl/log`); a process that finds the record
 * but not the sentinel (another table, or the table replaced), or a sentinel naming another
 * location (a copy of the log, which would share the original's records), refuses with CORRUPT
 * instead of taking every item for a new one. A record this version does not know (a later
 * layout) is CORRUPT too, so a process never writes a log it does not understand.
 */
import { randomUUID } from 'node:crypto';
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CorruptError, InvalidInputError, UnavailableError } from '../errors.ts';
import { META_DIR, parseMetaNames } from '../log/layout.ts';
import type { LeaseStore } from '../lease/types.ts';
import type { ObjectStore } from '../storage/objects.ts';
import { ObjectCoordStore } from './objects.ts';
import type { CoordStore, CoordTable } from './types.ts';

export const CHOICE_KEY = '_dgcl/coordination';
/** The table record naming the location of the log whose id scopes it. */
export const SENTINEL_KEY = '_dgcl/log';

/** What a new log proposes: the table when the lease store has one (default), or objects. */
export type CoordPreference = 'table' | 'objects';

export function coordTableOf(leases: LeaseStore): CoordTable | null {
  const t = leases as Partial<CoordTable>;
  return typeof t.coordStore === 'function' ? (t as CoordTable) : null;
}

export interface ChooseOptions {
  /** false (a write's validation pass, which must write nothing): see chooseCoordStore. */
  create: boolean;
  prefer: CoordPreference;
}

/**
 * The log's coordination store, creating its choice record if the log has none yet; or, with
 * `create: false`, the objects store when there is no record: no record in the table can exist
 * before the choice record names it.
 */
export async function chooseCoordStore(objects: ObjectStore, table: CoordTable | null, logName: string, o: ChooseOptions): Promise<CoordStore> {
  let body = await objects.get(CHOICE_KEY);
  if (body === null) {
    if (!o.create) return new ObjectCoordStore(objects);
    await objects.putIfAbsent(CHOICE_KEY, table && o.prefer === 'table' && (await isFresh(objects)) ? await newTableLog(table, logName, canonicalLocation(objects.baseUri)) : 'objects');
    body = await objects.get(CHOICE_KEY);
    if (body === null) throw new UnavailableError(`the coordination record ${CHOICE_KEY} of ${objects.baseUri} vanished after it was written`);
  }
  if (body === 'objects') return new ObjectCoordStore(objects);
  const m = /^table ([0-9a-f-]{36})$/.exec(body);
  if (!m) {
    throw new CorruptError(
      `the coordination record ${CHOICE_KEY} of ${objects.baseUri} is neither "objects" nor "table <id>" (a later version's layout?): ${JSON.stringify(body.slice(0, 80))}`,
    );
  }
  if (!table) {
    throw new InvalidInputError(
      `the log ${objects.baseUri} keeps its item markers and claims in the DynamoDB lease table; open it with that table's lease store (DGCL_LEASE_TABLE) to write or maintain it`,
      { field: 'leases' },
    );
  }
  const store = table.coordStore(`${logName}/${m[1]}`);
  const sentinel = await store.get(SENTINEL_KEY);
  if (sentinel === null) {
    throw new CorruptError(
      `the lease table holds no records of the log ${objects.baseUri} (id ${m[1]}): is it another table than the one the log was written with, or was the table replaced? Its item markers and claims are there; writing without them would take every item for a new one`,
    );
  }
  if (sentinel !== canonicalLocation(objects.baseUri)) {
    throw new CorruptError(
      `the log ${objects.baseUri} is a copy of ${sentinel} (same id ${m[1]}): its item markers and claims in the lease table are the original's, so the copy cannot be written (read it, or write to the original)`,
    );
  }
  return store;
}

/**
 * Nothing was ever committed: no base (listed for good once created) and no generation (a
 * commit's first step creates its `gen.` entry, removed only once its rows are in the base).
 * Fences, seals and tombstones without either hold no event.
 */
async function isFresh(objects: ObjectStore): Promise<boolean> {
  const meta = parseMetaNames(await objects.list(META_DIR));
  return !meta.baseExists && meta.gens.length === 0;
}

/**
 * The log's location as the sentinel names it: an S3 URI as it is (bucket and key are canonical
 * already); a local path with its symlinks resolved (the deepest existing folder: a new log's
 * own folders may not exist yet), so a log reached through a link is not taken for a copy of
 * itself (review15 F3). Synchronous on purpose: it runs once per log and process, and an await
 * on I/O outside the log's stores would be the one step of a write the simulation cannot
 * schedule (it made its schedules depend on the machine's timing).
 */
function canonicalLocation(uri: string): string {
  if (!uri.startsWith('file:')) return uri;
  let dir = fileURLToPath(uri);
  const rest: string[] = [];
  for (;;) {
    try {
      return pathToFileURL(path.join(realpathSync(dir), ...rest)).href;
    } catch (e) {
      const parent = path.dirname(dir);
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || parent === dir) throw e;
      rest.unshift(path.basename(dir));
      dir = parent;
    }
  }
}

/** A new log id whose sentinel is in the table: the choice record may name it from now on. */
async function newTableLog(table: CoordTable, logName: string, location: string): Promise<string> {
  const id = randomUUID();
  await table.coordStore(`${logName}/${id}`).put(SENTINEL_KEY, location);
  return `table ${id}`;
}
