/**
 * ObjectStore over a local folder (the experiment's `log.lance` directory).
 *
 * putIfAbsent is atomic and exclusive: the body goes to a temporary file in the target's own
 * folder, is fsynced, and is then hard-linked to the final name (`link` fails with EEXIST if
 * the name exists, so exactly one of many racing writers wins and readers never see a partial
 * body). Empty folders left behind by deletes are pruned, so listings match an object store's
 * (where a "folder" exists only while something is below it).
 *
 * Reads never write: get, list and the deletes of missing keys create no folder (only put and
 * putIfAbsent create their parents). putIfAbsent is true only for the call whose link made the
 * object, never decided by comparing bodies; the one ambiguous case is a link that succeeded
 * followed by a failed folder fsync: UnavailableError although the object exists, and a retry
 * then answers false (ObjectStore: the caller recognises its own body).
 *
 * Reads (get, getBytes, list) are synchronous: what the log reads here is small (markers,
 * listings of its meta folder, the projection's index and chunks, a rows file's end and one
 * item's range), and an async call is 1-4 trips through libuv's thread pool, which queue behind
 * Lance's work and fsyncs on a busy process: a fold with many live writers' shards spent a third
 * of its time in those queues (docs/design/performance.md, "Folds"). Writes stay async
 * (their fsyncs are slow). A local root must be on a local disk (as its SQLite coordination
 * file already requires): a hung network mount would now stall the whole process.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fstatSync, promises as fs, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type DgclError, InvalidInputError, UnavailableError } from '../errors.ts';
import { errCode, isPermissionError, permissionDenied, syncDir, unlinkQuiet, writeDurably } from '../fsutil.ts';
import { checkObjectKey } from './location.ts';
import { checkRange, type ByteRange, type ObjectStore, type PutOptions } from './objects.ts';

/** Temporary files of in-flight puts start with this; listings and counts skip them. */
const TMP_MARK = '.dgcl-tmp-';

// A temporary name must be unique among every process writing the folder: the pid alone is not
// (containers sharing a volume reuse pids), so a random tag per process, then a counter: a
// random name per put costs main-thread time on every put (two files per new-item batch;
// docs/design/performance.md, "The ack path").
const TMP_PREFIX = `${TMP_MARK}${process.pid}-${randomBytes(6).toString('hex')}-`;
let tmpCounter = 0;
const tmpName = (): string => `${TMP_PREFIX}${(++tmpCounter).toString(36)}`;

export class LocalObjectStore implements ObjectStore {
  readonly baseUri: string;
  /** Absolute path of the base folder. */
  readonly dir: string;

  constructor(dir: string) {
    this.dir = path.resolve(dir);
    this.baseUri = pathToFileURL(this.dir).href;
  }

  /**
   * Atomic (temp file + rename) but not fsynced: `put` holds small, frequently rewritten markers
   * (item markers, one per item a writer begins), and an fsync each made group commits of many
   * new items disk-bound. The writer makes a group's markers durable at once, with one fsync of
   * their folder before its commit (ObjectCoordStore.sync).
   */
  async put(key: string, body: string): Promise<void> {
    const k = checkObjectKey(key, 'key');
    const final = this.path(k);
    const folder = path.dirname(final);
    const tmp = path.join(folder, tmpName());
    try {
      await writeCreatingFolder(folder, () => fs.writeFile(tmp, body, { flag: 'wx' }));
      await fs.rename(tmp, final);
    } catch (e) {
      await unlinkQuiet(tmp);
      throw this.fail('put', k, e);
    }
  }

  async putIfAbsent(key: string, body: string | Uint8Array, o: PutOptions = {}): Promise<boolean> {
    const durable = o.durable !== false;
    const k = checkObjectKey(key, 'key');
    const final = this.path(k);
    const folder = path.dirname(final);
    const tmp = path.join(folder, tmpName());
    try {
      await writeCreatingFolder(folder, () => (durable ? writeDurably(tmp, body) : fs.writeFile(tmp, body, { flag: 'wx' })));
    } catch (e) {
      if (errCode(e) === 'EEXIST' || errCode(e) === 'ENOTDIR') {
        // a local folder cannot also be a file (an object store could hold both)
        throw new InvalidInputError(`cannot create ${JSON.stringify(k)} in ${this.dir}: a parent of it is an object`, { field: 'key', cause: e });
      }
      throw this.fail('put', k, e);
    }
    try {
      await fs.link(tmp, final);
      if (durable) await syncDir(folder);
      return true;
    } catch (e) {
      if (errCode(e) === 'EEXIST') return false;
      throw this.fail('put', k, e);
    } finally {
      await unlinkQuiet(tmp);
    }
  }

  async get(key: string): Promise<string | null> {
    const k = checkObjectKey(key, 'key');
    try {
      return readFileSync(this.path(k), 'utf8');
    } catch (e) {
      const code = errCode(e);
      if (code === 'ENOENT' || code === 'EISDIR' || code === 'ENOTDIR') return null;
      throw this.fail('get', k, e);
    }
  }

  async getBytes(key: string, range: ByteRange): Promise<{ bytes: Uint8Array; size: number } | null> {
    const k = checkObjectKey(key, 'key');
    let fd: number;
    try {
      fd = openSync(this.path(k), 'r');
    } catch (e) {
      const code = errCode(e);
      if (code === 'ENOENT' || code === 'EISDIR' || code === 'ENOTDIR') return null;
      throw this.fail('get', k, e);
    }
    try {
      const size = fstatSync(fd).size;
      const [start, end] = 'suffix' in range ? [Math.max(0, size - checkRange(range.suffix)), size] : [Math.min(range.start, size), Math.min(range.start + checkRange(range.end - range.start), size)];
      const bytes = Buffer.allocUnsafe(Math.max(0, end - start));
      let n = 0;
      while (n < bytes.length) {
        const bytesRead = readSync(fd, bytes, n, bytes.length - n, start + n);
        if (bytesRead === 0) break;
        n += bytesRead;
      }
      return { bytes: bytes.subarray(0, n), size };
    } catch (e) {
      if (errCode(e) === 'EISDIR') return null;
      throw this.fail('get', k, e);
    } finally {
      closeSync(fd);
    }
  }

  async list(prefix: string): Promise<string[]> {
    const p = checkObjectKey(prefix, 'prefix');
    try {
      const names = readdirSync(this.path(p));
      return names.filter((n) => !n.startsWith(TMP_MARK)).sort(compare);
    } catch (e) {
      const code = errCode(e);
      if (code === 'ENOENT' || code === 'ENOTDIR') return [];
      throw this.fail('list', p, e);
    }
  }

  async delete(key: string): Promise<void> {
    const k = checkObjectKey(key, 'key');
    try {
      await fs.unlink(this.path(k));
    } catch (e) {
      const code = errCode(e);
      // absent is fine; a "folder" is not an object, so there is nothing to delete
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR' || code === 'EPERM') {
        if (code === 'EPERM' && !(await isDir(this.path(k)))) throw this.fail('delete', k, e);
        return;
      }
      throw this.fail('delete', k, e);
    }
    await this.pruneEmptyParents(path.dirname(this.path(k)));
  }

  async deletePrefix(prefix: string): Promise<number> {
    const p = checkObjectKey(prefix, 'prefix');
    const target = this.path(p);
    if (!(await isDir(target))) return 0;
    let count = 0;
    try {
      count = await countFiles(target);
      await fs.rm(target, { recursive: true, force: true });
    } catch (e) {
      throw this.fail('deletePrefix', p, e);
    }
    if (p !== '') await this.pruneEmptyParents(path.dirname(target));
    return count;
  }

  async deleteOlderThan(prefix: string, cutoffMs: number): Promise<number> {
    const p = checkObjectKey(prefix, 'prefix');
    const folder = this.path(p);
    let entries;
    try {
      entries = await fs.readdir(folder, { withFileTypes: true });
    } catch (e) {
      const code = errCode(e);
      if (code === 'ENOENT' || code === 'ENOTDIR') return 0;
      throw this.fail('deleteOlderThan', p, e);
    }
    let count = 0;
    for (const ent of entries) {
      if (!ent.isFile() || ent.name.startsWith(TMP_MARK)) continue;
      const file = path.join(folder, ent.name);
      try {
        if ((await fs.stat(file)).mtimeMs >= cutoffMs) continue;
        await fs.unlink(file);
        count += 1;
      } catch (e) {
        if (errCode(e) === 'ENOENT') continue; // deleted meanwhile
        throw this.fail('deleteOlderThan', p === '' ? ent.name : `${p}/${ent.name}`, e);
      }
    }
    if (count > 0 && p !== '') await this.pruneEmptyParents(folder);
    return count;
  }

  private path(key: string): string {
    return key === '' ? this.dir : path.join(this.dir, ...key.split('/'));
  }

  /** Removes now-empty folders from `folder` up to (not including) the base. */
  private async pruneEmptyParents(folder: string): Promise<void> {
    let f = folder;
    while (f.length > this.dir.length && f.startsWith(this.dir + path.sep)) {
      try {
        await fs.rmdir(f);
      } catch {
        return; // not empty (or gone, or busy): stop
      }
      f = path.dirname(f);
    }
  }

  private fail(op: string, key: string, cause: unknown): DgclError {
    const where = key === '' ? this.dir : path.join(this.dir, key);
    if (isPermissionError(cause)) return permissionDenied(`local store ${op}`, where, cause);
    return new UnavailableError(`local store ${op} ${where} failed: ${(cause as Error)?.message ?? cause}`, {
      cause,
    });
  }
}

async function countFiles(dir: string): Promise<number> {
  let n = 0;
  let entries;
  try {
    entries = await fs.readdir(dir, { withFileTypes: true });
  } catch (e) {
    if (errCode(e) === 'ENOENT') return 0;
    throw e;
  }
  for (const ent of entries) {
    if (ent.isDirectory()) n += await countFiles(path.join(dir, ent.name));
    else if (!ent.name.startsWith(TMP_MARK)) n += 1;
  }
  return n;
}

async function isDir(p: string): Promise<boolean> {
  try {
    return (await fs.stat(p)).isDirectory();
  } catch {
    return false;
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Run a write of a new file in `folder`, creating the folder only when the write finds it
 * missing (a mkdir per write cost more than the write). A concurrent delete may prune an
 * emptied folder between the mkdir and the write: a few attempts.
 */
async function writeCreatingFolder(folder: string, write: () => Promise<unknown>): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await write();
      return;
    } catch (e) {
      if (errCode(e) !== 'ENOENT' || attempt >= 5) throw e;
      await fs.mkdir(folder, { recursive: true });
    }
  }
}
