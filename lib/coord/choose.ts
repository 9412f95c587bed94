/**
 * Which store a log keeps its item markers and claims in, and which lease store it belongs to,
 * decided once per log by its first writer and recorded in the log (`_dgcl/coordination`), so
 * every process agrees whatever it was configured with:
 *  - `table <logId> v2`: markers and claims in the lease table (lib/coord/dynamo.ts), keys scoped by
 *    the log's id, and its lease keys too (`CoordRecord.scoped`). Chosen by a writer whose lease
 *    store is a DynamoDB table, not told `coordination: 'objects'`, for a log with nothing
 *    committed yet; `table <logId>` (no ` v2`): the same, made before lease keys were scoped;
 *  - `objects <logId>`: markers and claims as objects beside the log, leases in a DynamoDB table
 *    (on request: while processes of a version before 0.2.0, which know no record, still write;
 *    or a log with data from before, whose markers are objects: a writer that looked only in the
 *    table would take an item with events for a new one);
 *  - `sqlite <logId> v2`: one SQLite file per log id beside the log (lib/coord/sqlite.ts
 *    `coordDbKey`), holding the sentinel too, leases in local lease files. Chosen by a writer on a
 *    local root for a log with nothing committed yet, unless told `coordination: 'objects'`;
 *    `sqlite` (no id): the file of a log made by 0.3.0;
 *  - `objects`: objects beside the log, leases in local lease files (logs created before 0.3.0,
 *    or on request as above).
 * A repair or an adoption (lib/log/admin/rehome.ts) replaces the record by a ` v2` one of a new id.
 * The record is created with a conditional put: two processes proposing at once both read the
 * winner's. A log deleted and made again gets a new id, so no record of the old one is met.
 *
 * A log with an id belongs to one lease table: before its record, the log puts a sentinel in the
 * table under its id, naming the log's location (`_dgcl/log`). A process that finds the record
 * but not the sentinel (another table: its leases would not fence the log's writers, and its
 * markers would be missing), or a sentinel naming another location (a copy of the log, sharing
 * the original's records), refuses with CORRUPT before it writes anything; a process whose lease
 * store does not match the record's kind refuses with INVALID_INPUT; a record this version does
 * not know (a later layout) is CORRUPT.
 */
import { randomUUID } from 'node:crypto';
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Clock } from '../clock.ts';
import { CorruptError, InvalidInputError, UnavailableError } from '../errors.ts';
import { META_DIR, parseMetaNames } from '../log/layout.ts';
import type { LeaseStore } from '../lease/types.ts';
import type { ObjectStore } from '../storage/objects.ts';
import { LocalObjectStore } from '../storage/local.ts';
import { ObjectCoordStore } from './objects.ts';
import { coordDbKey, SqliteCoordStore } from './sqlite.ts';
import type { CoordStore, CoordTable } from './types.ts';

export const CHOICE_KEY = '_dgcl/coordination';
/** The table record naming the location of the log whose id scopes it. */
export const SENTINEL_KEY = '_dgcl/log';

/** What a new log proposes: the table when the lease store has one (default), or objects. */
export type CoordPreference = 'table' | 'objects';

/**
 * A log's coordination record, parsed. `scoped`: the record ends in ` v2` (logs made or repaired
 * by this version): the log's lease keys carry its id as well (`<pipeline>/<experiment>/<id>/slot/3`,
 * lib/lease/slots.ts), so logs of the same names under other roots or buckets sharing one lease
 * table never meet, and a repaired or adopted log (a new id) starts apart from every process that
 * wrote it before. Records without it (older logs, or `coordination: 'objects'` for versions before
 * this one that still write) keep the names-only keys those versions use.
 */
export interface CoordRecord {
  kind: 'table' | 'objects' | 'sqlite';
  /** The id scoping the log's records in the lease table (and its leases when `scoped`); null for local records before ids. */
  id: string | null;
  scoped: boolean;
}

const RECORD_RE = /^(table|objects|sqlite)(?: ([0-9a-f-]{36}))?( v2)?$/;

/** The record's parts; null for a body this version does not know (a later layout). */
export function parseCoordRecord(body: string): CoordRecord | null {
  const m = RECORD_RE.exec(body);
  if (!m) return null;
  const kind = m[1] as CoordRecord['kind'];
  const id = m[2] ?? null;
  const scoped = m[3] !== undefined;
  // Ids came with the table's records; a scoped record always has one.
  if ((kind === 'table' && id === null) || (scoped && id === null) || (kind === 'sqlite' && id !== null && !scoped)) return null;
  return { kind, id, scoped };
}

export function formatCoordRecord(r: CoordRecord): string {
  return `${r.kind}${r.id !== null ? ` ${r.id}` : ''}${r.scoped ? ' v2' : ''}`;
}

/**
 * The prefix of the log's lease keys: `<pipeline>/<experiment>` for a record that is not scoped
 * (or no record yet: a log whose first write has not recorded one), else `<pipeline>/<experiment>/<id>`.
 */
export function leaseScopeOf(logName: string, r: CoordRecord | null): string {
  return r !== null && r.scoped ? `${logName}/${r.id}` : logName;
}

/** The log's coordination record as stored (null: none yet). */
export async function readCoordRecord(objects: ObjectStore): Promise<{ body: string; record: CoordRecord } | null> {
  const body = await objects.get(CHOICE_KEY);
  if (body === null) return null;
  const record = parseCoordRecord(body);
  if (record === null) throw unknownRecord(objects, body);
  return { body, record };
}

function unknownRecord(objects: ObjectStore, body: string): CorruptError {
  return new CorruptError(
    `the coordination record ${CHOICE_KEY} of ${objects.baseUri} is not one this version knows ("objects", "sqlite", "table <id>", "objects <id>", each maybe ending in " v2"; a later version's layout?): ${JSON.stringify(body.slice(0, 80))}`,
  );
}

export function coordTableOf(leases: LeaseStore): CoordTable | null {
  const t = leases as Partial<CoordTable>;
  return typeof t.coordStore === 'function' ? (t as CoordTable) : null;
}

export interface ChooseOptions {
  /** false (maintenance, and a write's validation pass): never write the record; see below. */
  create: boolean;
  prefer: CoordPreference;
  /** The clock a local log's SQLite store stamps its records with (default: the system's). */
  clock?: Clock;
}

/**
 * The log's coordination store, with `recorded` telling whether it comes from the log's record
 * (it never changes then). Without a record: a writer (`create`) makes it; otherwise the objects
 * store, unrecorded: no table record can exist before the record naming the table.
 */
export async function chooseCoordStore(
  objects: ObjectStore,
  table: CoordTable | null,
  logName: string,
  o: ChooseOptions,
): Promise<{ store: CoordStore; recorded: boolean; record: CoordRecord | null }> {
  let body = await objects.get(CHOICE_KEY);
  if (body === null) {
    if (!o.create) return { store: new ObjectCoordStore(objects), recorded: false, record: null };
    const fresh = await isFresh(objects);
    const localDir = o.prefer === 'table' && fresh && !table ? localDirOf(objects) : null;
    const localId = randomUUID();
    // The database exists before the record names it: a process that finds the record and not
    // the file refuses (the markers it held are gone) instead of making an empty one.
    if (localDir !== null) {
      const db = await SqliteCoordStore.open(localDir, { create: true, id: localId, ...(o.clock ? { clock: o.clock } : {}) });
      try {
        // As the table's sentinel: a copy of the folder (cp -r) finds another location here.
        await db.put(SENTINEL_KEY, canonicalLocation(objects.baseUri));
      } finally {
        db.close();
      }
    }
    // Scoped (v2) unless told to stay readable by versions before it (`coordination: 'objects'`),
    // or the log has data from before records (its markers are objects its writers read).
    const scoped = o.prefer === 'table' && fresh;
    const record = table
      ? await newTableLog(table, logName, objects, scoped ? 'table' : 'objects', scoped)
      : localDir !== null
        ? formatCoordRecord({ kind: 'sqlite', id: localId, scoped: true })
        : 'objects';
    await objects.putIfAbsent(CHOICE_KEY, record);
    body = await objects.get(CHOICE_KEY);
    if (body === null) throw new UnavailableError(`the coordination record ${CHOICE_KEY} of ${objects.baseUri} vanished after it was written`);
  }
  const record = parseCoordRecord(body);
  if (record === null) throw unknownRecord(objects, body);
  return { store: await storeOf(objects, table, logName, record, o.clock), recorded: true, record };
}

/** The store a record names, after checking this process may use it (see the module's comment). */
async function storeOf(objects: ObjectStore, table: CoordTable | null, logName: string, record: CoordRecord, clock: Clock | undefined): Promise<CoordStore> {
  const body = formatCoordRecord(record);
  if (record.kind === 'sqlite' || (record.kind === 'objects' && record.id === null)) {
    if (table) {
      throw new InvalidInputError(
        `the log ${objects.baseUri} takes its leases from local lease files (its ${CHOICE_KEY} says "${body}"); this process uses a DynamoDB lease table, whose leases would not fence the log's writers`,
        { field: 'leases' },
      );
    }
    if (record.kind === 'objects') return new ObjectCoordStore(objects);
    // Opened through any store of a local folder (a wrapper of the real one too); only the real
    // one chooses it (above), so the simulation's logs keep objects, which it schedules.
    const dir = objects.baseUri.startsWith('file:') ? fileURLToPath(objects.baseUri) : null;
    const file = coordDbKey(record.id);
    if (dir === null) throw new InvalidInputError(`the log ${objects.baseUri} keeps its item markers and claims in a SQLite file beside it (${file}), which only a local root can open`, { field: 'root' });
    const db = await SqliteCoordStore.open(dir, { create: false, id: record.id, ...(clock ? { clock } : {}) });
    if (record.id !== null) {
      try {
        await checkSentinel(objects, await db.get(SENTINEL_KEY), `its SQLite records (${file})`, record.id);
      } catch (e) {
        db.close();
        throw e;
      }
    }
    return db;
  }
  const kind = record.kind;
  const id = record.id!;
  if (!table) {
    throw new InvalidInputError(
      `the log ${objects.baseUri} takes its leases from a DynamoDB lease table${kind === 'table' ? ', which also holds its item markers and claims' : ''}; open it with that table's lease store (DGCL_LEASE_TABLE) to write or maintain it`,
      { field: 'leases' },
    );
  }
  const scoped = table.coordStore(`${logName}/${id}`);
  const sentinel = await scoped.get(SENTINEL_KEY);
  if (sentinel === null) {
    throw new CorruptError(
      `the lease table holds no record of the log ${objects.baseUri} (id ${id}): is it another table than the one the log was written with, or was the table replaced or lost? Run \`dgcl repair\` on the log to rebuild its records in this table (docs/operations.md, "A lost or new lease table")`,
    );
  }
  await checkSentinel(objects, sentinel, 'its records in the lease table', id);
  return kind === 'table' ? scoped : new ObjectCoordStore(objects);
}

/** The sentinel names this location: else the log is a copy (or was moved), and its records are the original's. */
async function checkSentinel(objects: ObjectStore, sentinel: string | null, where: string, id: string): Promise<void> {
  if (sentinel === null) {
    throw new CorruptError(`the log ${objects.baseUri} (id ${id}) has lost the record naming its location in ${where}; run \`dgcl repair\` to rebuild its records (docs/operations.md, "Repairing a log")`);
  }
  if (sentinel !== canonicalLocation(objects.baseUri)) {
    throw new CorruptError(
      `the log ${objects.baseUri} is a copy of ${sentinel} (same id ${id}): ${where} are the original's, so the copy cannot be written or maintained as it is; \`dgcl adopt\` makes it a log of its own (docs/operations.md, "Copying, moving and restoring a log")`,
    );
  }
}

/** The folder of a new log on a local root: only through the real store, not a wrapper such as the simulation's. */
function localDirOf(objects: ObjectStore): string | null {
  return objects instanceof LocalObjectStore ? objects.dir : null;
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
 * itself. Synchronous on purpose: it runs once per log and process, and an await
 * on I/O outside the log's stores would be the one step of a write the simulation cannot
 * schedule (it made its schedules depend on the machine's timing).
 */
export function canonicalLocation(uri: string): string {
  if (!uri.startsWith('file:')) return uri;
  let dir = fileURLToPath(uri);
  const rest: string[] = [];
  for (;;) {
    try {
      return pathToFileURL(path.join(realpathSync(dir), ...rest)).href;
    } catch (e) {
      const parent = path.dirname(dir);
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || parent === dir) {
        throw new UnavailableError(`cannot resolve the location of the log ${uri}: ${(e as Error).message}`, { cause: e });
      }
      rest.unshift(path.basename(dir));
      dir = parent;
    }
  }
}

/** A new log id whose sentinel is in the table: the choice record may name it from now on. */
async function newTableLog(table: CoordTable, logName: string, objects: ObjectStore, kind: 'table' | 'objects', scoped: boolean): Promise<string> {
  const id = randomUUID();
  await table.coordStore(`${logName}/${id}`).put(SENTINEL_KEY, canonicalLocation(objects.baseUri));
  return formatCoordRecord({ kind, id, scoped });
}
