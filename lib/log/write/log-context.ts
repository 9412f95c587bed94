/**
 * What the writer and the maintainer's pass share of one log object (lib/log/log.ts builds it):
 * its Lance handles, its object store, its reader, its leases and its coordination records.
 */
import type { CoordStore } from '../../coord/types.ts';
import type { LeaseStore } from '../../lease/types.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { LogReader } from '../read/reader.ts';
import type { LanceTables } from '../tables.ts';
import type { LeaseScope } from './coord-holder.ts';

export interface LogContext {
  tables: LanceTables;
  objects: ObjectStore;
  reader: LogReader;
  leases: LeaseStore;
  /** The log's coordination store (lib/log/write/coord-holder.ts); `create: false` never records one. */
  coord: (o?: { create: boolean }) => Promise<CoordStore>;
  /** The scope the log's lease keys have, and whether the record still says so (lib/log/write/coord-holder.ts). */
  leaseScope: (o: { create: boolean }) => Promise<LeaseScope>;
  coordUnchanged: (scope: LeaseScope) => Promise<boolean>;
}
