/**
 * Coordination records as objects beside the log (local roots, and object-store logs created
 * before the lease table held them): one object per item marker and per claim.
 */
import type { ObjectStore } from '../storage/objects.ts';
import { CLAIMS_DIR } from '../log/layout.ts';
import type { CoordKind, CoordStore } from './types.ts';

export class ObjectCoordStore implements CoordStore {
  readonly kind: CoordKind = 'objects';

  constructor(private readonly objects: ObjectStore) {}

  get(key: string): Promise<string | null> {
    return this.objects.get(key);
  }

  async getMany(keys: readonly string[]): Promise<Map<string, string | null>> {
    const unique = [...new Set(keys)];
    const bodies = await Promise.all(unique.map((k) => this.objects.get(k)));
    return new Map(unique.map((k, i) => [k, bodies[i]!]));
  }

  put(key: string, body: string): Promise<void> {
    return this.objects.put(key, body);
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
