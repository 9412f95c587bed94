import type { Where } from './select/where.ts';
import type { DurableItem, ItemOptions } from './steps.ts';
import type { Ack, CheckpointBatchInput, Cursor, EventType, Failure, FieldsQuery, ForkedFrom, ItemFields, ItemQuery, ItemState, ItemStatus, LatestEventsQuery, ReadEvent, TrajectoryEvent } from './types.ts';

/** One line of `dgcl items` / a page entry of the `fold` handler's item listing. */
export interface ItemSummary {
  itemId: string;
  status: ItemStatus;
  cursor: Cursor | null;
  lastSeq: number;
  /** Set on an item a fork made (docs/usage.md, "Forking a cohort"). */
  forkedFrom?: ForkedFrom;
}

/** What `fork()` takes. Exactly one of `where` and `itemIds`. */
export interface ForkOptions {
  /** The items this filter selects (docs/usage.md, "Selecting items"). */
  where?: Where;
  /** ... or these items (each must exist). */
  itemIds?: string[];
  /** The step the forked items resume at: a step name, or a step index. */
  fromStep: string | number;
  /** The fork's experiment (same root and pipeline). */
  to: { experiment: string };
  /** Also fork the items whose root or parent item is a selected one. */
  children?: boolean;
}

export interface ForkResult {
  /** The fork's log URI. */
  uri: string;
  /** Items forked (selected, and children). */
  items: number;
  /** Events written: the kept events, and one lineage event per item (0 when `unchanged`). */
  events: number;
  /** Of them, the source's events kept. */
  keptEvents: number;
  /** Their size as handed to Lance (Arrow IPC). */
  bytes: number;
  /** True when the target already held this very fork: nothing was written. */
  unchanged: boolean;
}

export interface ItemPage {
  items: ItemSummary[];
  /** Pass as `after` to get the next page; absent on the last page. */
  next?: string;
}

/** What `failures()` lists. */
export interface FailureQuery {
  /** Only the failed items this filter selects (docs/usage.md, "Selecting items"). Text: `parseWhere`. */
  where?: Where;
}

/** A failed item's last failure, as listed by `dgcl failures`. */
export interface FailureSummary extends Failure {
  itemId: string;
  status: ItemStatus;
}

export interface ShardStats {
  /** e.g. `s03/e000007-g000002` */
  name: string;
  slot: number;
  epoch: number;
  generation: number;
  /** Lance version of the shard dataset (each commit is one durable generation). */
  version: number;
  rows: number;
  sealedAtVersion: number | null;
  retired: boolean;
  /**
   * `live`: its writer holds the slot at its epoch; `abandoned`: unsealed, but its writer is gone
   * (its lease expired or was released, the slot moved on, or its local process died), so only
   * maintenance merges it; `sealed`: its epoch ended (a takeover, or a close whose merge failed),
   * waiting for maintenance; `retired`: merged, being deleted; `unsealed`: no lease store to
   * ask (an s3:// root read without DGCL_LEASE_TABLE).
   */
  state: ShardState;
}

export type ShardState = 'live' | 'abandoned' | 'sealed' | 'retired' | 'unsealed';

/** A shard generation's state in words (`dgcl stats`, the report page). */
export function shardLabel(sh: ShardStats): string {
  switch (sh.state) {
    case 'retired':
      return 'retired (being deleted)';
    case 'sealed':
      return `sealed at v${sh.sealedAtVersion} (its writer ended; maintenance merges it)`;
    case 'abandoned':
      return 'abandoned (its writer is gone; maintenance merges it)';
    case 'unsealed':
      return 'unsealed (no lease store to tell whether its writer is alive)';
    default:
      return 'live';
  }
}

export interface LogStats {
  uri: string;
  base: { version: number; rows: number; fragments: number; indexes: string[] };
  shards: ShardStats[];
  /** What to run when generations of writers that are gone wait to be merged (else null). */
  hint: string | null;
}

/**
 * Options of `deleteItem`. Without `throughSeq` the delete is unguarded: it deletes whatever the
 * item holds when it runs, so a retried or re-delivered delete that arrives after the item was
 * created again deletes the new incarnation. Pass the item's last seq the caller saw (an ack's
 * `lastSeq`, a fold's `lastSeq`) to make retries and duplicate deliveries harmless
 * (docs/design/deletion.md, "Guarded deletes").
 */
export interface DeleteOptions {
  /**
   * Delete only if the item's last visible seq is exactly this: already deleted through it ->
   * `{deleted: false}`; later events -> ConflictError (CONFLICT); a seq the item never had ->
   * InvalidInputError (field `throughSeq`). A positive integer.
   */
  throughSeq?: number;
}

/** What `deleteItem` did. */
export interface DeleteResult {
  itemId: string;
  /**
   * False when the item had no visible event (never created, or already deleted), or, with
   * `throughSeq`, was already deleted through it: no tombstone written.
   */
  deleted: boolean;
  /** The item's events up to this seq are deleted; a new creation continues after it. */
  throughSeq: number;
}

export interface MaintenanceReport {
  experiment: string;
  /** False when another maintainer held the lease (`heldBy`), or the log holds nothing yet (`empty`); nothing was done. */
  ran: boolean;
  heldBy?: string;
  /**
   * Set (with `ran: false`) when the log's folder exists but holds no log yet: a first writer that
   * died before its first generation's marker, or is still writing it. Nothing was done or created;
   * the next pass after the first commit maintains it.
   */
  empty?: true;
  mergedShards: string[];
  mergedRows: number;
  compacted: { fragmentsRemoved: number; fragmentsAdded: number } | null;
  indexes: string[];
  prunedVersions: number;
  deletedClaims: number;
  /** Deleted items whose rows were removed from the base and whose tombstone was dropped. */
  purgedItems: number;
  /**
   * Deleted items still waiting: younger than the retention, with rows in a live writer's shard,
   * or removed from the base less than the retention ago (the tombstone outlasts stalled mergers).
   */
  pendingDeletions: number;
  /** Dataset folders of generations no reader may see (zombie writes, crashed creations), deleted. */
  sweptShards: string[];
  /**
   * Snapshot attempts that died before writing their record (their nonces), whose base tag (which
   * held the version clean-up back) and copied rows this pass deleted.
   */
  sweptSnapshotAttempts: string[];
  /**
   * The item listing projection (docs/design/projection.md) as this pass left it: the base
   * version it describes, the base fragments it counts, and how many rows this pass counted
   * (those of fragments written since the last pass; 0 when it was current). Null when there is
   * no base yet or the step failed.
   */
  projection: { baseVersion: number; fragments: number; countedRows: number } | null;
  /**
   * Steps that failed; the other steps still ran. A failed step is retried by the next run
   * (every step is idempotent). Empty when everything succeeded. The steps a pass skipped
   * because it stopped early (`stoppedBy`) are listed too, with that code and `skipped: true`.
   */
  failures: Array<{ step: MaintenanceStep; code: string; message: string; skipped?: true }>;
  /**
   * Set when the pass stopped before its end: it was paused past its lease's ttl (a frozen
   * container thawed later) and another maintainer took the lease over (`FENCED`), or the lease
   * ran out and the lease store answered neither a renewal nor a read (`UNAVAILABLE`). The lease
   * elects the maintainer; it cannot fence a step already running, which finishes.
   */
  stoppedBy?: 'FENCED' | 'UNAVAILABLE';
}

export type MaintenanceStep = 'orphans' | 'retirements' | 'merge' | 'zombies' | 'deletions' | 'snapshots' | 'compaction' | 'indexes' | 'projection' | 'claims' | 'meta';

/** `done` of `total` steps are over, the last one `step`; `total` grows once the merges are known. */
export type MaintainProgress = (step: MaintenanceStep, done: number, total: number) => void;

/** Options of `maintain`. */
export interface MaintainOptions {
  /** Told after each step (a skipped one too), e.g. to draw a progress bar; never awaited, and what it throws is ignored. */
  onProgress?: MaintainProgress;
}

/** What `search` looks in (docs/api.md, "Search"). */
export interface SearchOptions {
  /** Only events of these fields (value events: failures have no field). */
  fields?: string[];
  /** Only events of these types (text is in FIELD_SET and FIELD_APPEND values, and FAILED errors). */
  eventTypes?: EventType[];
  /** Most events returned, 1-10,000; default 100. */
  limit?: number;
}

/** An event whose text holds every word searched for. */
export interface SearchHit {
  itemId: string;
  seq: number;
  eventType: EventType;
  /** The field of a value event; null for a failure. */
  field: string | null;
  /** The error type of a failure; null for a value event. */
  errorType: string | null;
  /** The text around the first word found, on one line, `…` where it was cut. */
  snippet: string;
}

/** A snapshot: a named state of the log that later reads can go back to (docs/usage.md, "Snapshots"). */
export interface SnapshotInfo {
  name: string;
  /** When it was taken (the taking process's clock). */
  createdAtMs: number;
  /** The base version it reads (kept by a Lance tag); null when the log had no base yet. */
  baseVersion: number | null;
  /** Rows it copied from shard generations that were not merged into the base yet. */
  tailRows: number;
  /** Events it shows (each once; deleted items' events hidden as they were then). */
  events: number;
}

/** What `snapshot(name)` did: `created` false when the name already held this very state. */
export interface SnapshotResult extends SnapshotInfo {
  created: boolean;
}

/**
 * One experiment's log. Obtained from `openLog` (lib/index.ts). Writing takes a writer shard
 * slot lazily on the first append and keeps (renews) it until `close()`.
 */
export interface CheckpointLog {
  readonly uri: string;
  /**
   * The writer epoch this process appends under (`s03-e000007`: slot 3, epoch 7), as
   * trajectory events carry it and `stats()` names shard generations; null while this log holds
   * no writer slot (before its first append or delete, after `close()`).
   */
  readonly writerEpoch: string | null;
  /** Append checkpoint batches; one ack per batch, same order. All-or-nothing per batch. */
  append(batches: CheckpointBatchInput[]): Promise<Ack[]>;
  /**
   * The same with batches of any type (parsed JSON, say): each is checked at run time against
   * `CheckpointBatchInput` (docs/contract.md) before anything is written (INVALID_INPUT naming it).
   */
  append(batches: unknown[]): Promise<Ack[]>;
  fold(itemId: string): Promise<ItemState>;
  /** Open an item for durable steps (lib/steps.ts): `await (await log.item(id, { runId })).step(...)`. */
  item(itemId: string, options: ItemOptions): Promise<DurableItem>;
  /** Items in id order (UTF-8 bytes), filtered by status, lineage, query tags and `where`, paged. */
  items(query?: ItemQuery): Promise<ItemPage>;
  trajectory(itemId: string): Promise<TrajectoryEvent[]>;
  /** Selected fields (by name or prefix) without folding the whole item; small blobs inline on request. */
  fields(itemId: string, query?: FieldsQuery): Promise<ItemFields>;
  /** The newest `limit` events (optionally of some types, before a seq), oldest first. */
  latestEvents(itemId: string, query: LatestEventsQuery): Promise<ReadEvent[]>;
  /** The bytes of a blob field's current value (a `$blobRef`), verified against its checksum. */
  blob(itemId: string, field: string): Promise<Uint8Array>;
  loadBlob(eventId: string): Promise<Uint8Array>;
  /** Every failed item with its last failure; with `where`, those it selects. */
  failures(query?: FailureQuery): Promise<FailureSummary[]>;
  /**
   * Every item's state, sorted by item id (JavaScript string order), from one scan of the log (its memory grows with the
   * experiment: for large logs page with `items()` and fold what you need). `{fields: false}`
   * reads no value columns and leaves each `fields` empty.
   */
  allStates(options?: { fields?: boolean }): Promise<ItemState[]>;
  /**
   * Events whose string values, JSON string values, error dumps or tracebacks hold every word of
   * `text` (any case, whole words), over the whole history, deleted items excepted; at most
   * `limit` (default 100), sorted by item and seq.
   */
  search(text: string, options?: SearchOptions): Promise<SearchHit[]>;
  /**
   * Delete an item: hidden from reads at once, purged by maintenance, its id reusable. Pass
   * `{throughSeq}` (the last seq you saw) so that a retried delete never deletes a newer incarnation.
   */
  deleteItem(itemId: string, options?: DeleteOptions): Promise<DeleteResult>;
  /**
   * Merge this writer's own shard into the base (idempotent, crash-safe). A generation made ahead
   * for the next commits is retired too: until its next append, nothing of this writer is live.
   */
  mergeOwnShard(): Promise<{ mergedRows: number; shards: string[] }>;
  /**
   * Resolves once no merge this writer started in the background (every `mergeEveryCommits`
   * commits), and no retirement of a generation it made ahead and never used, is running. Call
   * it before a process may be frozen with the log open (a Lambda handler returning): a merge
   * frozen between its epoch check and its base commit, and thawed after a takeover and a purge,
   * can put a deleted item's rows back (docs/design/deletion.md, "Stalled mergers").
   */
  idle(): Promise<void>;
  /** Elected-maintainer work: merge orphaned shards, compact, index, clean up. */
  maintain(options?: MaintainOptions): Promise<MaintenanceReport>;
  /**
   * Rebuild everything the log keeps beside its events (item markers, claims, its record in the
   * lease table or its SQLite file, lease epoch counters) from its events, under a new log id
   * (docs/operations.md, "Repairing a log"). Needs the log's writers and maintainers stopped: it
   * takes their leases, waiting up to one lease ttl (LEASE_HELD after). Call it on a log object
   * that has not written. A copy of another log is refused: `adopt()` it.
   */
  repair(): Promise<RehomeReport>;
  /** `repair()` for a log copied or restored by other tools (`aws s3 sync`, `cp -r`, a backup): makes it a log of its own where it lies. */
  adopt(): Promise<RehomeReport>;
  stats(): Promise<LogStats>;
  /**
   * Name the log's current state (every acknowledged event, merged or not): `exportItems` and
   * `report` read it later with `{ snapshot: name }`, whatever was appended, merged, compacted or
   * purged since. A name in use is refused (INVALID_INPUT, field `name`) unless it names this
   * very state (then `created: false`).
   */
  snapshot(name: string): Promise<SnapshotResult>;
  /**
   * A new experiment of this pipeline holding the selected items (and their children with
   * `children`) as they were before their first event of step `fromStep`, with their lineage
   * (docs/usage.md, "Forking a cohort"). The same fork again changes nothing; a target holding
   * anything else is refused (INVALID_INPUT) and nothing is written.
   */
  fork(options: ForkOptions): Promise<ForkResult>;
  /** Every snapshot of the log, by name. */
  snapshots(): Promise<SnapshotInfo[]>;
  /** Delete a snapshot (NOT_FOUND when there is none of that name); its base versions may then be pruned. */
  dropSnapshot(name: string): Promise<void>;
  /** Serve appends queued before it, merge own shard (best effort), release the writer slot, wait for a running maintain() and for reads in flight, close handles. Every later call fails (INTERNAL: the log is closed); a close() that failed (seal or release: UNAVAILABLE) is retried by calling close() again. */
  close(): Promise<void>;
}

/** What `repair()` and `adopt()` did. */
export interface RehomeReport {
  /** The log's new id (its record's and its lease keys'). */
  logId: string;
  /** The new coordination record (`log.lance/_dgcl/coordination`). */
  record: string;
  /** The record before (null: none). */
  previous: string | null;
  /** Item markers rebuilt (one per item with events or a delete). */
  markers: number;
  /** Claims rebuilt (one per checkpoint). */
  claims: number;
  /** Writer epochs that had generations and no seal, sealed before the events were read. */
  sealedEpochs: string[];
  /** Leases of the old scope taken (and given back) to stop its writers and maintainers. */
  fencedLeases: number;
}
