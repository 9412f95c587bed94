/**
 * A shard commit's rows, encoded once, added without LanceDB's per-call preparation.
 *
 * LanceDB 0.39's `Table.add(arrowTable)` reads the table's schema (a native call), rebuilds the
 * whole Arrow table in its own copy of apache-arrow (`sanitizeTable`), then encodes it. For a
 * 10-event commit that was ~1.5-2.5 ms of a ~9 ms add, on the ack's path (bench/results).
 * The rows already have the log's schema (EVENT_SCHEMA, lib/schema.ts), and Lance checks an
 * appended batch's schema against the dataset's on its side, so `add` of an `EncodedRows` hands
 * the IPC bytes straight to the native table.
 *
 * The entry point stays `table.add(...)`: whatever wraps a table (the simulation's fault and
 * scheduling proxy) sees the same call. LanceDB's `LocalTable.add` is patched once per process
 * to recognise an `EncodedRows`; anything else goes to the original. A LanceDB without that class
 * gets plain Arrow tables (`commitData`), and one whose table has no native `add` of that shape
 * gets the Arrow table through the original `add`; test/lance-add.test.ts fails in both cases,
 * so an upgrade cannot lose the fast path unnoticed.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { tableToIPC } from 'apache-arrow';
import { rowsToArrow } from '../schema.ts';
import { InternalError } from '../errors.ts';
import type { EventRow } from '../types.ts';

/**
 * Marks an EncodedRows for the patched add. A brand in the global symbol registry, not
 * `instanceof`: two copies of this module in one process (two installs of this library sharing
 * one LanceDB, a test runner's module reset) patch LanceDB once, and the patch must take every
 * copy's rows (review17 F1).
 */
const BRAND = Symbol.for('dgcl.encodedRows.v1');
const COUNTER = Symbol.for('dgcl.fastAddCount');

interface Branded {
  [BRAND]: true;
  ipc: Buffer;
  table: unknown;
}

export class EncodedRows implements Branded {
  readonly [BRAND] = true as const;
  readonly ipc: Buffer;
  readonly table: ReturnType<typeof rowsToArrow>;

  constructor(rows: readonly EventRow[]) {
    // An empty add would commit an empty Lance version; the writer never makes one.
    if (rows.length === 0) throw new InternalError('EncodedRows: no rows to commit');
    this.table = rowsToArrow(rows);
    // The IPC file format: what LanceDB's own add() hands its native side.
    const bytes = tableToIPC(this.table, 'file');
    this.ipc = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
}

const isEncoded = (data: unknown): data is Branded => typeof data === 'object' && data !== null && (data as Partial<Branded>)[BRAND] === true;

interface NativeTable {
  add?: (ipc: Buffer, mode: string, progress: undefined) => Promise<unknown>;
}
interface LocalTableProto {
  add(this: { inner?: NativeTable }, data: unknown, options?: { mode?: string }): Promise<unknown>;
  __dgclFastAdd?: boolean;
}

type Counter = { n: number };
const g = globalThis as { [COUNTER]?: Counter };
/** Adds that took the fast path in this process, by any copy of this module (tests check the patch is live). */
export const fastAddCount: Counter = (g[COUNTER] ??= { n: 0 });

function patch(proto: LocalTableProto): void {
  if (proto.__dgclFastAdd) return;
  const original = proto.add;
  proto.add = async function (this: { inner?: NativeTable }, data: unknown, options?: { mode?: string }) {
    if (!isEncoded(data)) return original.call(this, data, options);
    const inner = this.inner;
    if (typeof inner?.add !== 'function') return original.call(this, data.table, options);
    fastAddCount.n++;
    return inner.add(data.ipc, options?.mode ?? 'append', undefined);
  };
  proto.__dgclFastAdd = true;
}

// LanceDB is CommonJS and does not export LocalTable: its connections create the class of this
// file (the package's "exports" hide the subpath, so it is required by path).
const require = createRequire(import.meta.url);
const tableModule = require(path.join(path.dirname(require.resolve('@lancedb/lancedb')), 'table.js')) as { LocalTable?: { prototype: LocalTableProto } };
if (tableModule.LocalTable) patch(tableModule.LocalTable.prototype);
const patched = tableModule.LocalTable?.prototype.__dgclFastAdd === true;

/**
 * What the writer hands `table.add` for a commit: EncodedRows while the patch is live, else the
 * Arrow table (a LanceDB without this `LocalTable` would take an EncodedRows for row objects).
 */
export function commitData(rows: readonly EventRow[]): unknown {
  return patched ? new EncodedRows(rows) : rowsToArrow(rows);
}

/** The encoded size in bytes of `commitData`'s answer (null: not encoded, the patch is not live). */
export function committedBytes(data: unknown): number | null {
  return isEncoded(data) ? data.ipc.byteLength : null;
}
