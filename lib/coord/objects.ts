/**
 * Coordination records as objects beside the log (local roots, and object-store logs created
 * before the lease table held them): one object per item marker and per claim.
 */
import path from 'node:path';
import { UnavailableError } from '../errors.ts';
import { syncDir } from '../fsutil.ts';
import type { ObjectStore } from '../storage/objects.ts';
import { LocalObjectStore } from '../storage/local.ts';
import { CLAIMS_DIR } from './keys.ts';
import type { CoordKind, CoordStore } from './types.ts';

export class ObjectCoordStore implements CoordStore {
  readonly kind: CoordKind = 'objects';
  /**
   * On a local folder a put is not fsynced when answered (LocalObjectStore.put): `sync` makes the
   * records put since the last one durable (the writer calls it after a group's item markers,
   * before its commit: a marker lost to a power cut while the item's rows survived would make the
   * item look new). Only through the real local store: a wrapper (the simulation's)
   * schedules every request itself.
   */
  readonly sync?: () => Promise<void>;
  private readonly unsynced = new Set<string>();
  private parentsSynced = false;

  constructor(private readonly objects: ObjectStore) {
    if (objects instanceof LocalObjectStore) this.sync = () => this.syncLocal(objects.dir);
  }

  /**
   * Only the folders: what must outlive a power cut is the marker's name (no marker means a new
   * item), not its body. A body lost with the cut (an empty or partial file) is one no writer
   * put, so every writer reads the item instead of trusting a cache: safe. One fsync per folder
   * per group, not one per new item (a group may begin hundreds).
   */
  private async syncLocal(dir: string): Promise<void> {
    const keys = [...this.unsynced];
    this.unsynced.clear();
    try {
      const folders = new Set(keys.map((key) => path.dirname(path.join(dir, ...key.split('/')))));
      for (const f of folders) await syncDir(f);
      // A record folder is made by its first put: its name in the parent must last too (once).
      if (!this.parentsSynced && folders.size > 0) {
        for (const f of new Set([...folders].map((x) => path.dirname(x)))) await syncDir(f);
        this.parentsSynced = true;
      }
    } catch (e) {
      for (const k of keys) this.unsynced.add(k);
      throw new UnavailableError(`fsync of item markers in ${dir} failed: ${(e as Error)?.message ?? e}`, { cause: e });
    }
  }

  get(key: string): Promise<string | null> {
    return this.objects.get(key);
  }

  async getMany(keys: readonly string[]): Promise<Map<string, string | null>> {
    const unique = [...new Set(keys)];
    const bodies = await Promise.all(unique.map((k) => this.objects.get(k)));
    return new Map(unique.map((k, i) => [k, bodies[i]!]));
  }

  async put(key: string, body: string): Promise<void> {
    await this.objects.put(key, body);
    if (this.sync) this.unsynced.add(key);
  }

  // Not durable on a local folder: a claim only settles commits racing each other now, and a
  // power loss stops every process on the machine; later duplicates are answered by the log.
  // Expiry: maintenance deletes claims older than its retention (deleteClaimsOlderThan).
  putIfAbsent(key: string, body: string, _o: { expiresAfterMs: number }): Promise<boolean> {
    return this.objects.putIfAbsent(key, body, { durable: false });
  }

  delete(key: string): Promise<void> {
    return this.objects.delete(key);
  }

  deleteClaimsOlderThan(cutoffMs: number): Promise<number> {
    return this.objects.deleteOlderThan(CLAIMS_DIR, cutoffMs);
  }
}
