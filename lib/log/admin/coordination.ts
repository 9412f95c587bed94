/**
 * What a log's coordination record (`_dgcl/coordination`, lib/coord/choose.ts) says, for the
 * operator commands: the log's id, and which kind of lease store its writers use.
 */
import { CHOICE_KEY } from '../../coord/choose.ts';
import { CorruptError, InvalidInputError } from '../../errors.ts';
import type { AdminPlace } from './place.ts';

export interface Coordination {
  /** The record's body; null: the log has none (written before records, or never chosen). */
  body: string | null;
  /** The log's id (`table <id>`, `objects <id>`), which scopes its records in the lease table. */
  id: string | null;
  /** Where its writers take leases: a DynamoDB table, local lease files, or not recorded. */
  leases: 'table' | 'local' | 'unknown';
}

export function parseCoordination(body: string | null, uri: string): Coordination {
  if (body === null) return { body, id: null, leases: 'unknown' };
  if (body === 'objects' || body === 'sqlite') return { body, id: null, leases: 'local' };
  const m = /^(table|objects) ([0-9a-f-]{36})$/.exec(body);
  if (!m) {
    throw new CorruptError(
      `the coordination record ${CHOICE_KEY} of ${uri} is not "objects", "sqlite", "objects <id>" or "table <id>" (a later version's layout?): ${JSON.stringify(body.slice(0, 80))}; this version cannot tell where its records are, so it touches nothing`,
    );
  }
  return { body, id: m[2]!, leases: 'table' };
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
