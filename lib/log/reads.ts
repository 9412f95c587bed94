/**
 * The read side of one experiment's log: every read of the public API (lib/log/log.ts hands
 * them here), the item listings (lib/log/read/listing.ts), the report and the export (which
 * reach it from the public log through `readsOf`). It owns the union reader and the listing
 * projection's cache, and counts the reads running, so that the log's close() waits for them
 * whole before it closes what they read.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { CheckpointLog, FailureQuery, FailureSummary, ItemPage, LogStats, SearchHit, SearchOptions, SnapshotInfo, SnapshotResult } from '../api.ts';
import { dropSnapshot, listSnapshots, openSnapshot, type SnapshotContext } from './snapshot/catalog.ts';
import { createSnapshot } from './snapshot/create.ts';
import type { SnapshotView } from './snapshot/view.ts';
import { searchLog } from './read/search.ts';
import type { Clock } from '../clock.ts';
import { InternalError, InvalidInputError, NotFoundError, type LogNotFoundError } from '../errors.ts';
import { foldItem, trajectory } from '../fold.ts';
import type { LeaseStore } from '../lease/types.ts';
import { LIGHT_COLUMNS, SUMMARY_COLUMNS } from '../schema.ts';
import type { ObjectStore } from '../storage/objects.ts';
import type { BlobRef, EventRow, FieldsQuery, ItemFields, ItemQuery, ItemState, LatestEventsQuery, ReadEvent, TrajectoryEvent } from '../types.ts';
import { projectedAggregates, projectedItemRows, ProjectionCache, walkProjected } from './projection/projection.ts';
import { loadBlobOf } from './read/blob-read.ts';
import { checkItemId, readFields, readLatestEvents } from './read/item-reads.ts';
import { listItems, pageVisitor, type ListingSource } from './read/listing.ts';
import { LineageLookup } from './read/lineage.ts';
import { selectedFailures } from './read/selected.ts';
import { listingShowsLog } from './read/missing.ts';
import { LogReader, type OwnItemRows } from './read/reader.ts';
import { statsOf } from './read/stats.ts';
import { rowCollector, scanEvents, type EventVisitor, type ScanOptions } from './read/stream.ts';
import { failureOf, SUMMARY_SCAN_COLUMNS, SummaryVisitor, type ItemAggregate } from './read/summary.ts';
import { sqlString, type LanceTables } from './tables.ts';

export interface LogReadsOptions {
  uri: string;
  pipeline: string;
  experiment: string;
  objects: ObjectStore;
  /** The log's Lance handles, shared with its writer and maintenance (the log closes them). */
  tables: LanceTables;
  /** Asked by stats() who holds the writer slots; a snapshot takes the maintainer lease. */
  leases: LeaseStore;
  clock: Clock;
  /** The process's owner id and lease ttl (a snapshot takes the maintainer lease as `<owner>/snapshot`). */
  owner: string;
  leaseTtlMs: number;
  /** What this process's writer keeps of its own generations (lib/log/read/reader.ts). */
  ownItemRows: OwnItemRows;
  /** The error of a public read of this log while it does not exist. */
  missingLog: () => Promise<LogNotFoundError>;
  /** An item's marker in the log's coordination store (null: none; undefined: out of this process's reach), checked by point reads (LogReader.read). */
  itemMarker: (itemId: string) => Promise<string | null | undefined>;
}

/** The reads whose public read is running (track: a read inside another is part of it). */
const inRead = new AsyncLocalStorage<LogReads>();

export class LogReads implements ListingSource {
  readonly uri: string;
  readonly reader: LogReader;
  private readonly projection: ProjectionCache;
  /** The lineage of a fork's items (lib/log/read/lineage.ts). */
  readonly lineage: LineageLookup;
  /** Set by stop(): public reads are refused from then on. */
  private stopped = false;
  /** Public reads still running (track): close() waits for them. */
  private readonly calls = new Set<Promise<unknown>>();
  /** Set once the base was found readable before the first append (baseReadable). */
  private baseChecked: Promise<void> | null = null;

  constructor(private readonly o: LogReadsOptions) {
    this.uri = o.uri;
    this.projection = new ProjectionCache(o.objects);
    this.lineage = new LineageLookup(o.objects);
    this.reader = new LogReader(
      o.objects,
      o.tables,
      o.clock,
      (base, itemId) => projectedItemRows(this.projection, base, itemId),
      o.ownItemRows,
      // Public reads of a log that does not exist fail (a misspelt name must not read as an empty
      // log); the writer's own reads of a log it is creating do not.
      async (listing) => {
        if (inRead.getStore() === this && !listingShowsLog(listing)) throw await o.missingLog();
      },
      o.itemMarker,
    );
  }

  /**
   * A public read: refused once stop() was called, else counted until it ends, so that close()
   * waits for it whole (every read it makes, on open tables). A read made from inside another
   * (blob() folds, then loads) is part of that one.
   */
  private track<T>(fn: () => Promise<T>): Promise<T> {
    if (inRead.getStore() === this) return fn();
    if (this.stopped) return Promise.reject(new InternalError('the log is closed: open it again to read'));
    const call = inRead.run(this, fn);
    this.calls.add(call);
    const done = () => this.calls.delete(call);
    call.then(done, done);
    return call;
  }

  /**
   * Before this log's first commit (the writer's loop calls it before each group; once it held,
   * at no cost): its base opens and its metadata reads, in a consistent read (damage is CORRUPT
   * there, lib/log/read/damage.ts). An append to a log whose base cannot be read is refused before
   * anything is written, instead of acking into a shard no merge can take. Its damage probe only
   * opens the datasets, as the check does: a scan of the log would hold the writer's loop. Not
   * part of a public read that queued the append (a missing log is the write's to make).
   */
  baseReadable(): Promise<void> {
    return inRead.exit(() => {
      this.baseChecked ??= this.reader
        .read(
          async (listing) => {
            await (await this.o.tables.base(listing.baseExists))?.countRows();
          },
          undefined,
          'open',
        )
        .catch((e: unknown) => {
          this.baseChecked = null;
          throw e;
        });
      return this.baseChecked;
    });
  }

  private async itemRows(itemId: string, columns: readonly string[] = LIGHT_COLUMNS): Promise<EventRow[]> {
    // Well-formed: the base gets the id through SQL (a lone surrogate becomes U+FFFD there),
    // a shard through its item index (compared as is), so they would read different items.
    checkItemId(itemId);
    return this.reader.scan(`item_id = ${sqlString(itemId)}`, columns, undefined, { items: [itemId] }, itemId);
  }

  fold(itemId: string): Promise<ItemState> {
    return this.track(async () => foldItem(itemId, await this.itemRows(itemId)));
  }

  /** Selected fields of an item (by name or prefix), from their own events only (docs/api.md). */
  fields(itemId: string, query: FieldsQuery = {}): Promise<ItemFields> {
    return this.track(() => readFields(this, itemId, query));
  }

  /** The item's newest events, oldest first, without reading older ones' values (docs/api.md). */
  latestEvents(itemId: string, query: LatestEventsQuery): Promise<ReadEvent[]> {
    return this.track(() => readLatestEvents(this, itemId, query));
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
    return this.track(async () => {
      const withFields = options.fields !== false;
      // Streamed: the unmerged tail is read with each item at one moment (lib/log/read/tail-cut.ts).
      let rows: EventRow[] = [];
      await this.scanEvents({ columns: withFields ? LIGHT_COLUMNS : SUMMARY_COLUMNS, filter: null }, () => rowCollector((rows = [])));
      const byItem = new Map<string, EventRow[]>();
      for (const r of rows) {
        let list = byItem.get(r.item_id);
        if (!list) byItem.set(r.item_id, (list = []));
        list.push(r);
      }
      return [...byItem.keys()].sort().map((id) => foldItem(id, byItem.get(id)!, { fields: withFields }));
    });
  }

  /** Items filtered by status, lineage and query tags, paged (lib/log/read/listing.ts, docs/api.md). */
  items(q: ItemQuery = {}): Promise<ItemPage> {
    return this.track(async () => {
      const page = await listItems(this, q);
      const lineage = await this.lineage.of(this, page.items.map((i) => i.itemId));
      if (lineage.size === 0) return page;
      return { ...page, items: page.items.map((i) => (lineage.has(i.itemId) ? { ...i, forkedFrom: lineage.get(i.itemId)! } : i)) };
    });
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
    return { uri: o.uri, pipeline: o.pipeline, experiment: o.experiment, owner: o.owner, leaseTtlMs: o.leaseTtlMs, tables: o.tables, objects: o.objects, reader: this.reader, leases: o.leases, clock: o.clock, track: (fn) => this.track(fn) };
  }

  /** Full-text search over the log's text (lib/log/read/search.ts, docs/api.md "Search"). */
  search(text: string, options?: SearchOptions): Promise<SearchHit[]> {
    return this.track(() => searchLog({ reader: this.reader, tables: this.o.tables }, text, options));
  }

  failures(q: FailureQuery = {}): Promise<FailureSummary[]> {
    if (q?.where !== undefined) return this.track(() => selectedFailures(this, q.where));
    return this.track(async () => {
      // Through the projection a walk holds only the failures (and a chunk per fragment).
      const walked = await walkProjected(this.reader, this.o.tables, this.projection, undefined, () => {
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
    return this.track(() => walkProjected(this.reader, this.o.tables, this.projection, q.after, () => pageVisitor(q)));
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
    return this.track(() => projectedAggregates(this.reader, this.o.tables, this.projection));
  }

  /**
   * Stream every visible event (each once) matching `o.filter` as Arrow batches of `o.columns`
   * to a visitor; a read that starts over makes a fresh visitor (lib/log/read/stream.ts).
   */
  scanEvents<T>(o: ScanOptions, make: () => EventVisitor<T>): Promise<T> {
    return this.track(() => scanEvents(this.reader, this.o.tables, o, make));
  }

  blob(itemId: string, field: string): Promise<Uint8Array> {
    return this.track(async () => {
      const state = await this.fold(itemId);
      if (!(field in state.fields)) throw new NotFoundError(`item ${JSON.stringify(itemId)} has no field ${JSON.stringify(field)}`);
      const v = state.fields[field];
      const ref = v && typeof v === 'object' && !Array.isArray(v) ? (v as Partial<BlobRef>).$blobRef : undefined;
      if (!ref || typeof ref.eventId !== 'string') {
        throw new InvalidInputError(`field ${JSON.stringify(field)} of item ${JSON.stringify(itemId)} is not a blob`, { field: 'field' });
      }
      return this.loadBlob(ref.eventId);
    });
  }

  /** A blob's bytes by its event id (lib/log/read/blob-read.ts). */
  loadBlob(eventId: string): Promise<Uint8Array> {
    return this.track(() => loadBlobOf({ reader: this.reader, tables: this.o.tables, uri: this.uri }, eventId));
  }

  stats(): Promise<LogStats> {
    // A consistent read: a generation retired under it makes it start over.
    const { uri, pipeline, experiment, tables, leases, clock, objects } = this.o;
    const c = { uri, pipeline, experiment, tables, reader: this.reader, leases, clock, objects };
    return this.track(() => this.reader.read((listing) => statsOf(c, listing)));
  }

  /** Refuse public reads from now on (those running go on: close() waits for them). */
  stop(): void {
    this.stopped = true;
  }

  /**
   * Wait for the public reads still running (none can start: call stop() first), then drop what
   * the reader and the projection cache keep; the log closes the tables after.
   */
  async close(): Promise<void> {
    this.stopped = true;
    await Promise.allSettled([...this.calls]);
    this.reader.close();
    this.projection.clear();
  }
}

/** The read side of each log `openLog` made (lib/log/log.ts attaches it). */
const readsByLog = new WeakMap<CheckpointLog, LogReads>();

export function attachReads(log: CheckpointLog, reads: LogReads): void {
  readsByLog.set(log, reads);
}

/**
 * The read side of a log `openLog` returned: the report and the export read through it (its
 * streaming scans are not part of the public interface). Any other object is refused.
 */
export function readsOf(log: CheckpointLog): LogReads {
  const reads = readsByLog.get(log);
  if (!reads) throw new InvalidInputError('log must be a log returned by openLog', { field: 'log' });
  return reads;
}
