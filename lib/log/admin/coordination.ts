/**
 * What a log's coordination record (`_dgcl/coordination`, lib/coord/choose.ts) says, for the
 * operator commands: the log's id, and which kind of lease store its writers use.
 */
import { CHOICE_KEY, parseCoordRecord } from '../../coord/choose.ts';
import { CorruptError, InvalidInputError } from '../../errors.ts';
import type { AdminPlace } from './place.ts';

export interface Coordination {
  /** The record's body; null: the log has none (written before records, or never chosen). */
  body: string | null;
  /** The log's id (`table <id>`, `objects <id>`, `sqlite <id> v2`), which scopes its records in the lease table. */
  id: string | null;
  /** Whether its lease keys carry the id too (a record ending in ` v2`, lib/coord/choose.ts). */
  scoped: boolean;
  /** Where its writers take leases: a DynamoDB table, local lease files, or not recorded. */
  leases: 'table' | 'local' | 'unknown';
}

export function parseCoordination(body: string | null, uri: string): Coordination {
  if (body === null) return { body, id: null, scoped: false, leases: 'unknown' };
  const r = parseCoordRecord(body);
  if (!r) {
    throw new CorruptError(
      `the coordination record ${CHOICE_KEY} of ${uri} is not one this version knows (a later version's layout?): ${JSON.stringify(body.slice(0, 80))}; this version cannot tell where its records are, so it touches nothing`,
    );
  }
  // Local lease files: a SQLite record, or objects without an id; the rest are the table's.
  const local = r.kind === 'sqlite' || (r.kind === 'objects' && r.id === null);
  return { body, id: r.id, scoped: r.scoped, leases: local ? 'local' : 'table' };
}

/** INVALID_INPUT when `place`'s lease store is not the kind the log's writers use. */
export function checkLeaseStore(place: AdminPlace, c: Coordination, command: string): void {
  if (c.leases === 'table' && place.records === null) {
    throw new InvalidInputError(
      `the log ${place.uri} takes its leases from a DynamoDB lease table, which also holds its records (${CHOICE_KEY}: "${c.body}"); ${command} it with that table (DGCL_LEASE_TABLE)`,
      { field: 'leases' },
    );
  }
  if (c.leases === 'local' && place.records !== null) {
    throw new InvalidInputError(
      `the log ${place.uri} takes its leases from local lease files (${CHOICE_KEY}: "${c.body}"), not from the DynamoDB table ${place.records.table}: leases taken there would not fence its writers`,
      { field: 'leases' },
    );
  }
}
