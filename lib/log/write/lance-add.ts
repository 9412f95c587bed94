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
import { Table, tableToIPC } from 'apache-arrow';
import { rowsToArrow } from '../../schema.ts';
import { InternalError } from '../../errors.ts';
import type { EventRow } from '../../types.ts';

/**
 * Marks an EncodedRows for the patched add. A brand in the global symbol registry, not
 * `instanceof`: two copies of this module in one process (two installs of this library sharing
 * one LanceDB, a test runner's module reset) patch LanceDB once, and the patch must take every
 * copy's rows.
 */
const BRAND = Symbol.for('dgcl.encodedRows.v1');
const COUNTER = Symbol.for('dgcl.fastAddCount');
const MERGE_COUNTER = Symbol.for('dgcl.fastMergeCount');

interface Branded {
  [BRAND]: true;
  ipc: Buffer;
  table: unknown;
}

/** IPC bytes of `table` (the file format: what LanceDB's own add() hands its native side). */
function fileIpc(table: Parameters<typeof tableToIPC>[0]): Buffer {
  const bytes = tableToIPC(table, 'file');
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export class EncodedRows implements Branded {
  readonly [BRAND] = true as const;
  readonly ipc: Buffer;
  readonly table: ReturnType<typeof rowsToArrow>;

  constructor(rows: readonly EventRow[]) {
    // An empty add would commit an empty Lance version; the writer never makes one.
    if (rows.length === 0) throw new InternalError('EncodedRows: no rows to commit');
    this.table = rowsToArrow(rows);
    this.ipc = fileIpc(this.table);
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
const g = globalThis as { [COUNTER]?: Counter; [MERGE_COUNTER]?: Counter };
/** Adds that took the fast path in this process, by any copy of this module (tests check the patch is live). */
export const fastAddCount: Counter = (g[COUNTER] ??= { n: 0 });
/** Merges (mergeInsert) handed encoded bytes, likewise. */
export const fastMergeCount: Counter = (g[MERGE_COUNTER] ??= { n: 0 });

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

interface ArrowModule {
  fromDataToBuffer?: (data: unknown, ...rest: unknown[]) => Promise<Buffer>;
  __dgclEncoded?: boolean;
}

/**
 * LanceDB's `mergeInsert(...).execute(data)` turns `data` into IPC bytes through this module
 * function (looked up at each call), after rebuilding the table in its own copy of apache-arrow:
 * for a writer's merge of a 46 MB generation (163,840 rows) ~1-1.5 s on the event loop. Encoded
 * bytes are handed on as they are; anything else goes to the original.
 */
function patchMerge(mod: ArrowModule): void {
  const original = mod.fromDataToBuffer;
  if (mod.__dgclEncoded || typeof original !== 'function') return;
  mod.fromDataToBuffer = async function (this: unknown, data: unknown, ...rest: unknown[]) {
    if (!isEncoded(data)) return original.call(this, data, ...rest);
    fastMergeCount.n++;
    return data.ipc;
  };
  mod.__dgclEncoded = true;
}

// LanceDB is CommonJS and does not export LocalTable: its connections create the class of this
// file (the package's "exports" hide the subpath, so it is required by path).
const require = createRequire(import.meta.url);
const lancedbDir = path.dirname(require.resolve('@lancedb/lancedb'));
const tableModule = require(path.join(lancedbDir, 'table.js')) as { LocalTable?: { prototype: LocalTableProto } };
if (tableModule.LocalTable) patch(tableModule.LocalTable.prototype);
const patched = tableModule.LocalTable?.prototype.__dgclFastAdd === true;
const arrowModule = require(path.join(lancedbDir, 'arrow.js')) as ArrowModule;
patchMerge(arrowModule);
const mergePatched = arrowModule.__dgclEncoded === true;

/**
 * What the writer hands `table.add` for a commit: EncodedRows while the patch is live, else the
 * Arrow table (a LanceDB without this `LocalTable` would take an EncodedRows for row objects).
 */
export function commitData(rows: readonly EventRow[]): unknown {
  return patched ? new EncodedRows(rows) : rowsToArrow(rows);
}

/**
 * `commitData` of rows already in Arrow: `table` must be in EVENT_SCHEMA (lib/log/gather.ts makes
 * such batches). For bulk writes that never held their rows as objects (a fork's commits).
 */
export function commitTable(table: Table): unknown {
  if (table.numRows === 0) throw new InternalError('commitTable: no rows to commit');
  if (!patched) return table;
  const encoded: Branded = { [BRAND]: true, ipc: fileIpc(table), table };
  return encoded;
}

/** The encoded size in bytes of `commitData`'s answer (null: not encoded, the patch is not live). */
export function committedBytes(data: unknown): number | null {
  return isEncoded(data) ? data.ipc.byteLength : null;
}

/** The Arrow table of `commitData`'s answer (columnar: what a writer keeps of a large commit for its merge). */
export function committedTable(data: unknown): Table {
  return isEncoded(data) ? (data.table as Table) : (data as Table);
}

/**
 * What a merge hands `mergeInsert(...).execute`: `rows` as one record batch, then the batches of
 * `tables`, in one IPC file handed to the native side as bytes (`patchMerge`); where that patch
 * is not live, the Arrow table (LanceDB encodes it again). Encoding costs per batch (~0.2 ms for
 * 32 columns) and per byte: small commits are best given as rows, large ones as their tables.
 * A 46 MB generation of 64 commits: ~0.2-0.3 s to prepare and ~0.4 s to merge, against
 * ~0.5-0.8 s and ~1.5-2.2 s from its rows through LanceDB's encoding; 64 commits of 10 rows: 3.8
 * ms as rows, 13.7 ms as tables (docs/design/performance.md, "The writer's merges").
 */
export function mergeData(rows: readonly EventRow[], tables: readonly Table[]): unknown {
  const table = new Table([...(rows.length > 0 ? rowsToArrow(rows).batches : []), ...tables.flatMap((t) => t.batches)]);
  if (!mergePatched) return table;
  const encoded: Branded = { [BRAND]: true, ipc: fileIpc(table), table };
  return encoded;
}
