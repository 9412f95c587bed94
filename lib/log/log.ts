/**
 * `CheckpointLog` over the Lance log store: the union reader, the process's shard writer
 * (created on the first append), blob loading, listings and maintenance.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { CheckpointLog, DeleteOptions, DeleteResult, FailureQuery, FailureSummary, ItemPage, LogStats, MaintenanceReport } from '../api.ts';
import { parseBatches } from '../batch.ts';
import { InternalError, InvalidInputError, LogNotFoundError, NotFoundError } from '../errors.ts';
import { foldItem, trajectory } from '../fold.ts';
import type { LeaseStore } from '../lease/types.ts';
import { LIGHT_COLUMNS, SUMMARY_COLUMNS } from '../schema.ts';
import type { ObjectStore } from '../storage/objects.ts';
import { item, type DurableItem, type ItemOptions } from '../steps.ts';
import type { Ack, BlobRef, EventRow, FieldsQuery, ItemFields, ItemQuery, ItemState, LatestEventsQuery, ReadEvent, TrajectoryEvent } from '../types.ts';
import { checkDeleteOptions } from './write/delete-guard.ts';
import { listItems, pageVisitor } from './read/listing.ts';
import { checkItemId, readFields, readLatestEvents, type ItemReadContext } from './read/item-reads.ts';
import { emptyMaintenanceReport, maintain, type MaintainProgress } from './maintain/maintain.ts';
import { listingShowsLog, logExistsAt } from './read/missing.ts';
import { permissionOf } from './read/damage.ts';
import type { CoordPreference } from '../coord/choose.ts';
import { CoordHolder } from './write/coord-holder.ts';
import type { CoordStore } from '../coord/types.ts';
import { LogReader } from './read/reader.ts';
import { statsOf } from './read/stats.ts';
import { loadBlobOf } from './read/blob-read.ts';
import { projectedAggregates, projectedItemRows, ProjectionCache, walkProjected } from './projection/projection.ts';
import { selectedFailures } from './read/selected.ts';
import { scanEvents, type EventVisitor, type ScanOptions } from './read/stream.ts';
import { failureOf, SUMMARY_SCAN_COLUMNS, SummaryVisitor, type ItemAggregate } from './read/summary.ts';
import { LanceTables, sqlString, type SyncWrapper, type TableWrapper } from './tables.ts';
import { ShardWriter, type WriterOptions } from './write/writer.ts';
import type { SnapshotInfo, SnapshotResult } from '../api.ts';
import { dropSnapshot, listSnapshots, openSnapshot, type SnapshotContext } from './snapshot/catalog.ts';
import { createSnapshot } from './snapshot/create.ts';
import type { SnapshotView } from './snapshot/view.ts';

/** The writer's options, plus where the log lives and what maintenance keeps. */
export interface LanceLogOptions extends WriterOptions {
  uri: string;
  objects: ObjectStore;
  storageOptions: Record<string, string> | undefined;
  leases: LeaseStore;
  versionRetentionMs: number;
  deletionRetentionMs: number;
  /** Where a new log keeps its item markers and claims (lib/coord/choose.ts); default 'table'. */
  coordination?: CoordPreference;
  /** Called by close() after the log's own resources (e.g. to close a lease store it owns). */
  onClose?: () => Promise<void>;
  /**
   * The error of a read or maintenance of this log while it does not exist (lib/log/read/missing.ts:
   * it names what exists near it); default: one naming the log's URI alone.
   */
  missingLog?: () => Promise<LogNotFoundError>;
  /**
   * Whether the log's folder exists, whatever it holds (lib/log/read/missing.ts `logFolderExists`);
   * default: whether anything is stored under it.
   */
  logFolderExists?: () => Promise<boolean>;
  /** Wraps every Lance table handle (the simulation harness's fault and scheduling point). */
  wrapTable?: TableWrapper;
  /** Wraps every fsync of a dataset (the simulation harness's scheduling and fault point). */
  wrapSync?: SyncWrapper;
  /** Wraps the log's coordination store (the simulation harness's scheduling and fault point). */
  wrapCoord?: (store: CoordStore) => CoordStore;
}

/** The log whose public read is running (track: a read inside another is part of it). */
const inRead = new AsyncLocalStorage<LanceCheckpointLog>();

export class LanceCheckpointLog implements CheckpointLog {
  readonly uri: string;
  private readonly tables: LanceTables;
  private readonly reader: LogReader;
  private writer: ShardWriter | null = null;
  private closed = false;
  private closing: Promise<void> | null = null;
  /** Set once the base was found readable before the first append (baseReadable). */
  private baseChecked: Promise<void> | null = null;
  private readonly projection: ProjectionCache;
  /** The log's coordination store (item markers, claims). */
  private readonly coordination: CoordHolder;
  /** maintain() calls still running: close() waits for them before it releases what they use. */
  private readonly running = new Set<Promise<unknown>>();
  /** Read calls still running (track): close() waits for them too. */
  private readonly calls = new Set<Promise<unknown>>();

  constructor(private readonly o: LanceLogOptions) {
    this.uri = o.uri;
    this.tables = new LanceTables(o.uri, o.storageOptions, o.objects, o.wrapTable, o.wrapSync);
    this.projection = new ProjectionCache(o.objects);
    this.coordination = new CoordHolder(o);
    this.reader = new LogReader(
      o.objects,
      this.tables,
      o.clock,
      (base, itemId) => projectedItemRows(this.projection, base, itemId),
      (gen, items) => this.writer?.ownItemRows(gen, items) ?? null,
      // Public reads of a log that does not exist fail (a misspelt name must not read as an empty
      // log); the writer's own reads of a log it is creating do not.
      async (listing) => {
        if (inRead.getStore() === this && !listingShowsLog(listing)) throw await this.missingLog();
      },
    );
  }

  private missingLog(): Promise<LogNotFoundError> {
    return this.o.missingLog?.() ?? Promise.resolve(new LogNotFoundError(`no log at ${this.uri}`, this.uri));
  }

  private ctx() {
    return {
      tables: this.tables,
      objects: this.o.objects,
      reader: this.reader,
      leases: this.o.leases,
      coord: (o?: { create: boolean }) => this.coordination.get(o),
      // Not part of a public read that queued the append (a missing log is the write's to make).
      checkBase: () => inRead.exit(() => this.baseReadable()),
    };
  }

  private getWriter(): ShardWriter {
    // A log closed before it ever wrote has no writer: one made now would take a slot and keep
    // renewing its lease for a log nobody closes again.
    if (this.closed) throw new InternalError('the log is closed: open it again to write');
    this.writer ??= new ShardWriter(this.ctx(), this.o);
    return this.writer;
  }

  /** The writer epoch this process writes under, once it has written. */
  get writerEpoch(): string | null {
    return this.writer?.writerEpoch ?? null;
  }

  async append(batches: unknown[]): Promise<Ack[]> {
    const prepared = parseBatches(batches);
    // Queued at once (the base check runs in the writer's loop, before its commit): an append
    // called before close() is served by it, never refused because close() ran meanwhile.
    return this.getWriter()
      .append(prepared)
      .catch((e: unknown) => Promise.reject(permissionOf(e, this.uri) ?? e));
  }

  /**
   * Before this log's first commit (the writer's loop calls it before each group; once it held,
   * at no cost): its base opens and its metadata reads, in a consistent read (damage is CORRUPT
   * there, lib/log/read/damage.ts). An append to a log whose base cannot be read is refused before
   * anything is written, instead of acking into a shard no merge can take. Its damage probe only
   * opens the datasets, as the check does: a scan of the log would hold the writer's loop.
   */
  private baseReadable(): Promise<void> {
    this.baseChecked ??= this.reader
      .read(
        async (listing) => {
          await (await this.tables.base(listing.baseExists))?.countRows();
        },
        undefined,
        'open',
      )
      .catch((e: unknown) => {
        this.baseChecked = null;
        throw e;
      });
    return this.baseChecked;
  }

  /**
   * Delete an item: reads stop showing it at once, maintenance removes its rows physically after
   * `deletionRetentionMs`, and its id can be created again (docs/design/deletion.md). Route it
   * like the item's batches (one writer per item at a time). Without `throughSeq` it deletes
   * whatever the item holds when it runs (a late retry deletes a new incarnation); with it, only
   * the events the caller saw ("Guarded deletes").
   */
  async deleteItem(itemId: string, options?: DeleteOptions): Promise<DeleteResult> {
    // Well-formed: the delete reads the item through SQL too, where a lone surrogate becomes
    // U+FFFD (another item's id); such ids can never have been written (lib/batch.ts).
    checkItemId(itemId);
    // Checked before anything is written, not even the item marker.
    const { throughSeq } = checkDeleteOptions(options);
    return this.getWriter().deleteItem(itemId, throughSeq);
  }

  private async itemRows(itemId: string, columns: readonly string[] = LIGHT_COLUMNS): Promise<EventRow[]> {
    // Well-formed too: the base gets the id through SQL (a lone surrogate becomes U+FFFD there),
    // a shard through its item index (compared as is), so they would read different items.
    checkItemId(itemId);
    return this.reader.scan(`item_id = ${sqlString(itemId)}`, columns, undefined, { items: [itemId] });
  }

  /** An item driven by durable steps (lib/steps.ts). */
  item(itemId: string, options: ItemOptions): Promise<DurableItem> {
    return item(this, itemId, options);
  }

  /**
   * A public read: refused once close() began, else counted until it ends, so that close() waits
   * for it whole (every read it makes, on open tables). A read made
   * from inside another (blob() folds, then loads) is part of that one.
   */
  private track<T>(fn: () => Promise<T>): Promise<T> {
    if (inRead.getStore() === this) return fn();
    if (this.closed) return Promise.reject(new InternalError('the log is closed: open it again to read'));
    const call = inRead.run(this, fn);
    this.calls.add(call);
    const done = () => this.calls.delete(call);
    call.then(done, done);
    return call;
  }

  fold(itemId: string): Promise<ItemState> {
    return this.track(async () => foldItem(itemId, await this.itemRows(itemId)));
  }

  private itemReads(): ItemReadContext {
    return { reader: this.reader };
  }

  /** Selected fields of an item (by name or prefix), from their own events only (docs/api.md). */
  fields(itemId: string, query: FieldsQuery = {}): Promise<ItemFields> {
    return this.track(() => readFields(this.itemReads(), itemId, query));
  }

  /** The item's newest events, oldest first, without reading older ones' values (docs/api.md). */
  latestEvents(itemId: string, query: LatestEventsQuery): Promise<ReadEvent[]> {
    return this.track(() => readLatestEvents(this.itemReads(), itemId, query));
  }

  trajectory(itemId: string): Promise<TrajectoryEvent[]> {
    return this.track(async () => {
      const rows = await this.itemRows(itemId);
      if (rows.length === 0) throw new NotFoundError(`item ${JSON.stringify(itemId)} not found in ${this.uri}`);
      return trajectory(rows);
    });
  }

  /**
   * Every item's state from one scan. `fields: false` reads no value columns and leaves
   * `fields` empty (listings); the default reads everything but blob bytes.
   */
  allStates(options: { fields?: boolean } = {}): Promise<ItemState[]> {
    return this.track(() => this.allStatesUntracked(options));
  }

  private async allStatesUntracked(options: { fields?: boolean }): Promise<ItemState[]> {
    const withFields = options.fields !== false;
    const rows = await this.reader.scan(null, withFields ? LIGHT_COLUMNS : SUMMARY_COLUMNS);
    const byItem = new Map<string, EventRow[]>();
    for (const r of rows) {
      let list = byItem.get(r.item_id);
      if (!list) byItem.set(r.item_id, (list = []));
      list.push(r);
    }
    return [...byItem.keys()].sort().map((id) => foldItem(id, byItem.get(id)!, { fields: withFields }));
  }

  /** Items filtered by status, lineage and query tags, paged (lib/log/read/listing.ts, docs/api.md). */
  items(q: ItemQuery = {}): Promise<ItemPage> {
    return this.track(() => listItems(this, q));
  }

  failures(q: FailureQuery = {}): Promise<FailureSummary[]> {
    if (q?.where !== undefined) return this.track(() => selectedFailures(this, q.where));
    return this.track(async () => {
      // Through the projection a walk holds only the failures (and a chunk per fragment).
      const walked = await walkProjected(this.reader, this.tables, this.projection, undefined, () => {
        const out: FailureSummary[] = [];
        return {
          visit: (a) => {
            const f = failureOf(a);
            if (f) out.push(f);
            return true;
          },
          done: () => out,
        };
      });
      if (walked) return walked;
      const all = await this.scanEvents({ columns: SUMMARY_SCAN_COLUMNS, filter: null, keepTail: true }, () => new SummaryVisitor());
      return all.map(failureOf).filter((f): f is FailureSummary => f !== null);
    });
  }

  /** The page `q` asks for through the projection, or null when none describes the base (lib/log/read/listing.ts). */
  projectedPage(q: ItemQuery): Promise<ItemPage | null> {
    return this.track(() => walkProjected(this.reader, this.tables, this.projection, q.after, () => pageVisitor(q)));
  }

  /**
   * Every item's listing aggregate (lib/log/read/summary.ts): through the projection maintenance keeps
   * when there is no filter and it describes the base, else by one streaming pass over light columns.
   */
  aggregates(filter: string | null = null): Promise<ItemAggregate[]> {
    return this.track(async () => {
      if (filter === null) {
        const projected = await this.projected();
        if (projected) return projected;
      }
      return this.scanEvents({ columns: SUMMARY_SCAN_COLUMNS, filter, keepTail: true }, () => new SummaryVisitor());
    });
  }

  /** Every item's listing aggregate through the projection, or null when none describes the base. */
  projected(): Promise<ItemAggregate[] | null> {
    return this.track(() => projectedAggregates(this.reader, this.tables, this.projection));
  }

  /**
   * Stream every visible event (each once) matching `o.filter` as Arrow batches of `o.columns`
   * to a visitor; a read that starts over makes a fresh visitor (lib/log/read/stream.ts).
   */
  scanEvents<T>(o: ScanOptions, make: () => EventVisitor<T>): Promise<T> {
    return this.track(() => scanEvents(this.reader, this.tables, o, make));
  }

  blob(itemId: string, field: string): Promise<Uint8Array> {
    return this.track(() => this.blobUntracked(itemId, field));
  }

  private async blobUntracked(itemId: string, field: string): Promise<Uint8Array> {
    const state = await this.fold(itemId);
    if (!(field in state.fields)) throw new NotFoundError(`item ${JSON.stringify(itemId)} has no field ${JSON.stringify(field)}`);
    const v = state.fields[field];
    const ref = v && typeof v === 'object' && !Array.isArray(v) ? (v as Partial<BlobRef>).$blobRef : undefined;
    if (!ref || typeof ref.eventId !== 'string') {
      throw new InvalidInputError(`field ${JSON.stringify(field)} of item ${JSON.stringify(itemId)} is not a blob`, { field: 'field' });
    }
    return this.loadBlob(ref.eventId);
  }

  /** A blob's bytes by its event id (lib/log/read/blob-read.ts). */
  loadBlob(eventId: string): Promise<Uint8Array> {
    return this.track(() => loadBlobOf({ reader: this.reader, tables: this.tables, uri: this.uri }, eventId));
  }

  async mergeOwnShard(): Promise<{ mergedRows: number; shards: string[] }> {
    if (this.closed) throw new InternalError('the log is closed: open it again to merge');
    if (!this.writer) return { mergedRows: 0, shards: [] };
    return this.writer.mergeOwn();
  }

  async idle(): Promise<void> {
    await this.writer?.idle();
  }

  /** `onProgress` is told after each step (the CLI's progress bar). */
  async maintain(options: { onProgress?: MaintainProgress } = {}): Promise<MaintenanceReport> {
    if (this.closed) throw new InternalError('the log is closed: open it again to maintain it');
    const run = (async () => {
      // Refused before anything is made (no lease, no folder): maintaining a misspelt log would
      // report a clean pass over nothing. Part of the run: a close() meanwhile waits for it.
      // A log folder whose meta folder shows nothing yet (a first writer that died before its
      // first generation, or is writing it) is no typo: nothing to do, and no error for the
      // scheduled maintenance, which picks experiments by that folder.
      if (!(await logExistsAt(this.o.objects))) {
        const folder = await (this.o.logFolderExists?.() ?? this.o.objects.list('').then((names) => names.length > 0));
        if (!folder) throw await this.missingLog();
        return { ...emptyMaintenanceReport(`${this.o.pipeline}/${this.o.experiment}`), empty: true as const };
      }
      return maintain(this.ctx(), {
        pipeline: this.o.pipeline,
        experiment: this.o.experiment,
        owner: this.o.owner,
        slots: this.o.slots,
        leaseTtlMs: this.o.leaseTtlMs,
        versionRetentionMs: this.o.versionRetentionMs,
        claimRetentionMs: this.o.claimRetentionMs,
        deletionRetentionMs: this.o.deletionRetentionMs,
        clock: this.o.clock,
        ...(this.o.hooks ? { hooks: this.o.hooks } : {}),
        ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      });
    })();
    this.running.add(run);
    try {
      return await run;
    } finally {
      this.running.delete(run);
    }
  }

  stats(): Promise<LogStats> {
    // A consistent read: a generation retired under it makes it start over.
    const c = { uri: this.uri, pipeline: this.o.pipeline, experiment: this.o.experiment, tables: this.tables, reader: this.reader, leases: this.o.leases, clock: this.o.clock };
    return this.track(() => this.reader.read((listing) => statsOf(c, listing)));
  }

  /** Snapshots (lib/log/snapshot/, docs/usage.md "Snapshots"); `openSnapshot` reads one (export, report). */
  snapshot(name: string): Promise<SnapshotResult> {
    return this.track(() => createSnapshot(this.snapshotCtx(), name));
  }
  snapshots(): Promise<SnapshotInfo[]> {
    return this.track(() => listSnapshots(this.snapshotCtx()));
  }
  dropSnapshot(name: string): Promise<void> {
    return this.track(() => dropSnapshot(this.snapshotCtx(), name));
  }
  openSnapshot(name: string, field?: string): Promise<SnapshotView> {
    return this.track(() => openSnapshot(this.snapshotCtx(), name, field));
  }
  private snapshotCtx(): SnapshotContext {
    const o = this.o;
    return { ...o, uri: this.uri, tables: this.tables, objects: o.objects, reader: this.reader, track: (fn) => this.track(fn) };
  }

  /**
   * Serves the appends queued before it, merges this writer's shard and releases its slot; waits
   * for a maintain() and for reads still running; then releases the log's stores. Later calls fail;
   * a close() while one runs gets its promise (a signal handler and the caller may both close). A
   * close() that failed (the writer's seal or its slot's release did not go through) keeps what
   * the writer needs, and close() may be called again to retry it.
   */
  close(): Promise<void> {
    const closing = (this.closing ??= this.closeOnce().catch((e: unknown) => {
      if (this.closing === closing) this.closing = null;
      throw e;
    }));
    return closing;
  }

  private async closeOnce(): Promise<void> {
    this.closed = true;
    // Failing, the writer keeps its ended epoch to seal and its lease to release; the stores stay
    // open for the retry (released after a close that succeeds).
    await this.writer?.close();
    // A maintenance run ends first (it may be compacting): closing its stores under it would
    // fail it halfway, and its first use of the coordination store after the release below
    // would open one nobody closes.
    await Promise.allSettled([...this.running]);
    // Reads started before close() end first, whole, on open tables (they would reopen them);
    // none can start now (track refuses them), so this ends.
    await Promise.allSettled([...this.calls]);
    this.reader.close();
    this.projection.clear();
    this.tables.close();
    await this.coordination.release();
    await this.o.onClose?.();
  }
}
