/**
 * Where a report or an export goes: a local file (or folder, for blobs) or an s3:// key (prefix).
 * A file for S3 is written to a local temporary file first and uploaded when whole, so a reader
 * never sees half an export; a local file is written beside its target and renamed into place.
 */
import { closeSync, mkdirSync, openSync, readSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CreateMultipartUploadCommand, PutObjectCommand, S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import { InvalidInputError, UnavailableError } from '../errors.ts';
import { checkObjectKey, joinKey, parseRoot, s3ClientConfig, type Env } from '../storage/location.ts';
import { isPermissionError, permissionDenied } from '../fsutil.ts';

export type Target = { kind: 'file'; path: string } | { kind: 's3'; bucket: string; key: string };

/** A file target: a local path, `file:///...`, or `s3://bucket/key`. */
export function parseTarget(spec: string, field: string): Target {
  if (typeof spec !== 'string' || spec.trim() === '') throw new InvalidInputError(`must be a non-empty path or s3:// URI, got ${JSON.stringify(spec)}`, { field });
  let loc;
  try {
    loc = parseRoot(spec);
  } catch (e) {
    throw new InvalidInputError(e instanceof Error ? e.message.replace(/^root: /, '').replace(/\broot\b/g, field) : String(e), { field, cause: e });
  }
  if (loc.kind === 'file') return { kind: 'file', path: loc.dir };
  if (loc.prefix === '') throw new InvalidInputError(`${JSON.stringify(spec)} names a bucket but no key`, { field });
  return { kind: 's3', bucket: loc.bucket, key: checkObjectKey(loc.prefix, 'key') };
}

export function formatTarget(t: Target): string {
  return t.kind === 'file' ? t.path : `s3://${t.bucket}/${t.key}`;
}

function s3(env: Env): S3Client {
  return new S3Client({ ...s3ClientConfig(env), requestHandler: { connectionTimeout: 5_000, requestTimeout: 300_000 } });
}

/**
 * Bytes go up as Buffers with a known length (a streamed body would be sent aws-chunked, which
 * some S3-compatible servers refuse): one PUT up to PART bytes, else a multipart upload read part
 * by part, so memory stays at one part whatever the file's size.
 */
const PART = 32 * 1024 * 1024;

function readPart(fd: number, offset: number, size: number): Buffer {
  const buf = Buffer.alloc(size);
  let got = 0;
  while (got < size) {
    const n = readSync(fd, buf, got, size - got, offset + got);
    if (n === 0) break;
    got += n;
  }
  return got === size ? buf : buf.subarray(0, got);
}

async function upload(client: S3Client, bucket: string, key: string, file: string): Promise<void> {
  const size = statSync(file).size;
  const fd = openSync(file, 'r');
  let uploadId: string | undefined;
  try {
    if (size <= PART) {
      const body = readPart(fd, 0, size);
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentLength: body.length }));
      return;
    }
    uploadId = (await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }))).UploadId;
    const parts: { ETag: string; PartNumber: number }[] = [];
    for (let off = 0, n = 1; off < size; off += PART, n++) {
      const body = readPart(fd, off, Math.min(PART, size - off));
      const r = await client.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumber: n, Body: body, ContentLength: body.length }));
      parts.push({ ETag: r.ETag!, PartNumber: n });
    }
    await client.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts } }));
  } catch (e) {
    if (uploadId) await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId })).catch(() => {});
    throw new UnavailableError(`upload to s3://${bucket}/${key} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  } finally {
    closeSync(fd);
  }
}

/**
 * Run `write` on a local path, then put the file in place: renamed over a local target, or
 * uploaded to S3. On failure nothing is left at the target.
 */
export async function writeTarget<T>(t: Target, env: Env, write: (localPath: string) => Promise<T>): Promise<T> {
  if (t.kind === 'file') {
    const tmp = `${t.path}.tmp-${process.pid}`;
    try {
      mkdirSync(path.dirname(t.path), { recursive: true });
      const r = await write(tmp);
      renameSync(tmp, t.path);
      return r;
    } catch (e) {
      if (isPermissionError(e)) throw permissionDenied('writing', (e as { path?: string }).path ?? t.path, e);
      throw e;
    } finally {
      rmSync(tmp, { force: true });
    }
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'dgcl-out-'));
  const client = s3(env);
  try {
    const file = path.join(dir, 'out');
    const r = await write(file);
    await upload(client, t.bucket, t.key, file);
    return r;
  } finally {
    client.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A folder (local or s3:// prefix) that blob files are written into, by relative name. */
export interface BlobFolder {
  /**
   * How a row refers to the file `rel`: its path relative to the folder of the output file when
   * both are local or in one bucket (the export and its blobs can be moved or copied together),
   * else its absolute path or URI.
   */
  ref(rel: string): string;
  put(rel: string, bytes: Uint8Array): Promise<void>;
  close(): void;
}

export function openBlobFolder(spec: string, env: Env, out: Target): BlobFolder {
  let loc;
  try {
    loc = parseRoot(spec);
  } catch (e) {
    throw new InvalidInputError(e instanceof Error ? e.message : String(e), { field: 'blobs', cause: e });
  }
  if (loc.kind === 'file') {
    const dir = loc.dir;
    const from = out.kind === 'file' ? path.dirname(out.path) : null;
    return {
      ref: (rel) => (from !== null ? path.relative(from, path.join(dir, rel)).split(path.sep).join('/') : path.join(dir, rel)),
      put: async (rel, bytes) => {
        const p = path.join(dir, rel);
        mkdirSync(path.dirname(p), { recursive: true });
        writeFileSync(p, bytes);
      },
      close: () => {},
    };
  }
  const { bucket, prefix } = loc;
  const client = s3(env);
  // Keys as absolute paths: posix.relative would resolve relative ones against the working directory.
  const from = out.kind === 's3' && out.bucket === bucket ? `/${path.posix.dirname(out.key)}` : null;
  return {
    ref: (rel) => (from !== null ? path.posix.relative(from, `/${joinKey(prefix, rel)}`) : `s3://${bucket}/${joinKey(prefix, rel)}`),
    put: async (rel, bytes) => {
      const key = joinKey(prefix, rel);
      try {
        await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: bytes, ContentLength: bytes.length }));
      } catch (e) {
        throw new UnavailableError(`upload to s3://${bucket}/${key} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
      }
    },
    close: () => client.destroy(),
  };
}
