/**
 * `CheckpointLog` over the Lance log store, the public interface's implementation and nothing
 * more: reads go to the log's read side (lib/log/reads.ts), appends and deletes to the process's
 * shard writer (created on the first append), `maintain()` to the elected maintainer's pass.
 */
import type { CheckpointLog, DeleteOptions, DeleteResult, FailureQuery, ForkOptions, ForkResult, FailureSummary, ItemPage, LogStats, MaintainOptions, MaintenanceReport, RehomeReport, SearchHit, SearchOptions, SnapshotInfo, SnapshotResult } from '../api.ts';
import { parseBatches } from '../batch.ts';
import { CorruptError, InternalError, InvalidInputError, LogNotFoundError, NotFoundError, PermissionDeniedError } from '../errors.ts';
import type { LeaseStore } from '../lease/types.ts';
import type { ObjectStore } from '../storage/objects.ts';
import { item, type DurableItem, type ItemOptions } from '../steps.ts';
import type { Ack, FieldsQuery, ItemFields, ItemQuery, ItemState, LatestEventsQuery, ReadEvent, TrajectoryEvent } from '../types.ts';
import { checkDeleteOptions } from './write/delete-guard.ts';
import { checkItemId } from './read/item-reads.ts';
import { emptyMaintenanceReport, maintain } from './maintain/maintain.ts';
import { logExistsAt } from './read/missing.ts';
import { permissionOf } from './read/damage.ts';
import { coordTableOf, type CoordPreference } from '../coord/choose.ts';
import { rehome, type RehomeMode, type RehomeRecords } from './admin/rehome.ts';
import { CoordHolder, type LeaseScope } from './write/coord-holder.ts';
import type { CoordStore } from '../coord/types.ts';
import { attachReads, LogReads } from './reads.ts';
import { itemKey } from './layout.ts';
import { LanceTables, type SyncWrapper, type TableWrapper } from './tables.ts';
import { ShardWriter, type WriterOptions } from './write/writer.ts';

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
  /**
   * Tests only (the simulation): how long a repair keeps the old scope's leases held after its
   * switch; default the longest lease ttl (lib/log/admin/rehome.ts). A short one lets a test reach
   * a process of the old records taking one of them once they ran out.
   */
  repairLeaseHoldMs?: number;
  /** Makes a fork of this log (lib/fork.ts; `openLog` gives it: it opens logs beside this one). */
  fork?: (options: ForkOptions) => Promise<ForkResult>;
}

/** After a refused read of the coordination store, point reads go without the marker check this long before they ask again. */
const MARKER_RECHECK_MS = 60_000;

export class LanceCheckpointLog implements CheckpointLog {
  readonly uri: string;
  private readonly tables: LanceTables;
  private readonly reads: LogReads;
  private writer: ShardWriter | null = null;
  private closed = false;
  private closing: Promise<void> | null = null;
  /** The log's coordination store (item markers, claims). */
  private readonly coordination: CoordHolder;
  /** Until when (the log's clock) the log's coordination store is out of this process's reach (itemMarker); Infinity: for good. */
  private markersOutOfReachUntil = -Infinity;
  /** maintain() calls still running: close() waits for them before it releases what they use. */
  private readonly running = new Set<Promise<unknown>>();

  constructor(private readonly o: LanceLogOptions) {
    this.uri = o.uri;
    this.tables = new LanceTables(o.uri, o.storageOptions, o.objects, o.wrapTable, o.wrapSync);
    this.coordination = new CoordHolder(o);
    this.reads = new LogReads({
      uri: o.uri,
      pipeline: o.pipeline,
      experiment: o.experiment,
      objects: o.objects,
      tables: this.tables,
      leases: o.leases,
      clock: o.clock,
      owner: o.owner,
      leaseTtlMs: o.leaseTtlMs,
      ownItemRows: (gen, items) => this.writer?.ownItemRows(gen, items) ?? null,
      missingLog: () => this.missingLog(),
      itemMarker: (itemId) => this.itemMarker(itemId),
    });
    attachReads(this, this.reads);
  }

  /**
   * An item's marker, for point reads (lib/log/read/reader.ts `markerHeld`); undefined when this
   * log object cannot read the log's coordination store (no lease table, or another one, for a
   * log whose records are in one; a lease table that does not exist; credentials that may not
   * read it; a copied log): its point reads go without the check (docs/design/invariants.md,
   * "Reads"). Never creates the store's record.
   */
  private async itemMarker(itemId: string): Promise<string | null | undefined> {
    if (this.o.clock.nowMs() < this.markersOutOfReachUntil) return undefined;
    try {
      return await (await this.coordination.get({ create: false })).get(itemKey(itemId));
    } catch (e) {
      // For good: no lease table, or another one, for a log whose records are in one.
      if (e instanceof InvalidInputError) this.markersOutOfReachUntil = Infinity;
      // A refusal (a policy, a key, a condition) may be lifted, or may have been of one key
      // only: ask again after a while.
      else if (e instanceof PermissionDeniedError) this.markersOutOfReachUntil = this.o.clock.nowMs() + MARKER_RECHECK_MS;
      // No check this time: a copied log's records (CORRUPT; may also be a repair switching them
      // under this read), or a lease table that does not exist (NOT_FOUND, never the item's).
      // Anything else fails the read.
      else if (!(e instanceof CorruptError || e instanceof NotFoundError)) throw e;
      return undefined;
    }
  }

  private missingLog(): Promise<LogNotFoundError> {
    return this.o.missingLog?.() ?? Promise.resolve(new LogNotFoundError(`no log at ${this.uri}`, this.uri));
  }

  private ctx() {
    return {
      tables: this.tables,
      objects: this.o.objects,
      reader: this.reads.reader,
      leases: this.o.leases,
      coord: (o?: { create: boolean }) => this.coordination.get(o),
      leaseScope: (o: { create: boolean }) => this.coordination.leaseScope(o),
      coordUnchanged: (scope: LeaseScope) => this.coordination.unchanged(scope),
      checkBase: () => this.reads.baseReadable(),
    };
  }

  private getWriter(): ShardWriter {
    // A log closed before it ever wrote has no writer: one made now would take a slot and keep
    // renewing its lease for a log nobody closes again.
    if (this.closed) throw new InternalError('the log is closed: open it again to write');
    this.writer ??= new ShardWriter(this.ctx(), this.o);
    return this.writer;
  }

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

  /** An item driven by durable steps (lib/steps.ts). */
  item(itemId: string, options: ItemOptions): Promise<DurableItem> {
    return item(this, itemId, options);
  }

  fold(itemId: string): Promise<ItemState> {
    return this.reads.fold(itemId);
  }

  fields(itemId: string, query?: FieldsQuery): Promise<ItemFields> {
    return this.reads.fields(itemId, query);
  }

  latestEvents(itemId: string, query: LatestEventsQuery): Promise<ReadEvent[]> {
    return this.reads.latestEvents(itemId, query);
  }

  trajectory(itemId: string): Promise<TrajectoryEvent[]> {
    return this.reads.trajectory(itemId);
  }

  allStates(options?: { fields?: boolean }): Promise<ItemState[]> {
    return this.reads.allStates(options);
  }

  items(query?: ItemQuery): Promise<ItemPage> {
    return this.reads.items(query);
  }

  failures(query?: FailureQuery): Promise<FailureSummary[]> {
    return this.reads.failures(query);
  }

  search(text: string, options?: SearchOptions): Promise<SearchHit[]> {
    return this.reads.search(text, options);
  }

  snapshot(name: string): Promise<SnapshotResult> {
    return this.reads.snapshot(name);
  }

  snapshots(): Promise<SnapshotInfo[]> {
    return this.reads.snapshots();
  }

  dropSnapshot(name: string): Promise<void> {
    return this.reads.dropSnapshot(name);
  }

  fork(options: ForkOptions): Promise<ForkResult> {
    if (this.closed) return Promise.reject(new InternalError('the log is closed: open it again to fork it'));
    if (!this.o.fork) return Promise.reject(new InternalError('this log cannot fork: open it with openLog'));
    return this.o.fork(options);
  }

  blob(itemId: string, field: string): Promise<Uint8Array> {
    return this.reads.blob(itemId, field);
  }

  loadBlob(eventId: string): Promise<Uint8Array> {
    return this.reads.loadBlob(eventId);
  }

  stats(): Promise<LogStats> {
    return this.reads.stats();
  }

  async mergeOwnShard(): Promise<{ mergedRows: number; shards: string[] }> {
    if (this.closed) throw new InternalError('the log is closed: open it again to merge');
    if (!this.writer) return { mergedRows: 0, shards: [] };
    return this.writer.mergeOwn();
  }

  async idle(): Promise<void> {
    await this.writer?.idle();
  }

  repair(): Promise<RehomeReport> {
    return this.rehomeAs('repair');
  }

  adopt(): Promise<RehomeReport> {
    return this.rehomeAs('adopt');
  }

  /** A copy's records (lib/log/admin/copy.ts), made before anything else writes it; `known`: from what the copy wrote, else from its events. */
  initRecords(known?: RehomeRecords): Promise<RehomeReport> {
    return this.rehomeAs('init', known);
  }

  private async rehomeAs(mode: RehomeMode, known?: RehomeRecords): Promise<RehomeReport> {
    if (this.closed) throw new InternalError('the log is closed: open it again');
    // Its own slot would be one of those the repair waits for.
    if (this.writer) throw new InvalidInputError(`${mode} needs a log object that has not written: open the log again for it`, { field: 'log' });
    const run = (async () => {
      if (!(await logExistsAt(this.o.objects))) throw await this.missingLog();
      const report = await rehome(
        {
          ...this.ctx(),
          coordTable: coordTableOf(this.o.leases),
          pipeline: this.o.pipeline,
          experiment: this.o.experiment,
          owner: this.o.owner,
          clock: this.o.clock,
          leaseTtlMs: this.o.leaseTtlMs,
          claimRetentionMs: this.o.claimRetentionMs,
          ...(this.o.repairLeaseHoldMs !== undefined ? { retiredLeaseTtlMs: this.o.repairLeaseHoldMs } : {}),
        },
        mode,
        known,
      );
      await this.coordination.forget(); // what it kept of the old records
      return report;
    })();
    this.running.add(run);
    try {
      return await run;
    } finally {
      this.running.delete(run);
    }
  }

  async maintain(options: MaintainOptions = {}): Promise<MaintenanceReport> {
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
    this.reads.stop();
    // Failing, the writer keeps its ended epoch to seal and its lease to release; the stores stay
    // open for the retry (released after a close that succeeds).
    await this.writer?.close();
    // A maintenance run ends first (it may be compacting): closing its stores under it would
    // fail it halfway, and its first use of the coordination store after the release below
    // would open one nobody closes.
    await Promise.allSettled([...this.running]);
    // Reads started before close() end first, whole, on open tables (they would reopen them);
    // none can start now (stop() refuses them), so this ends.
    await this.reads.close();
    this.tables.close();
    await this.coordination.release();
    await this.o.onClose?.();
  }
}
