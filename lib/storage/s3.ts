/**
 * ObjectStore over S3 or any S3-compatible server (AWS S3, MinIO, Ceph RGW, ...), using only
 * standard S3 API calls: conditional PutObject (`If-None-Match: *`), GetObject,
 * ListObjectsV2 with a `/` delimiter, DeleteObject and DeleteObjects.
 *
 * Errors: "not found" answers become null / no-op; a missing bucket is LogNotFoundError (no log
 * can be there), a refusal (AccessDenied, HTTP 403) PermissionDeniedError (a retry cannot help);
 * every other failure becomes an UnavailableError (retryable). Each message names the
 * operation, the object and the server's error, with the SDK error as `cause`.
 */
import { guard } from '../guards.ts';
import { sendOnce } from './send-once.ts';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { type DgclError, LogNotFoundError, PermissionDeniedError, UnavailableError } from '../errors.ts';
import { checkObjectKey, joinKey, type S3Location } from './location.ts';
import { checkRange, type ByteRange, type ObjectStore, type PutOptions } from './objects.ts';

export interface S3ObjectStoreOptions {
  client: S3Client;
  bucket: string;
  /** Key prefix of the base folder, without leading or trailing slash (may be empty). */
  basePrefix: string;
  /** Human-readable base; defaults to `s3://bucket/basePrefix`. */
  baseUri?: string;
  /** How often a conditional put answered 409 ConditionalRequestConflict is retried (4). */
  conflictRetries?: number;
}

/** S3 allows at most this many keys per DeleteObjects request. */
const DELETE_BATCH = 1000;
/** Parallel single deletes when a server refuses DeleteObjects. */
const SINGLE_DELETE_CONCURRENCY = 8;

export class S3ObjectStore implements ObjectStore {
  readonly baseUri: string;
  readonly bucket: string;
  readonly basePrefix: string;
  private readonly client: S3Client;
  private readonly conflictRetries: number;
  /** Set once a server refused DeleteObjects (e.g. it insists on Content-MD5). */
  private bulkDeleteRefused = false;

  constructor(opts: S3ObjectStoreOptions) {
    this.client = opts.client;
    this.bucket = opts.bucket;
    this.basePrefix = joinKey(opts.basePrefix);
    this.baseUri = opts.baseUri ?? (this.basePrefix ? `s3://${this.bucket}/${this.basePrefix}` : `s3://${this.bucket}`);
    this.conflictRetries = opts.conflictRetries ?? 4;
  }

  /** A store whose base is an S3 location (e.g. from `logLocation`). */
  static at(client: S3Client, loc: S3Location): S3ObjectStore {
    return new S3ObjectStore({ client, bucket: loc.bucket, basePrefix: loc.prefix });
  }

  /** Sent once, never resent by the SDK (see `sendOnce`). */
  async put(key: string, body: string): Promise<void> {
    const k = this.key(checkObjectKey(key, 'key'));
    const bytes = Buffer.from(body, 'utf8');
    try {
      const cmd = new PutObjectCommand({ Bucket: this.bucket, Key: k, Body: bytes, ContentLength: bytes.length });
      await (guard('put-sent-once') ? sendOnce(cmd, (c) => this.client.send(c)) : this.client.send(cmd));
    } catch (e) {
      throw this.fail('put', k, e);
    }
  }

  /**
   * Conditional create (`If-None-Match: *`): 412 means the key exists, so false. A 409
   * ConditionalRequestConflict (a concurrent write to the same key in flight) is retried with
   * backoff, then decided by whether the key exists (false) or not (UnavailableError).
   *
   * True only when this call's own request was answered 200. When the SDK resends (our first
   * try may have landed though its answer was lost) and meets 412, the answer is still false:
   * the body is never compared, because two callers putting identical bodies would then both
   * "win" (see ObjectStore.putIfAbsent: a caller recognises its own write by a nonce in the body).
   */
  async putIfAbsent(key: string, body: string | Uint8Array, o: PutOptions = {}): Promise<boolean> {
    const k = this.key(checkObjectKey(key, 'key'));
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    for (let attempt = 0; ; attempt++) {
      try {
        const cmd = new PutObjectCommand({
          Bucket: this.bucket,
          Key: k,
          Body: bytes,
          ContentLength: bytes.byteLength,
          IfNoneMatch: '*',
        });
        // A 409 below was answered (it lands never), so trying again after it resends nothing.
        if (o.once) await sendOnce(cmd, (c) => this.client.send(c));
        else await this.client.send(cmd);
        return true;
      } catch (e) {
        const status = meta(e).httpStatusCode;
        const name = errName(e);
        if (status === 412 || name === 'PreconditionFailed') return false;
        if (status === 409 || name === 'ConditionalRequestConflict') {
          if (attempt < this.conflictRetries) {
            await sleep(backoffMs(attempt));
            continue;
          }
          if ((await this.get(key)) !== null) return false;
          throw new UnavailableError(
            `S3 putIfAbsent ${this.uri(k)}: still conflicting after ${attempt + 1} tries (${describe(e)})`,
            { cause: e },
          );
        }
        // Sent once: a request S3 refused unprocessed (503 SlowDown, 429) never lands, so a new
        // one is sent after a pause, as the SDK would have resent it.
        if (o.once && (status === 503 || status === 429 || name === 'SlowDown') && attempt < this.conflictRetries) {
          await sleep(backoffMs(attempt));
          continue;
        }
        if (status === 501 || name === 'NotImplemented') {
          throw new UnavailableError(
            `S3 putIfAbsent ${this.uri(k)} failed: the server does not support conditional writes (If-None-Match: *) (${describe(e)})`,
            { cause: e },
          );
        }
        throw this.fail('putIfAbsent', k, e);
      }
    }
  }

  async get(key: string): Promise<string | null> {
    const k = this.key(checkObjectKey(key, 'key'));
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: k }));
      if (!res.Body) return '';
      return await res.Body.transformToString('utf-8');
    } catch (e) {
      if (isNotFound(e)) return null;
      throw this.fail('get', k, e);
    }
  }

  async getBytes(key: string, range: ByteRange): Promise<{ bytes: Uint8Array; size: number } | null> {
    const k = this.key(checkObjectKey(key, 'key'));
    const header = 'suffix' in range ? `bytes=-${checkRange(range.suffix)}` : `bytes=${range.start}-${range.start + checkRange(range.end - range.start) - 1}`;
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: k, Range: header }));
      const bytes = res.Body ? await res.Body.transformToByteArray() : new Uint8Array(0);
      // "bytes a-b/size" on a 206; a 200 (the range covers the object) is the whole object.
      const total = /\/(\d+)$/.exec(res.ContentRange ?? '');
      return { bytes, size: total ? Number(total[1]) : bytes.length };
    } catch (e) {
      if (isNotFound(e)) return null;
      throw this.fail('get', k, e);
    }
  }

  async list(prefix: string): Promise<string[]> {
    const p = this.folderPrefix(checkObjectKey(prefix, 'prefix'));
    const names = new Set<string>();
    for await (const res of this.pages(p, '/', 'list')) {
      for (const cp of res.CommonPrefixes ?? []) {
        const name = cp.Prefix?.slice(p.length).replace(/\/$/, '');
        if (name) names.add(name);
      }
      for (const obj of res.Contents ?? []) {
        const name = obj.Key?.slice(p.length);
        if (name && !name.includes('/')) names.add(name);
      }
    }
    return [...names].sort(compare);
  }

  async delete(key: string): Promise<void> {
    const k = this.key(checkObjectKey(key, 'key'));
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: k }));
    } catch (e) {
      if (isNotFound(e)) return;
      throw this.fail('delete', k, e);
    }
  }

  /** Page by page as listed (a page holds at most DELETE_BATCH keys): memory for one page, whatever the folder holds. */
  async deletePrefix(prefix: string): Promise<number> {
    const p = this.folderPrefix(checkObjectKey(prefix, 'prefix'));
    let deleted = 0;
    for await (const res of this.pages(p, undefined, 'deletePrefix (list)')) {
      const keys = (res.Contents ?? []).flatMap((obj) => (obj.Key ? [obj.Key] : []));
      deleted += await this.deleteAll(keys);
    }
    return deleted;
  }

  async deleteOlderThan(prefix: string, cutoffMs: number): Promise<number> {
    const p = this.folderPrefix(checkObjectKey(prefix, 'prefix'));
    const keys: string[] = [];
    for await (const res of this.pages(p, '/', 'deleteOlderThan (list)')) {
      for (const obj of res.Contents ?? []) {
        const name = obj.Key?.slice(p.length);
        if (!obj.Key || !name || name.includes('/')) continue;
        if (obj.LastModified !== undefined && obj.LastModified.getTime() < cutoffMs) keys.push(obj.Key);
      }
    }
    return this.deleteAll(keys);
  }

  /**
   * Every ListObjectsV2 page under the full prefix `p` (with `delimiter`: only its direct
   * children, sub-folders as CommonPrefixes), following continuation tokens. A failed request
   * throws UnavailableError naming `op`.
   */
  private async *pages(p: string, delimiter: '/' | undefined, op: string): AsyncGenerator<ListObjectsV2CommandOutput> {
    let token: string | undefined;
    do {
      let res: ListObjectsV2CommandOutput;
      try {
        res = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: p,
            ...(delimiter === undefined ? {} : { Delimiter: delimiter }),
            ContinuationToken: token,
          }),
        );
      } catch (e) {
        throw this.fail(op, p, e);
      }
      yield res;
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
    } while (token);
  }

  /** Deletes any number of full keys, DELETE_BATCH at a time; returns how many were deleted. */
  private async deleteAll(keys: string[]): Promise<number> {
    let deleted = 0;
    for (let i = 0; i < keys.length; i += DELETE_BATCH) {
      deleted += await this.deleteKeys(keys.slice(i, i + DELETE_BATCH));
    }
    return deleted;
  }

  /** Deletes up to 1000 full keys; returns how many were deleted. */
  private async deleteKeys(keys: string[]): Promise<number> {
    if (!this.bulkDeleteRefused) {
      try {
        const res = await this.client.send(
          new DeleteObjectsCommand({
            Bucket: this.bucket,
            Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true },
          }),
        );
        const errors = (res.Errors ?? []).filter((err) => err.Code !== 'NoSuchKey');
        if (errors.length > 0) {
          const first = errors[0];
          throw new UnavailableError(
            `S3 deletePrefix: ${errors.length} of ${keys.length} objects were not deleted, e.g. ${this.uri(
              first?.Key ?? '?',
            )}: ${first?.Code ?? ''} ${first?.Message ?? ''}`.trim(),
          );
        }
        return keys.length - (res.Errors?.length ?? 0);
      } catch (e) {
        if (e instanceof UnavailableError) throw e;
        if (!bulkDeleteUnsupported(e)) throw this.fail('deletePrefix (DeleteObjects)', keys[0] ?? '', e);
        // Some S3-compatible servers refuse DeleteObjects as this SDK sends it (it sends a
        // CRC32 checksum, not the Content-MD5 older servers insist on): delete one by one.
        this.bulkDeleteRefused = true;
      }
    }
    let next = 0;
    const worker = async () => {
      while (next < keys.length) {
        const k = keys[next++]!;
        try {
          await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: k }));
        } catch (e) {
          if (!isNotFound(e)) throw this.fail('deletePrefix (DeleteObject)', k, e);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(SINGLE_DELETE_CONCURRENCY, keys.length) }, worker));
    return keys.length;
  }

  private key(rel: string): string {
    return this.basePrefix ? `${this.basePrefix}/${rel}` : rel;
  }

  /** The listing prefix of a relative folder: `base/prefix/` ('' for the bucket's root). */
  private folderPrefix(rel: string): string {
    const full = joinKey(this.basePrefix, rel);
    return full === '' ? '' : `${full}/`;
  }

  private uri(fullKey: string): string {
    return `s3://${this.bucket}/${fullKey}`;
  }

  private fail(op: string, fullKey: string, cause: unknown): DgclError {
    const name = errName(cause);
    if (name === 'NoSuchBucket') {
      return new LogNotFoundError(`S3 bucket ${JSON.stringify(this.bucket)} does not exist (${op} ${this.uri(fullKey)}: ${describe(cause)})`, this.baseUri, { cause });
    }
    if (name === 'AccessDenied' || name === 'AllAccessDisabled' || (meta(cause).httpStatusCode === 403 && name !== 'RequestTimeTooSkewed')) {
      return new PermissionDeniedError(`S3 ${op} ${this.uri(fullKey)} was refused: ${describe(cause)}; check the credentials and the bucket policy`, this.uri(fullKey), { cause });
    }
    return new UnavailableError(`S3 ${op} ${this.uri(fullKey)} failed: ${describe(cause)}`, { cause });
  }
}

interface SdkMeta {
  httpStatusCode?: number;
  attempts?: number;
}

function meta(e: unknown): SdkMeta {
  return ((e as { $metadata?: SdkMeta } | undefined)?.$metadata ?? {}) as SdkMeta;
}

function errName(e: unknown): string | undefined {
  const x = e as { name?: string; Code?: string } | undefined;
  return x?.Code ?? x?.name;
}

function isNotFound(e: unknown): boolean {
  const name = errName(e);
  if (name === 'NoSuchKey' || name === 'NotFound') return true;
  return meta(e).httpStatusCode === 404 && name !== 'NoSuchBucket';
}

/** Whether a DeleteObjects failure means "this server does not take it": try single deletes. */
function bulkDeleteUnsupported(e: unknown): boolean {
  const status = meta(e).httpStatusCode;
  const name = errName(e) ?? '';
  if (status === 501 || status === 405 || status === 411) return true;
  if (/MD5|Digest|Checksum|NotImplemented|InvalidRequest|MissingContentLength/i.test(name)) return true;
  return false;
}

function describe(e: unknown): string {
  const name = errName(e) ?? 'Error';
  const status = meta(e).httpStatusCode;
  const msg = (e as Error | undefined)?.message ?? String(e);
  return `${name}${status ? ` (HTTP ${status})` : ''}: ${msg}`;
}

function backoffMs(attempt: number): number {
  return Math.min(1000, 25 * 2 ** attempt) * (0.5 + Math.random());
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
