/**
 * A log's place for the operator commands (drop, copy): its root, names and URI, the object
 * stores of its folder and of its root, the Lance storage options, its lease store and, when the
 * lease store is a DynamoDB table, that table's records (lib/log/admin/table-records.ts). What
 * `openLog` builds for a log (lib/open.ts), without the log: these commands never write events
 * through a writer, and `drop` loads no LanceDB. The AWS SDK is loaded for an s3:// root only
 * (lib/log/admin/aws.ts).
 */
import { systemClock, type Clock } from '../../clock.ts';
import { InternalError } from '../../errors.ts';
import { localLeaseStore } from '../../lease/default-local.ts';
import type { LeaseStore } from '../../lease/types.ts';
import { validateName } from '../../names.ts';
import { LocalObjectStore } from '../../storage/local.ts';
import { formatLocation, lanceStorageOptions, logLocation, logUri, parseRoot, type Env, type Location } from '../../storage/location.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { canonicalLocation } from '../../coord/choose.ts';
import type { TableRecords } from './table-records.ts';

export interface AdminPlace {
  root: Location;
  pipeline: string;
  experiment: string;
  /** The log's Lance URI (`.../datagen_checkpoints/<pipeline>/<experiment>/log.lance`), as `LanceCheckpointLog.uri`. */
  uri: string;
  /** The log's location as its sentinel in the lease table names it (lib/coord/choose.ts). */
  location: string;
  /** The log's `log.lance` folder. */
  objects: ObjectStore;
  /** The root (lists `datagen_checkpoints/...`: what exists near a log that does not). */
  rootObjects: ObjectStore;
  storageOptions: Record<string, string> | undefined;
  /** The lease store writers of this place use (an s3:// root without a table: MissingLeaseStore). */
  leases: LeaseStore;
  /** The records of the lease table `leases` is, or null when it is not a DynamoDB table. */
  records: TableRecords | null;
}

export interface OpenedPlace extends AdminPlace {
  /** Releases the clients and stores it opened (not injected ones). */
  close(): Promise<void>;
}

export interface OpenPlaceOptions {
  root: string;
  pipeline: string;
  experiment: string;
  env?: Env;
  clock?: Clock;
  /** An injected lease store (the caller owns it); default as `openLog`'s. */
  leases?: LeaseStore;
  /** The records of the injected lease store's table (with `leases` only). */
  records?: TableRecords | null;
}

export async function openPlace(o: OpenPlaceOptions): Promise<OpenedPlace> {
  const pipeline = validateName('pipeline', o.pipeline);
  const experiment = validateName('experiment', o.experiment);
  const env = o.env ?? process.env;
  const clock = o.clock ?? systemClock;
  const root = parseRoot(o.root);
  const loc = logLocation(root, pipeline, experiment);
  const uri = logUri(root, pipeline, experiment);
  const stores = await storesOf(root, loc, env, clock, o.leases === undefined);
  const leases = o.leases ?? stores.leases!;
  const records = o.leases !== undefined ? (o.records ?? null) : stores.records;
  return {
    root,
    pipeline,
    experiment,
    uri,
    location: canonicalLocation(stores.objects.baseUri),
    objects: stores.objects,
    rootObjects: stores.rootObjects,
    storageOptions: lanceStorageOptions(root, env),
    leases,
    records,
    close: stores.close,
  };
}

interface Stores {
  objects: ObjectStore;
  rootObjects: ObjectStore;
  leases: LeaseStore | null;
  records: TableRecords | null;
  close: () => Promise<void>;
}

async function storesOf(root: Location, loc: Location, env: Env, clock: Clock, withLeases: boolean): Promise<Stores> {
  if (root.kind === 'file' && loc.kind === 'file') {
    const leases = withLeases ? localLeaseStore(root.dir, clock) : null;
    return {
      objects: new LocalObjectStore(loc.dir),
      rootObjects: new LocalObjectStore(root.dir),
      leases: leases?.store ?? null,
      records: null,
      close: async () => leases?.close(),
    };
  }
  if (root.kind === 's3' && loc.kind === 's3') return (await import('./aws.ts')).s3Stores(root, loc, env, clock, withLeases);
  throw new InternalError(`root ${formatLocation(root)} and its log's place differ in kind`);
}
