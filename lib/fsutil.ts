/**
 * File-system helpers shared by the local stores (lib/storage/local.ts, lib/lease/local.ts):
 * durable writes, directory fsync, quiet unlink, the error code of a failed fs call, and the
 * error of one refused by permissions.
 */
import { promises as fs } from 'node:fs';
import { PermissionDeniedError } from './errors.ts';

/** Creates `file` (fails with EEXIST if it exists), writes `body` and fsyncs it. */
export async function writeDurably(file: string, body: string | Uint8Array): Promise<void> {
  const fh = await fs.open(file, 'wx');
  try {
    await fh.writeFile(body);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Fsyncs a file or folder by path. One removed meanwhile (a temporary file renamed, old versions
 * cleaned up, a write-ahead log checkpointed away) needs no sync; any other failure is thrown:
 * what it holds may not be durable.
 */
export async function fsyncPath(p: string): Promise<void> {
  let fh: fs.FileHandle | undefined;
  try {
    fh = await fs.open(p, 'r');
    await fh.sync();
  } catch (e) {
    if (errCode(e) !== 'ENOENT') throw e;
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

/** Fsyncs a directory, so a rename or link in it is durable. Best effort. */
export async function syncDir(dir: string): Promise<void> {
  let fh: fs.FileHandle | undefined;
  try {
    fh = await fs.open(dir, 'r');
    await fh.sync();
  } catch {
    // Not every platform/filesystem (e.g. Windows) can fsync a directory; the rename or link
    // itself is still atomic.
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

/** Removes `path` if it is there; never throws. */
export async function unlinkQuiet(path: string): Promise<void> {
  try {
    await fs.unlink(path);
  } catch {
    // absent already
  }
}

/** The `code` of a failed fs call (`ENOENT`, `EEXIST`, ...), if any. */
export function errCode(e: unknown): string | undefined {
  return (e as { code?: unknown } | null | undefined)?.code as string | undefined;
}

/** Whether a failed fs call was refused by permissions (or a read-only file system). */
export function isPermissionError(e: unknown): boolean {
  const code = errCode(e);
  return code === 'EACCES' || code === 'EPERM' || code === 'EROFS';
}

/** The PermissionDeniedError of a refused fs call on `where`. */
export function permissionDenied(what: string, where: string, cause: unknown): PermissionDeniedError {
  return new PermissionDeniedError(`${what} ${where} was refused (${errCode(cause)}): ${(cause as Error)?.message ?? cause}; check the permissions of the folder`, where, { cause });
}
