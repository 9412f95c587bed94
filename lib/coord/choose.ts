/**
 * Which store a log keeps its item markers and claims in, decided once per log and recorded in
 * the log itself (`_dgcl/coordination`), so every process agrees whatever it was configured
 * with, and an upgrade never moves records a running writer trusts:
 *  - `table <logId>`: the lease table (lib/coord/dynamo.ts), keys scoped by the log's id. Chosen
 *    for a log that has nothing committed yet, when the lease store can hold records;
 *  - `objects`: objects beside the log. Chosen for local lease files, and for a log that already
 *    has data written before the table held them (its markers are objects: a writer that looked
 *    only in the table would take an item with events for a new one).
 * The record is created with a conditional put: two processes proposing at once both read the
 * winner's. A log deleted and made again gets a new id, so no record of the old one is met.
 */
import { randomUUID } from 'node:crypto';
import { CorruptError, InvalidInputError, UnavailableError } from '../errors.ts';
import { META_DIR } from '../log/layout.ts';
import type { LeaseStore } from '../lease/types.ts';
import type { ObjectStore } from '../storage/objects.ts';
import { ObjectCoordStore } from './objects.ts';
import type { CoordStore, CoordTable } from './types.ts';

export const CHOICE_KEY = '_dgcl/coordination';

export function coordTableOf(leases: LeaseStore): CoordTable | null {
  const t = leases as Partial<CoordTable>;
  return typeof t.coordStore === 'function' ? (t as CoordTable) : null;
}

/**
 * The log's coordination store, creating its choice record if the log has none yet; or, with
 * `create: false` (a write's validation pass, which must write nothing), the objects store when
 * there is no record: no record in the table can exist before the choice record names it.
 */
export async function chooseCoordStore(objects: ObjectStore, table: CoordTable | null, logName: string, o: { create: boolean }): Promise<CoordStore> {
  let body = await objects.get(CHOICE_KEY);
  if (body === null) {
    if (!o.create) return new ObjectCoordStore(objects);
    // Nothing listed in the meta folder: no generation was ever created (a commit's first step)
    // and there is no base, so no item has an event anywhere.
    const fresh = table !== null && (await objects.list(META_DIR)).length === 0;
    await objects.putIfAbsent(CHOICE_KEY, fresh ? `table ${randomUUID()}` : 'objects');
    body = await objects.get(CHOICE_KEY);
    if (body === null) throw new UnavailableError(`the coordination record ${CHOICE_KEY} of ${objects.baseUri} vanished after it was written`);
  }
  if (body === 'objects') return new ObjectCoordStore(objects);
  const m = /^table ([0-9a-f-]{36})$/.exec(body);
  if (!m) throw new CorruptError(`the coordination record ${CHOICE_KEY} of ${objects.baseUri} is neither "objects" nor "table <id>": ${JSON.stringify(body.slice(0, 80))}`);
  if (!table) {
    throw new InvalidInputError(
      `the log ${objects.baseUri} keeps its item markers and claims in the DynamoDB lease table; open it with that table's lease store (DGCL_LEASE_TABLE) to write or maintain it`,
      { field: 'leases' },
    );
  }
  return table.coordStore(`${logName}/${m[1]}`);
}
