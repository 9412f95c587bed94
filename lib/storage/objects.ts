/**
 * The few object operations the log needs beside Lance itself (seals, claims, retire markers,
 * listing shard folders). Keys are `/`-separated and relative to the store's base (the
 * experiment's `log.lance` folder). Implementations: local folder (lib/storage/local.ts) and
 * S3 (lib/storage/s3.ts). Nothing here may depend on one S3 implementation.
 */
import { InternalError } from '../errors.ts';

export interface PutOptions {
  /**
   * false: the object need not survive a power loss of the machine that wrote it (a local
   * folder skips the fsyncs). For objects that only coordinate processes running at the same
   * time, which the same power loss stops. Object stores are always durable; default true.
   */
  durable?: boolean;
  /**
   * true: `putIfAbsent` is sent once, never resent by the client (S3's SDK resends a conditional
   * PUT whose answer it did not get). For a key that is deleted later and must not come back: a
   * slow first copy can land after a resent one was answered and the key deleted (a shard
   * generation's marker: lib/log/tables.ts). A failure then may have landed, as always.
   */
  once?: boolean;
}

export type ByteRange = { suffix: number } | { start: number; end: number };

export interface ObjectStore {
  /** Human-readable base, e.g. `file:///tmp/x/log.lance` or `s3://b/p/log.lance`. */
  readonly baseUri: string;
  /**
   * Create `key` with `body` only if it does not exist (atomic: readers see the whole body or
   * no object). Returns true only if this call created it; false, writing nothing, if it
   * exists, whoever wrote it. At most one call per key ever returns true.
   *
   * Ambiguity is the caller's to resolve: a call that failed (or timed out) may still have
   * created the key, and a call whose request was resent after its first try landed returns
   * false for its own object. A caller that retries after such a failure must recognise its own
   * earlier write by reading the key and finding a nonce of its own in the body; identical
   * bodies from two callers are never told apart here.
   */
  putIfAbsent(key: string, body: string | Uint8Array, o?: PutOptions): Promise<boolean>;
  /**
   * Create or replace `key` (atomic: readers see the old or the new body, whole). Sent once: a
   * call that failed may have landed, or land later, but it is never resent after it failed or
   * after a later put of the key, so a body can come back only from a call that failed. Callers
   * that retry do it with a new body.
   */
  put(key: string, body: string): Promise<void>;
  /** Read a whole object; null if absent. */
  get(key: string): Promise<string | null>;
  /**
   * Part of an object's bytes, and its whole size; null if absent. `{ suffix: n }`: its last n
   * bytes (all of it when shorter: one request whatever the size); `{ start, end }`: bytes
   * start..end-1 (fewer when the object ends before; start below the size). Ranges are not
   * empty. For documents read in parts (the fold projection's rows: lib/log/projection/fold-rows.ts).
   */
  getBytes(key: string, range: ByteRange): Promise<{ bytes: Uint8Array; size: number } | null>;
  /** Names directly below `prefix` (no trailing slash), both objects and "folders", sorted. */
  list(prefix: string): Promise<string[]>;
  /** Delete one object (absent is fine). */
  delete(key: string): Promise<void>;
  /** Delete every object below `prefix`; returns how many were deleted. */
  deletePrefix(prefix: string): Promise<number>;
  /** Delete objects directly below `prefix` last modified before `cutoffMs`; returns how many. */
  deleteOlderThan(prefix: string, cutoffMs: number): Promise<number>;
}

/** A range's length, which must be a positive integer (an empty Range is not valid HTTP). */
export function checkRange(n: number): number {
  if (!Number.isSafeInteger(n) || n < 1) throw new InternalError(`a byte range must hold at least one byte, got ${n}`);
  return n;
}
