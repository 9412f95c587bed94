/**
 * Lance handles of one experiment: the base table and shard generation tables, cached per
 * process. Connections use readConsistencyInterval 0 so every query sees the latest commit
 * (read-your-writes across processes); sealed generations get their own handle pinned at the
 * sealed version, which never changes.
 */
import { guard } from '../guards.ts';
import { randomBytes } from 'node:crypto';
import * as lancedb from '@lancedb/lancedb';
import { EVENT_SCHEMA } from '../schema.ts';
import type { ObjectStore } from '../storage/objects.ts';
import { DatasetSync } from '../storage/dataset-sync.ts';
import { isObjectStoreUri } from '../storage/location.ts';
import { BASE_KEY, genKey, logIdKey, META_DIR, parseMetaNames, SHARDS_DIR } from './layout.ts';

export type Table = lancedb.Table;

/**
 * Lance file format of the tables this project creates, by kind of root (a dataset keeps the
 * format it was created with). On a local disk LanceDB 0.39's default, 2.2, makes point reads
 * several times slower than 2.1; on S3, 2.1 needs more requests for the same read and is slower
 * there (docs/design/performance.md, "Folds").
 */
export function dataStorageVersion(uri: string): '2.1' | '2.2' {
  return isObjectStoreUri(uri) ? '2.2' : '2.1';
}

/**
 * The query's projection as a column -> expression map: the same plan as `select(columns)`, but
 * faster for point reads (docs/design/performance.md, "Folds"); no projection at all would read
 * the blob bytes.
 */
export function projection(columns: readonly string[]): Map<string, string> {
  return new Map(columns.map((c) => [c, c]));
}

/** Bounds of one open log's Lance caches (index pages; manifests and file metadata). */
const INDEX_CACHE_BYTES = 128 * 2 ** 20;
const METADATA_CACHE_BYTES = 64 * 2 ** 20;

/**
 * Wraps every table handle this process opens (the simulation harness gates and faults Lance
 * calls through it). `name` is the shard generation, or `base`.
 */
export type TableWrapper = (table: Table, name: string) => Table;

/** Wraps every fsync of a dataset (`sync`): the simulation's scheduling and fault point. */
export type SyncWrapper = (name: string, run: () => Promise<void>) => Promise<void>;

export class LanceTables {
  private baseConn: Promise<lancedb.Connection> | null = null;
  private shardConn: Promise<lancedb.Connection> | null = null;
  /**
   * For this process's writes to its own generations: only it writes them, so its commits need
   * no version checks. Never for reads (see `createShard`).
   */
  private ownShardConn: Promise<lancedb.Connection> | null = null;
  private baseTable: Promise<Table> | null = null;
  private readonly latest = new Map<string, Promise<Table>>();
  private readonly pinned = new Map<string, Promise<Table>>();
  private readonly syncs = new Map<string, DatasetSync>();
  private pinnedBase: { version: number; table: Promise<Table> } | null = null;
  /** Connections to folders of `side` datasets. */
  private readonly sideConns = new Map<string, Promise<lancedb.Connection>>();
  /** The log id of the last listing (noteLogId); null before one. */
  private logId: string | null = null;
  /** The id ensureLogId found or put (no need to list again until the id changes); null before. */
  private ensuredLogId: string | null = null;
  /** The log id each generation this process made was made in (what ensureLogId gave then). */
  private readonly madeIn = new Map<string, string>();
  /**
   * Lance's caches for this log's connections, bounded. Lance's defaults (6 GiB of index pages,
   * 1 GiB of file metadata, per connection) let a process that pages through a large log keep
   * most of its item_id index pages (docs/design/performance.md, "Memory of whole-log reads").
   */
  private readonly session = new lancedb.Session(BigInt(INDEX_CACHE_BYTES), BigInt(METADATA_CACHE_BYTES));

  /** `logUri` is the experiment's `.../log.lance`. */
  constructor(
    readonly logUri: string,
    private readonly storageOptions: Record<string, string> | undefined,
    private readonly objects: ObjectStore,
    private readonly wrap: TableWrapper = (t) => t,
    private readonly wrapSync: SyncWrapper = (_name, run) => run(),
  ) {}

  private createOptions() {
    return { mode: 'create', existOk: true, storageOptions: { new_table_data_storage_version: dataStorageVersion(this.logUri) } } as const;
  }

  private parentUri(): { dir: string; name: string } {
    const i = this.logUri.lastIndexOf('/');
    return { dir: this.logUri.slice(0, i), name: this.logUri.slice(i + 1).replace(/\.lance$/, '') };
  }

  private connect(uri: string, strong = true): Promise<lancedb.Connection> {
    return lancedb.connect(uri, {
      ...(strong ? { readConsistencyInterval: 0 } : {}),
      storageOptions: this.storageOptions,
      session: this.session,
    });
  }

  // Each connection is made only once something of it is known to exist: connecting to a local
  // folder creates it, and reads must not write.
  private baseConnection(): Promise<lancedb.Connection> {
    if (!this.baseConn) {
      const c = (this.baseConn = this.connect(this.parentUri().dir));
      c.catch(() => this.baseConn === c && (this.baseConn = null)); // a failed connect is tried again
    }
    return this.baseConn;
  }

  private shardConnection(): Promise<lancedb.Connection> {
    if (!this.shardConn) {
      const c = (this.shardConn = this.connect(`${this.logUri}/${SHARDS_DIR}`));
      c.catch(() => this.shardConn === c && (this.shardConn = null));
    }
    return this.shardConn;
  }

  /**
   * The base table, or null while it does not exist. `exists` comes from the meta listing the
   * caller just made (the `base` marker), so a read of a new experiment costs no extra request
   * and creates nothing (connecting creates folders).
   */
  async base(exists: boolean): Promise<Table | null> {
    if (!this.baseTable) {
      if (!exists) return null;
      this.baseTable = this.baseConnection().then(async (c) => this.wrap(await c.openTable(this.parentUri().name), 'base'));
      this.baseTable.catch(() => (this.baseTable = null));
    }
    return this.baseTable;
  }

  /**
   * The base pinned at `version` (a read that queries it more than once sees one state). The
   * last one is kept: consecutive reads usually ask for the same version.
   */
  async baseAt(version: number): Promise<Table> {
    if (this.pinnedBase?.version !== version) {
      const t = this.baseConnection().then(async (c) => {
        const table = this.wrap(await c.openTable(this.parentUri().name), 'base');
        await table.checkout(version);
        return table;
      });
      const entry = { version, table: t };
      t.catch(() => this.pinnedBase === entry && (this.pinnedBase = null));
      this.pinnedBase = entry;
    }
    return this.pinnedBase.table;
  }

  /** The base checked out at Lance tag `tag`, on a handle of its own (a snapshot's base: lib/log/snapshot/). */
  async baseAtTag(tag: string): Promise<Table> {
    const t = this.wrap(await (await this.baseConnection()).openTable(this.parentUri().name), 'base');
    await t.checkout(tag);
    return t;
  }

  /**
   * A dataset of the log's own beside the base and the shards, in folder `dir` below log.lance (a
   * snapshot's tail: lib/log/snapshot/): opened, or created empty with the log's schema and format.
   */
  async side(dir: string, name: string, o: { create: boolean }): Promise<Table> {
    let c = this.sideConns.get(dir);
    if (!c) {
      const made = (c = this.connect(`${this.logUri}/${dir}`));
      made.catch(() => this.sideConns.get(dir) === made && this.sideConns.delete(dir));
      this.sideConns.set(dir, made);
    }
    const conn = await c;
    return this.wrap(o.create ? await conn.createEmptyTable(name, EVENT_SCHEMA, this.createOptions()) : await conn.openTable(name), name);
  }

  /** Open or create the base table (race-safe: existOk), then mark that it exists. */
  async ensureBase(): Promise<Table> {
    if (this.baseTable) {
      const t = await this.baseTable.catch(() => null);
      if (t) return t;
    }
    const conn = await this.baseConnection();
    const t = this.wrap(await conn.createEmptyTable(this.parentUri().name, EVENT_SCHEMA, this.createOptions()), 'base');
    await this.ensureLogId();
    await this.objects.putIfAbsent(BASE_KEY, '');
    this.baseTable = Promise.resolve(t);
    return t;
  }

  /**
   * Create a generation this process will write, and give the handle its commits go through.
   * Reads of it open their own, read-consistent handle (`shard`): a handle without read
   * consistency serves the dataset it last committed or opened, and during an add that may be the
   * one before a commit already in storage, so visible to another process's read that ended before
   * this one began (I3; test/own-handle.test.ts emulates that window).
   */
  async createShard(name: string): Promise<Table> {
    if (!this.ownShardConn) {
      const c = (this.ownShardConn = this.connect(`${this.logUri}/${SHARDS_DIR}`, false));
      c.catch(() => this.ownShardConn === c && (this.ownShardConn = null));
    }
    const conn = await this.ownShardConn;
    let t: Table;
    let logId: string;
    try {
      t = this.wrap(await conn.createEmptyTable(name, EVENT_SCHEMA, this.createOptions()), name);
      // Durable before its marker (local roots; a no-op on S3): a power cut that kept the marker
      // but not the dataset's first manifest would list a generation no read can open, in an
      // epoch whose next writer seals it at a version the dataset lacks.
      await this.sync(name);
      logId = await this.ensureLogId(); // its failure, too, comes before the marker PUT was sent
    } catch (e) {
      if (typeof e === 'object' && e !== null) beforeMarker.add(e);
      throw e;
    }
    // The marker makes the generation visible to readers; nothing is committed to it before.
    // Sent once: a resent copy landing after the generation's retirement would bring its marker
    // back over a deleted dataset (docs/design/shards.md, "Merge (own generation)").
    await this.objects.putIfAbsent(genKey(name), '', { once: guard('gen-marker-sent-once') });
    this.madeIn.set(name, logId);
    return t;
  }

  /**
   * The log id generation `name` was made in by this process (undefined: not made here). A
   * listing that shows another id is of another log, whose generation of that name is not this
   * process's (a log made again with its lease records gone reuses the names).
   */
  madeInLog(name: string): string | undefined {
    return this.madeIn.get(name);
  }

  /** A shard generation at its latest version. */
  shard(name: string): Promise<Table> {
    let t = this.latest.get(name);
    if (!t) {
      t = this.shardConnection().then(async (c) => this.wrap(await c.openTable(name), name));
      t.catch(() => this.latest.delete(name));
      this.latest.set(name, t);
    }
    return t;
  }

  /** A shard generation pinned at `version` (immutable, cached for the process lifetime). */
  shardAt(name: string, version: number): Promise<Table> {
    const key = `${name}@${version}`;
    let t = this.pinned.get(key);
    if (!t) {
      t = this.shardConnection()
       .then(async (c) => this.wrap(await c.openTable(name), name))
        .then(async (table) => {
          await table.checkout(version);
          return table;
        });
      t.catch(() => this.pinned.delete(key));
      this.pinned.set(key, t);
    }
    return t;
  }

  /**
   * Make the commits made so far to `name` (a shard generation, or `base`) survive power loss:
   * fsync what they wrote (lib/storage/dataset-sync.ts). Object stores (s3://) are durable once
   * a commit returns: nothing to do there.
   */
  async sync(name: string, dir: string = SHARDS_DIR): Promise<void> {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(this.logUri)) return;
    const key = dir === SHARDS_DIR ? name : `${dir}/${name}`;
    let s = this.syncs.get(key);
    if (!s) {
      s = name === 'base' ? new DatasetSync(this.logUri, new Set(['_dgcl'])) : new DatasetSync(`${this.logUri}/${dir}/${name}.lance`);
      this.syncs.set(key, s);
    }
    const dataset = s;
    await this.wrapSync(name, () => dataset.sync());
  }

  /**
   * The log id a fresh listing shows (lib/log/layout.ts `logIdKey`). Another one than the last
   * means the log was deleted and made again at this place: its base versions are numbered from
   * the start again, and a handle pinned at a version number would read the old log's rows (from
   * Lance's caches, without an error); so are its generations when the lease records
   * went too. So every handle is dropped; true when the id changed (the caller drops
   * what it keeps by generation name too).
   */
  noteLogId(id: string): boolean {
    const changed = this.logId !== null && this.logId !== id;
    if (changed) {
      this.ensuredLogId = null;
      this.forgetBase();
      this.latest.clear();
      this.pinned.clear();
      this.syncs.clear(); // what it fsynced is remembered by path, and the new log reuses the paths
      // madeIn stays: its ids are never '' and none is this log's, so nothing of it matches now.
    }
    this.logId = id;
    return changed;
  }

  /**
   * Put the log's id if it has none, before the first marker this process puts (a generation's,
   * the base's): one LIST per process at most (none once a listing showed an id), a PUT for a
   * log's first writer (several when writers race: the smallest counts, so the id returned may
   * not be the log's: then nothing is taken for this log's that is not).
   */
  private async ensureLogId(): Promise<string> {
    if (this.logId) return this.logId;
    if (this.ensuredLogId !== null) return this.ensuredLogId;
    let id = parseMetaNames(await this.objects.list(META_DIR)).logId;
    if (id === '') {
      id = randomBytes(8).toString('hex');
      await this.objects.putIfAbsent(logIdKey(id), '');
    }
    // Listings alone set logId: one that shows this id for the first time drops nothing kept of
    // this log but the base's handles (an id that appears is a change from none).
    this.ensuredLogId = id;
    return id;
  }

  /** Forget the base's handles (a read through them failed: the next one opens them again). */
  forgetBase(): void {
    this.baseTable = null;
    this.pinnedBase = null;
  }

  /** Forget a shard (retired and deleted, sealed, or no longer this process's): its handles, and that it was made here. */
  forget(name: string): void {
    this.forgetHandles(name);
    this.madeIn.delete(name);
  }

  /** Forget a shard's handles (a read through them failed or raced a change: the next opens them again). */
  forgetHandles(name: string): void {
    this.latest.delete(name);
    this.syncs.delete(name);
    for (const k of [...this.pinned.keys()]) if (k.startsWith(`${name}@`)) this.pinned.delete(k);
  }

  close(): void {
    this.latest.clear();
    this.pinned.clear();
    this.baseTable = null;
    this.pinnedBase = null;
    this.baseConn = null;
    this.shardConn = null;
    this.ownShardConn = null;
    this.sideConns.clear();
  }
}

const beforeMarker = new WeakSet<object>();

/**
 * True for an error of `createShard` thrown before its marker PUT was sent: that generation's
 * marker can never appear (its dataset, unlisted, is swept once the epoch is sealed).
 */
export function failedBeforeMarker(e: unknown): boolean {
  return typeof e === 'object' && e !== null && beforeMarker.has(e);
}

/** Single-quoted SQL string literal for Lance filters. */
export function sqlString(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

export function sqlIn(column: string, values: readonly string[]): string {
  return `${column} IN (${values.map(sqlString).join(', ')})`;
}
