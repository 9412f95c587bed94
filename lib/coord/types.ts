/**
 * Where a log keeps its item markers and checkpoint claims (docs/design/performance.md, "Claims
 * and markers in the lease table"): the small records that coordinate writers, one per item and
 * one per checkpoint. Keys are the log's object keys (`_dgcl/items/<hash>`,
 * `_dgcl/claims/<checkpointId>.json`, lib/log/layout.ts) in either store.
 *
 * Three stores with the same semantics:
 *  - objects (lib/coord/objects.ts): objects beside the log, in its root (local logs created
 *    before 0.3.0, and S3 logs created before the lease table held them);
 *  - sqlite (lib/coord/sqlite.ts): one SQLite file beside a log on a local root (from 0.3.0);
 *  - the lease table (lib/coord/dynamo.ts): one DynamoDB item per record, so a group commit reads
 *    every marker it needs in one request and no per-batch request goes to S3.
 * Which one a log uses is recorded once in the log (lib/coord/choose.ts) and never changes.
 */
export interface CoordStore {
  /** 'objects', 'sqlite' or 'table': what the log's choice record says. */
  readonly kind: CoordKind;
  /** Strongly consistent read of one record; null if absent. */
  get(key: string): Promise<string | null>;
  /** Strongly consistent reads of several records (absent ones map to null). */
  getMany(keys: readonly string[]): Promise<Map<string, string | null>>;
  /**
   * Create or replace (readers see the old or the new body, whole). Sent once, never resent: a
   * call that failed may have landed, or land later, so callers retry with a new body and never
   * trust a failed one's (the same contract as ObjectStore.put).
   */
  put(key: string, body: string): Promise<void>;
  /**
   * Create only if absent; true only if this call created it (at most one call per key ever
   * returns true). A failed or resent call may have created it: callers recognise their own
   * write by a nonce in the body (ObjectStore.putIfAbsent). `expiresAfterMs`: the record may be
   * deleted by the store once this long has passed (the lease table's TTL); objects are deleted
   * by maintenance instead (`deleteClaimsOlderThan`).
   */
  putIfAbsent(key: string, body: string, o: { expiresAfterMs: number }): Promise<boolean>;
  /** Delete one record (absent is fine). */
  delete(key: string): Promise<void>;
  /**
   * Delete claims written before `cutoffMs`; returns how many. Only the object store does work
   * here: the table's claims carry a TTL and DynamoDB deletes them.
   */
  deleteClaimsOlderThan(cutoffMs: number): Promise<number>;
  /**
   * Makes every write answered so far survive a power cut, where a write is not durable when
   * answered (a local file store that does not fsync each commit). Optional: absent, writes are
   * as durable when answered as they will be.
   */
  sync?(): Promise<void>;
  /** Releases what the store holds open (a database connection); later calls fail. Optional. */
  close?(): void;
}

export type CoordKind = 'objects' | 'table' | 'sqlite';

/** A store that can hold a log's coordination records in the lease table (DynamoLeaseStore). */
export interface CoordTable {
  /**
   * The store of one log. `scope` (`<pipeline>/<experiment>/<logId>`, the id from the log's
   * choice record) prefixes every key, so a log deleted and made again at the same place, or one
   * of the same name under another root sharing the table, never meets an old one's records.
   * `claimRetentionMs`-style expiry comes with each putIfAbsent.
   */
  coordStore(scope: string): CoordStore;
}
