/**
 * Coordination records of a log on a local root in one SQLite file beside it
 * (`log.lance/_dgcl/coord.sqlite`), instead of one file per item marker and per claim.
 *
 * Why: as files, a batch of a new item cost a marker GET, a marker PUT (temp file + rename) and a
 * claim (temp file + link + unlink): about a dozen file-system calls, each a trip through libuv's
 * thread pool and a journaled metadata change. With many batches in flight they bounded a local
 * writer (docs/design/performance.md, "Local coordination in SQLite"). Here the writes a writer
 * makes in one turn of the event loop (a group's marker PUTs, then its claims) are one
 * transaction, and reads are point lookups.
 *
 * Semantics are CoordStore's (lib/coord/types.ts), across every process of the machine: SQLite
 * serializes writers (WAL; a writer waits up to BUSY_WAIT_MS for the lock, polling it between turns
 * of the event loop), `INSERT OR IGNORE`
 * creates a claim only if absent, and a transaction lands whole or not at all. Durability is that
 * of the files it replaces (not fsynced per commit: `synchronous = NORMAL` in WAL mode never
 * corrupts the file on power loss, but may lose the last transactions; docs/design/invariants.md,
 * "Power loss on a local root").
 *
 * One connection per file and process, shared by every log handle of it and closed with the last.
 * `node:sqlite` ships with Node 22 (experimental there: its warning is kept off the output).
 */
import { systemClock, type Clock } from '../clock.ts';
import { existsSync, mkdirSync, promises as fsp, statSync } from 'node:fs';
import path from 'node:path';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { CorruptError, DgclError, InternalError, PermissionDeniedError, UnavailableError } from '../errors.ts';
import { errCode, fsyncPath } from '../fsutil.ts';
import { CLAIMS_DIR } from './keys.ts';
import { checkObjectKey } from '../storage/location.ts';
import type { CoordKind, CoordStore } from './types.ts';

/** The file, below the log's folder, of a log whose record names no id (made by 0.3.0). */
export const COORD_DB = '_dgcl/coord.sqlite';

/**
 * The file of a log's records: one per log id (`_dgcl/coord.<id>.sqlite`), so that a repair builds
 * the new one beside the old and the record's PUT is the switch (lib/log/admin/rehome.ts).
 */
export function coordDbKey(id: string | null): string {
  return id === null ? COORD_DB : `_dgcl/coord.${id}.sqlite`;
}
/** `PRAGMA user_version` of the layout below; a file of another version is refused. */
const LAYOUT_VERSION = 1;
/** How long a write (or an open) waits for another process's transaction before it fails (UNAVAILABLE). */
const BUSY_WAIT_MS = 10_000;
/**
 * How long one synchronous SQLite call may wait for a lock (its busy handler sleeps inside the
 * call, blocking the event loop: lease renewals, other logs' acks and reads would stop). Longer
 * waits are made of such tries with the event loop free between them.
 */
const LOCK_TRY_MS = 25;
/** Claims deleted per transaction by the sweep. */
const SWEEP_CHUNK = 2_000;
/** Pause between tries for a lock (grows to this from 5 ms). */
const LOCK_PAUSE_MS = 50;

type Sqlite = typeof import('node:sqlite');
let sqlite: Sqlite | undefined;

function loadSqlite(): Sqlite {
  if (sqlite) return sqlite;
  // Node 22 prints an ExperimentalWarning when node:sqlite is first loaded; a CLI user would see
  // it on every command. Only that one warning is dropped.
  const emit = process.emitWarning;
  process.emitWarning = function (this: NodeJS.Process, w: string | Error, ...rest: unknown[]) {
    if (/SQLite is an experimental feature/.test(typeof w === 'string' ? w : w.message)) return;
    return (emit as (...a: unknown[]) => void).call(this, w, ...rest);
  } as typeof process.emitWarning;
  try {
    sqlite = process.getBuiltinModule('node:sqlite') as Sqlite | undefined;
  } finally {
    process.emitWarning = emit;
  }
  // Node 22.5-22.12 has it behind --experimental-sqlite only.
  if (!sqlite) throw new InternalError(`local logs keep their coordination records in SQLite (node:sqlite), which this Node ${process.version} does not offer: use Node 22.13 or later`);
  return sqlite;
}

function sqliteCode(e: unknown): number | undefined {
  const c = (e as { errcode?: unknown } | null)?.errcode;
  return typeof c === 'number' ? c & 0xff : undefined; // primary result code
}

/**
 * SQLITE_CORRUPT (11) and SQLITE_NOTADB (26) are CORRUPT; SQLITE_PERM (3) and SQLITE_READONLY
 * (8: a read-only file or folder) PERMISSION_DENIED; every other failure may pass.
 */
function failure(file: string, op: string, e: unknown): DgclError {
  if (e instanceof DgclError) return e;
  const code = sqliteCode(e);
  const msg = `coordination database ${file}: ${op} failed: ${(e as Error)?.message ?? e}`;
  if (code === 3 || code === 8) return new PermissionDeniedError(`${msg}; check the permissions of the log's folder`, file, { cause: e });
  return code === 11 || code === 26 ? new CorruptError(msg, { cause: e }) : new UnavailableError(msg, { cause: e });
}

interface Connection {
  db: DatabaseSync;
  /** Device and inode of the file when opened: a replaced file has others. */
  id: string;
  refs: number;
  get: StatementSync;
  put: StatementSync;
  insert: StatementSync;
  del: StatementSync;
  expire: StatementSync;
  /** Writes waiting for this turn's transaction. */
  pending: Array<{ run: (c: Connection) => unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void }>;
  /** A flush is scheduled (next turn, or after a pause while another process holds the lock). */
  scheduled: boolean;
  /** When the scheduled flush first found the lock taken (null: it has not). */
  waitingSince: number | null;
  /** The last handle closed while a flush was due: the flush closes the database after it. */
  closeWhenIdle: boolean;
  /**
   * The write-ahead log, held open once synced (with its folder): a later sync is one fsync on
   * the thread pool, started within the call, so the writer encodes the commit's rows meanwhile
   * (open, fsync and close were three trips, each waiting for the main thread between them).
   * The file lasts while this connection is open: SQLite removes it only when the last one closes.
   */
  wal: fsp.FileHandle | null;
  closed: boolean;
}

const connections = new Map<string, Connection>();

/** `dev:ino` of `file`, or undefined when it is gone. */
function fileId(file: string): string | undefined {
  const st = statSync(file, { throwIfNoEntry: false });
  return st ? `${st.dev}:${st.ino}` : undefined;
}

function open(file: string, create: boolean): Connection {
  const { DatabaseSync } = loadSqlite();
  if (!create && !existsSync(file)) throw missing(file);
  mkdirSync(path.dirname(file), { recursive: true });
  const db = new DatabaseSync(file, { timeout: LOCK_TRY_MS });
  try {
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = NORMAL');
    // 32 MB of page cache (default 2 MB): a group's reads and writes hit pages of the whole file,
    // ~350 bytes per record (one writer at 256 in flight: ~6% more events/s).
    db.exec('PRAGMA cache_size = -32000');
    db.exec('BEGIN IMMEDIATE');
    try {
      const v = (db.prepare('PRAGMA user_version').get() as { user_version: number }).user_version;
      if (v === 0 && !create) throw missing(file);
      if (v === 0) {
        // A rowid table with a unique key: rows land in write order, and only the narrow key
        // index takes each random key (claims and markers are keyed by hashes and ids). Keyed by
        // `key` itself (WITHOUT ROWID, as files made earlier still are), each insert split and dirtied a
        // random page of ~200-byte rows: half the coordination time of a group. Both shapes
        // answer the same statements, so the layout version did not change.
        db.exec('CREATE TABLE records (key TEXT NOT NULL UNIQUE, body TEXT NOT NULL, written_ms INTEGER NOT NULL)');
        db.exec('CREATE INDEX records_by_time ON records (written_ms)'); // the claim sweep
        db.exec(`PRAGMA user_version = ${LAYOUT_VERSION}`);
      } else if (v !== LAYOUT_VERSION) {
        throw new CorruptError(`coordination database ${file} has layout ${v}, this version knows ${LAYOUT_VERSION} (a later version's?)`);
      }
      db.exec('COMMIT');
    } catch (e) {
      db.exec('ROLLBACK');
      throw e;
    }
    return {
      db,
      id: fileId(file)!,
      refs: 0,
      get: db.prepare('SELECT body FROM records WHERE key = ?'),
      put: db.prepare('INSERT OR REPLACE INTO records (key, body, written_ms) VALUES (?, ?, ?)'),
      insert: db.prepare('INSERT OR IGNORE INTO records (key, body, written_ms) VALUES (?, ?, ?)'),
      del: db.prepare('DELETE FROM records WHERE key = ?'),
      expire: db.prepare('DELETE FROM records WHERE key IN (SELECT key FROM records WHERE written_ms < ? AND key > ? AND key < ? LIMIT ?)'),
      pending: [],
      scheduled: false,
      waitingSince: null,
      closeWhenIdle: false,
      wal: null,
      closed: false,
    };
  } catch (e) {
    db.close();
    throw e;
  }
}

/**
 * The log's record says its markers and claims are here, but the file is gone (or was made empty):
 * without its markers every item would look new and its next batch would reuse seqs.
 */
function missing(file: string): CorruptError {
  return new CorruptError(
    `the coordination database ${file} is missing or empty, while the log's _dgcl/coordination says its item markers and claims are there: writing without them would reuse seqs of existing items: stop the log's writers, then run \`dgcl repair\` to rebuild it from the log's events (docs/operations.md, "Repairing a log")`,
  );
}

function closeConnection(c: Connection): void {
  c.closed = true;
  c.db.close();
  void c.wal?.close().catch(() => undefined);
  c.wal = null;
}

/** SQLITE_BUSY (5) and SQLITE_LOCKED (6): another connection holds a lock the busy handler does not wait for. */
const isBusy = (e: unknown) => sqliteCode(e) === 5 || sqliteCode(e) === 6;

/**
 * The process's connection to `file`, opened if needed. A cached one whose file was replaced (the
 * log deleted and made again) is not reused: it would coordinate through the deleted file.
 * Opening may meet another process creating the file or switching it to WAL, which SQLite
 * answers with "database is locked" at once (its busy handler does not wait there): retried.
 */
async function acquire(file: string, create: boolean): Promise<Connection> {
  let c = connections.get(file);
  if (c && fileId(file) !== c.id) {
    connections.delete(file);
    if (c.refs === 0) closeConnection(c);
    c = undefined;
  }
  if (!c) {
    // Another call of this process may open it while this one waits.
    const opened = await whileBusy(file, 'open', () => connections.get(file) ?? open(file, create));
    const raced = connections.get(file);
    if (raced && raced !== opened) closeConnection(opened);
    c = raced ?? opened;
    connections.set(file, c);
  }
  c.refs++;
  return c;
}

export class SqliteCoordStore implements CoordStore {
  readonly kind: CoordKind = 'sqlite';
  private conn: Connection | null;

  private constructor(
    private readonly file: string,
    conn: Connection,
    private readonly clock: Clock,
  ) {
    this.conn = conn;
  }

  /**
   * The coordination database of the log in `logDir` (`.../log.lance`). `create`: made if missing
   * (only by the writer about to record the log's choice, before the record); otherwise a missing
   * one is CORRUPT. `clock` stamps the records (claims are deleted by their age on it).
   */
  static async open(logDir: string, o: { create: boolean; clock?: Clock; id?: string | null }): Promise<SqliteCoordStore> {
    const file = path.join(logDir, ...coordDbKey(o.id ?? null).split('/'));
    return new SqliteCoordStore(file, await acquire(file, o.create), o.clock ?? systemClock);
  }

  /**
   * Makes every write answered so far durable: fsync of the write-ahead log (where a commit lives
   * until a checkpoint copies it) and of its folder (the file is made again after the last
   * connection closed). The writer calls it after a group's item markers, before its commit: a
   * marker lost to a power cut while the item's rows survived would make the item look new.
   */
  sync(): Promise<void> {
    let c: Connection;
    try {
      c = this.c();
    } catch (e) {
      return Promise.reject(e);
    }
    // Not an async function: the fsync must be on the thread pool when this returns.
    if (c.wal) return c.wal.sync().catch((e: unknown) => Promise.reject(failure(this.file, 'sync', e)));
    return this.firstSync(c);
  }

  private async firstSync(c: Connection): Promise<void> {
    let wal: fsp.FileHandle | undefined;
    try {
      try {
        wal = await fsp.open(`${this.file}-wal`, 'r');
      } catch (e) {
        // Gone: checkpointed into the database file, which SQLite syncs; nothing to hold open.
        if (errCode(e) !== 'ENOENT') throw e;
      }
      await wal?.sync();
      await fsyncPath(path.dirname(this.file)); // the WAL file is made again after the last connection closed
    } catch (e) {
      await wal?.close().catch(() => undefined);
      throw failure(this.file, 'sync', e);
    }
    // Kept unless another sync kept one first, or the connection closed meanwhile.
    if (wal && !c.wal && !c.closed) c.wal = wal;
    else await wal?.close().catch(() => undefined);
  }

  private c(): Connection {
    if (!this.conn) throw new UnavailableError(`coordination database ${this.file}: used after the log was closed`);
    return this.conn;
  }

  async get(key: string): Promise<string | null> {
    const k = checkObjectKey(key, 'key');
    return this.read('get', () => this.one(k));
  }

  /**
   * A group's markers (lib/log/write/plan.ts). The file is checked to be the one this connection
   * has open first: one deleted or replaced under a running writer would otherwise keep answering
   * from the old copy, and a writer that later opens the new one would take its items for new.
   */
  async getMany(keys: readonly string[]): Promise<Map<string, string | null>> {
    const ks = keys.map((k) => checkObjectKey(k, 'key'));
    const c = this.c();
    if (fileId(this.file) !== c.id) {
      throw new CorruptError(`the coordination database ${this.file} was deleted or replaced while the log was open; nothing was written: stop the log's writers, then run \`dgcl repair\` (docs/operations.md, "Repairing a log")`);
    }
    return this.read('getMany', () => new Map(ks.map((k) => [k, this.one(k)])));
  }

  async put(key: string, body: string): Promise<void> {
    const k = checkObjectKey(key, 'key');
    return this.write((c) => {
      c.put.run(k, body, this.clock.nowMs());
    });
  }

  async putIfAbsent(key: string, body: string, _o: { expiresAfterMs: number }): Promise<boolean> {
    const k = checkObjectKey(key, 'key');
    return this.write((c) => Number(c.insert.run(k, body, this.clock.nowMs()).changes) === 1);
  }

  async delete(key: string): Promise<void> {
    const k = checkObjectKey(key, 'key');
    return this.write((c) => {
      c.del.run(k);
    });
  }

  /**
   * Claims are judged by the time they were written (this machine's clock, as a file's mtime).
   * In transactions of SWEEP_CHUNK claims, one per turn: an hour of claims at 1,000 batches/s in
   * one DELETE held the write lock for seconds, and every other process's writes waited behind it.
   */
  async deleteClaimsOlderThan(cutoffMs: number): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.write((c) => Number(c.expire.run(Math.floor(cutoffMs), `${CLAIMS_DIR}/`, `${CLAIMS_DIR}0`, SWEEP_CHUNK).changes));
      total += n;
      if (n < SWEEP_CHUNK) return total;
    }
  }

  /** Releases this handle's share of the connection (the last one closes it). */
  close(): void {
    const c = this.conn;
    if (!c) return;
    this.conn = null;
    if (--c.refs > 0) return;
    if (connections.get(this.file) === c) connections.delete(this.file);
    if (!c.scheduled) closeConnection(c);
    else c.closeWhenIdle = true; // after the queued transaction
  }

  private one(k: string): string | null {
    const row = this.c().get.get(k) as { body: string } | undefined;
    return row?.body ?? null;
  }

  /** A read; one that meets a lock (rare in WAL mode: another connection recovering the WAL) is tried again. */
  private read<T>(op: string, f: () => T): Promise<T> {
    return whileBusy(this.file, op, f);
  }

  /**
   * Queues `run` for the transaction that ends this turn of the event loop: every write queued
   * meanwhile (a group's claims, by any log handle of this file in the process) commits together,
   * or fails together, before any caller is answered. `run` gets the connection the write was
   * queued on: a handle closed before the flush (its log closed meanwhile) must not make the
   * turn's transaction fail for every other handle's writes.
   */
  private write<T>(run: (c: Connection) => T): Promise<T> {
    let c: Connection;
    try {
      c = this.c();
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise<T>((resolve, reject) => {
      c.pending.push({ run, resolve: resolve as (v: unknown) => void, reject });
      if (!c.scheduled) {
        c.scheduled = true;
        setImmediate(() => flush(c, this.file));
      }
    });
  }
}

/**
 * `f`, tried again while another process holds a lock SQLite does not wait for (up to
 * BUSY_WAIT_MS, the event loop free between tries); any other failure is thrown as DgclError.
 */
async function whileBusy<T>(file: string, op: string, f: () => T): Promise<T> {
  const since = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return f();
    } catch (e) {
      if (!isBusy(e) || Date.now() - since >= BUSY_WAIT_MS) throw failure(file, op, e);
    }
    await new Promise((r) => setTimeout(r, Math.min(5 * attempt, LOCK_PAUSE_MS)));
  }
}

function flush(c: Connection, file: string): void {
  c.scheduled = false;
  try {
    c.db.exec('BEGIN IMMEDIATE');
  } catch (e) {
    // Another process's transaction: try again after a pause, with the event loop free meanwhile.
    // Writes queued in the meantime join this transaction; no caller is answered before it ends.
    const now = Date.now();
    c.waitingSince ??= now;
    if (isBusy(e) && now - c.waitingSince < BUSY_WAIT_MS) {
      c.scheduled = true;
      setTimeout(() => flush(c, file), Math.min(5 + (now - c.waitingSince) / 10, LOCK_PAUSE_MS));
      return;
    }
    settle(c, c.pending.splice(0), failure(file, 'write', e), []);
    return;
  }
  const batch = c.pending;
  c.pending = [];
  const results: unknown[] = [];
  try {
    for (const w of batch) results.push(w.run(c));
    c.db.exec('COMMIT');
  } catch (e) {
    try {
      if (c.db.isTransaction) c.db.exec('ROLLBACK');
    } catch {
      // SQLite rolled back itself (an I/O error ends the transaction); a broken connection fails
      // the next BEGIN, which says why.
    }
    settle(c, batch, failure(file, 'write', e), []);
    return;
  }
  settle(c, batch, null, results);
}

function settle(c: Connection, batch: Connection['pending'], err: DgclError | null, results: unknown[]): void {
  c.waitingSince = null;
  if (err) for (const w of batch) w.reject(err);
  else batch.forEach((w, i) => w.resolve(results[i]));
  if (c.closeWhenIdle && !c.scheduled) closeConnection(c);
}

