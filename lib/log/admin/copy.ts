/**
 * `copyLog`: a logical copy of a log to another place (another root, pipeline or experiment):
 * every event visible when the copy's read began (lib/log/admin/copy-read.ts: acknowledged
 * events, each once, deleted items' rows left out), every column and blob, written into a new
 * base dataset at the target; then the target's deleted-seq records, its log id and base
 * markers, as a writer creating a base leaves them; then its coordination records, by the
 * injected `initRecords` (item markers, claims, the coordination record, the lease table's
 * sentinel: what lets writers write the copy). Events appended to the source while the copy
 * runs may or may not be in it.
 *
 * Refused before anything is written: the target is the source (INVALID_INPUT), anything is
 * stored at the target (INVALID_INPUT: drop it first), the source does not exist (LOG_NOT_FOUND).
 * A copy that fails part-way leaves the target with part of the data and without its base
 * marker: drop the target, then copy again. Nothing else may write the target meanwhile.
 */
import * as lancedb from '@lancedb/lancedb';
import { tableToIPC } from 'apache-arrow';
import { systemClock, type Clock } from '../../clock.ts';
import { DgclError, InvalidInputError, UnavailableError } from '../../errors.ts';
import { EVENT_SCHEMA } from '../../schema.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { DatasetSync } from '../../storage/dataset-sync.ts';
import { isObjectStoreUri } from '../../storage/location.ts';
import { DELETED_DIR, FORK_MARKER } from '../layout.ts';
import { logNotFound, listingShowsLog } from '../read/missing.ts';
import { LogReader } from '../read/reader.ts';
import { dataStorageVersion, LanceTables, type Table } from '../tables.ts';
import { commitData, committedBytes, committedTable } from '../write/lance-add.ts';
import { eachVisibleGroup, readSnapshot } from './copy-read.ts';
import type { AdminPlace } from './place.ts';

/** Rows per Lance commit of the copy, and their bytes (about), whichever is reached first. */
export const COPY_BATCH_ROWS = 65_536;
export const COPY_BATCH_BYTES = 64 * 2 ** 20;

export interface CopyOptions {
  /**
   * Writes the target's coordination records from its events, once its data is in place
   * (the coordination record, item markers, claims, the sentinel, lease epoch floors).
   */
  initRecords: (target: AdminPlace) => Promise<void>;
  clock?: Clock;
  /** Rows per commit to the target (default COPY_BATCH_ROWS). */
  batchRows?: number;
  /** ... or about this many bytes (default COPY_BATCH_BYTES). */
  batchBytes?: number;
}

export interface CopyResult {
  /** Events written to the target. */
  events: number;
  /** Items they belong to. */
  items: number;
  /** Their size as handed to Lance (Arrow IPC). */
  bytes: number;
  /** Deleted-seq records copied (`_dgcl/deleted/...`). */
  deletedSeqs: number;
}

export async function copyLog(source: AdminPlace, target: AdminPlace, o: CopyOptions): Promise<CopyResult> {
  const { initRecords } = o;
  if (typeof initRecords !== 'function') throw new InvalidInputError('initRecords must be a function', { field: 'initRecords' });
  const batchRows = o.batchRows ?? COPY_BATCH_ROWS;
  const batchBytes = o.batchBytes ?? COPY_BATCH_BYTES;
  for (const [field, v] of [['batchRows', batchRows], ['batchBytes', batchBytes]] as const) {
    if (!Number.isSafeInteger(v) || v < 1) throw new InvalidInputError(`must be a whole number >= 1, got ${v}`, { field });
  }
  if (source.location === target.location) {
    throw new InvalidInputError(`the copy's target is its source (${source.uri}): name another root, pipeline or experiment`, { field: 'to' });
  }
  await checkTargetEmpty(target);

  const clock = o.clock ?? systemClock;
  const tables = new LanceTables(source.uri, source.storageOptions, source.objects);
  const reader = new LogReader(source.objects, tables, clock);
  try {
    const snap = await readSnapshot(reader, tables);
    if (!listingShowsLog(snap.listing)) throw await logNotFound(source);
    // Again, just before the first write: the read may have taken a while.
    await checkTargetEmpty(target);
    const base = await createBase(target);
    const items = new Set<string>();
    let events = 0;
    let bytes = 0;
    try {
      await eachVisibleGroup(snap, batchRows, batchBytes, async (rows) => {
        const data = commitData(rows);
        await base.table.add(data as never);
        bytes += committedBytes(data) ?? tableToIPC(committedTable(data)).byteLength;
        events += rows.length;
        for (const r of rows) items.add(r.item_id);
      });
    } finally {
      base.close();
    }
    // Durable before the markers say the base exists (local roots; object stores are already).
    if (!isObjectStoreUri(target.uri)) await new DatasetSync(target.uri, new Set(['_dgcl'])).sync();
    const deletedSeqs = await copyDeletedSeqs(source.objects, target.objects);
    // A fork's copy is a fork too: its listings look its items' lineage up.
    const forkMarker = await source.objects.get(FORK_MARKER);
    if (forkMarker !== null) await target.objects.put(FORK_MARKER, forkMarker);
    // The log id marker, then the base marker, as a writer's first base leaves them.
    const targetTables = new LanceTables(target.uri, target.storageOptions, target.objects);
    try {
      await targetTables.ensureBase();
    } finally {
      targetTables.close();
    }
    await initRecords(target);
    return { events, items: items.size, bytes, deletedSeqs };
  } catch (e) {
    if (e instanceof DgclError) throw e;
    throw new UnavailableError(`copy of ${source.uri} to ${target.uri} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  } finally {
    reader.close();
    tables.close();
  }
}

async function checkTargetEmpty(target: AdminPlace): Promise<void> {
  const there = await target.objects.list('');
  if (there.length > 0) {
    throw new InvalidInputError(
      `the copy's target ${target.uri} exists (it holds ${there.slice(0, 5).join(', ')}${there.length > 5 ? ', ...' : ''}): copy to a place with nothing stored, or drop it first (dgcl drop)`,
      { field: 'to' },
    );
  }
}

/** The target's base dataset, new and empty, as lib/log/tables.ts creates a base (schema, file format). */
export async function createBase(target: AdminPlace): Promise<{ table: Table; close: () => void }> {
  const i = target.uri.lastIndexOf('/');
  const conn = await lancedb.connect(target.uri.slice(0, i), { storageOptions: target.storageOptions });
  try {
    const table = await conn.createEmptyTable(target.uri.slice(i + 1).replace(/\.lance$/, ''), EVENT_SCHEMA, {
      mode: 'create',
      storageOptions: { new_table_data_storage_version: dataStorageVersion(target.uri) },
    });
    return {
      table,
      close: () => {
        table.close();
        conn.close();
      },
    };
  } catch (e) {
    conn.close();
    // Made meanwhile (the check above raced another process): the target is not ours.
    if (/already exists/i.test(e instanceof Error ? e.message : String(e))) {
      throw new InvalidInputError(`the copy's target ${target.uri} was created by another process during the copy; nothing of the copy was written`, { field: 'to', cause: e });
    }
    throw e;
  }
}

/** Every deleted-seq record of the source, put at the target; returns how many. */
async function copyDeletedSeqs(from: ObjectStore, to: ObjectStore): Promise<number> {
  let n = 0;
  for (const hash of await from.list(DELETED_DIR)) {
    for (const seq of await from.list(`${DELETED_DIR}/${hash}`)) {
      await to.putIfAbsent(`${DELETED_DIR}/${hash}/${seq}`, '');
      n++;
    }
  }
  return n;
}
