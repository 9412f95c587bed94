/**
 * The object store of the simulation: the real local store, every call a scheduling and fault
 * point. Two things differ from LocalObjectStore, to behave as S3 does:
 *  - deletePrefix deletes key by key in key order, one scheduling point per key, so readers
 *    interleave with a half-done deletion (Lance 0.39 names manifests newest-first, so the
 *    newest versions go first). Lance data files have random names, whose order S3 would
 *    follow; the simulation orders them by creation instead, so that a seed replays.
 *  - deleteOlderThan judges age by the simulated time of the last write through this store,
 *    not by file times (real time would make schedules depend on the machine's speed).
 */
import { guard } from '../../lib/guards.ts';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { UnavailableError } from '../../lib/errors.ts';
import type { LocalObjectStore } from '../../lib/storage/local.ts';
import type { ByteRange, ObjectStore, PutOptions } from '../../lib/storage/objects.ts';
import type { Scheduler } from './scheduler.ts';

const unavailable = (m: string) => new UnavailableError(m);

export class SimObjectStore implements ObjectStore {
  readonly baseUri: string;

  constructor(
    private readonly inner: LocalObjectStore,
    private readonly sched: Scheduler,
    /** key -> simulated time of its last write (shared by every store of the schedule). */
    private readonly written: Map<string, number>,
    private readonly nowMs: () => number,
  ) {
    this.baseUri = inner.baseUri;
  }

  /** `resendable`: the S3 store lets the SDK resend it (all but plain PUTs and `once` PUTs: lib/storage/s3.ts). */
  private op<T>(kind: string, key: string, mutating: boolean, run: () => Promise<T>, resendable = mutating): Promise<T> {
    return this.sched.op({ kind: `obj.${kind}`, target: key, mutating, faultable: true, run, error: unavailable, resendable });
  }

  putIfAbsent(key: string, body: string | Uint8Array, o?: PutOptions): Promise<boolean> {
    return this.op('putIfAbsent', key, true, async () => {
      const won = await this.inner.putIfAbsent(key, body, o);
      if (won) this.written.set(key, this.nowMs());
      return won;
    }, !o?.once);
  }

  put(key: string, body: string): Promise<void> {
    return this.op('put', key, true, async () => {
      await this.inner.put(key, body);
      this.written.set(key, this.nowMs());
    }, !guard('put-sent-once'));
  }

  get(key: string): Promise<string | null> {
    return this.op('get', key, false, () => this.inner.get(key));
  }

  getBytes(key: string, range: ByteRange): Promise<{ bytes: Uint8Array; size: number } | null> {
    return this.op('getBytes', key, false, () => this.inner.getBytes(key, range));
  }

  list(prefix: string): Promise<string[]> {
    return this.op('list', prefix, false, () => this.inner.list(prefix));
  }

  delete(key: string): Promise<void> {
    return this.op('delete', key, true, () => this.inner.delete(key));
  }

  async deletePrefix(prefix: string): Promise<number> {
    const keys = await this.op('deletePrefix.list', prefix, false, () => listFiles(this.inner.dir, prefix));
    let n = 0;
    for (const key of keys) {
      await this.op('deletePrefix.delete', key, true, async () => {
        try {
          await fs.unlink(path.join(this.inner.dir, ...key.split('/')));
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new UnavailableError(`delete ${key}: ${(e as Error).message}`);
        }
      });
      n++;
    }
    // Folders are not objects: drop the empty ones, as a listing of S3 would no longer show them.
    await this.op('deletePrefix.prune', prefix, true, () => pruneEmpty(path.join(this.inner.dir, ...prefix.split('/'))), false);
    return n;
  }

  deleteOlderThan(prefix: string, cutoffMs: number): Promise<number> {
    // Not resent here: a copy of this call would list again, where S3's resend deletes the keys
    // the first listing found (claims, whose keys come back only with their checkpoint).
    return this.op('deleteOlderThan', prefix, true, async () => {
      let n = 0;
      for (const name of await this.inner.list(prefix)) {
        const key = `${prefix}/${name}`;
        const at = this.written.get(key);
        if (at === undefined || at >= cutoffMs) continue;
        await this.inner.delete(key);
        this.written.delete(key);
        n++;
      }
      return n;
    }, false);
  }
}

/** Every file below `prefix`, in S3 key order; Lance data files (random names) by creation. */
async function listFiles(dir: string, prefix: string): Promise<string[]> {
  const out: Array<{ key: string; born: number }> = [];
  const walk = async (rel: string) => {
    let entries;
    try {
      entries = await fs.readdir(path.join(dir, ...rel.split('/')), { withFileTypes: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new UnavailableError(`list ${rel}: ${(e as Error).message}`);
    }
    for (const ent of entries) {
      const key = `${rel}/${ent.name}`;
      if (ent.isDirectory()) await walk(key);
      else if (!ent.name.startsWith('.dgcl-tmp-')) {
        const st = await fs.stat(path.join(dir, ...key.split('/'))).catch(() => null);
        out.push({ key, born: st ? st.mtimeMs : 0 });
      }
    }
  };
  await walk(prefix);
  const randomName = (k: string) => /\/data\/[^/]+$/.test(k) || /\/_transactions\/[^/]+$/.test(k);
  return out
    .sort((a, b) => {
      const da = path.posix.dirname(a.key);
      const db = path.posix.dirname(b.key);
      if (da !== db || !randomName(a.key) || !randomName(b.key)) return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
      return a.born - b.born || (a.key < b.key ? -1 : 1);
    })
    .map((x) => x.key);
}

async function pruneEmpty(folder: string): Promise<void> {
  let entries;
  try {
    entries = await fs.readdir(folder, { withFileTypes: true });
  } catch {
    return;
  }
  for (const ent of entries) if (ent.isDirectory()) await pruneEmpty(path.join(folder, ent.name));
  await fs.rmdir(folder).catch(() => undefined);
}
