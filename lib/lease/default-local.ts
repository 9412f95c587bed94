/** The lease store of a local root when none is given: a lease folder beside the logs. */
import path from 'node:path';
import type { Clock } from '../clock.ts';
import { LocalLeaseStore } from './local.ts';
import type { LeaseStore } from './types.ts';

export function localLeaseStore(rootDir: string, clock: Clock): { store: LeaseStore; close: () => Promise<void> } {
  const store = new LocalLeaseStore({ dir: path.join(rootDir, '.dgcl', 'leases'), clock });
  return { store, close: () => store.close() };
}
