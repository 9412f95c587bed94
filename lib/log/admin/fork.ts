/**
 * `fork`: a filtered copy of a log into a new experiment of its pipeline (docs/usage.md,
 * "Forking a cohort"). The selected items (with their children when asked) keep their events
 * before their first event of the fork's step (lib/log/admin/fork-plan.ts), with the same ids,
 * seqs, values and blob bytes; each gets one lineage event after them (lib/lineage.ts). Written
 * as `copyLog` writes (lib/log/admin/copy.ts): large Lance commits into a new base, then the base
 * markers, then the fork's own coordination records (`initRecords`, rehome's `init`), so the
 * forked items are written on their own from then on. The source is only read.
 *
 * The same fork again (same items, source and cut: the lineage events the target holds say so)
 * writes nothing and answers `unchanged`, also after the forked items moved on. A target holding
 * anything else is refused (INVALID_INPUT) before anything is written. A fork that fails part-way
 * leaves a target without its base marker: drop it (dgcl drop), then fork again.
 *
 * Memory: the kept events of the forked items (blob bytes included) are held at once.
 */
import { readCoordRecord } from '../../coord/choose.ts';
import { tableToIPC, type RecordBatch } from 'apache-arrow';
import type { ForkResult } from '../../api.ts';
import { DgclError, InvalidInputError, LogNotFoundError, NotFoundError, UnavailableError } from '../../errors.ts';
import { lineageJson, sameLineage } from '../../lineage.ts';
import { COLUMN_NAMES, rowsFromArrow } from '../../schema.ts';
import type { Where } from '../../select/where.ts';
import { DatasetSync } from '../../storage/dataset-sync.ts';
import { isObjectStoreUri } from '../../storage/location.ts';
import type { EventRow, ForkedFrom } from '../../types.ts';
import { FORK_MARKER } from '../layout.ts';
import type { LogReads } from '../reads.ts';
import { MAX_IN } from '../read/select-loads.ts';
import { lineageIn } from '../read/lineage.ts';
import { selectAggregates } from '../read/selected.ts';
import type { EventVisitor } from '../read/stream.ts';
import { lineageOf } from '../read/summary.ts';
import { Int64Column, Utf8Column } from '../columns.ts';
import { LanceTables, sqlIn } from '../tables.ts';
import { commitData, committedBytes, committedTable } from '../write/lance-add.ts';
import { COPY_BATCH_BYTES, COPY_BATCH_ROWS, createBase } from './copy.ts';
import { cutItem, describeStep, lineageRow, withChildren, type ItemCut, type StepRef } from './fork-plan.ts';
import type { AdminPlace } from './place.ts';

export interface ForkSpec {
  /** Exactly one of `where` and `itemIds` (checked by the caller). */
  where: Where | null;
  itemIds: string[] | null;
  fromStep: StepRef;
  children: boolean;
}

export interface ForkTarget {
  place: AdminPlace;
  /** The target's read side, or a LogNotFoundError when no log is there (`close` releases it). */
  openReads: () => Promise<{ reads: LogReads; close: () => Promise<void> }>;
  /** Writes the target's coordination records from its events (rehome's `init`). */
  initRecords: () => Promise<void>;
}

export interface ForkRunOptions {
  nowUs: () => number;
  batchRows?: number;
  batchBytes?: number;
}

export async function forkItems(src: LogReads, source: { pipeline: string; experiment: string }, target: ForkTarget, spec: ForkSpec, o: ForkRunOptions): Promise<ForkResult> {
  const place = target.place;
  if (place.pipeline !== source.pipeline) throw new InvalidInputError(`a fork stays in its pipeline ${JSON.stringify(source.pipeline)}`, { field: 'to' });
  if (place.experiment === source.experiment) {
    throw new InvalidInputError(`the fork's experiment is its source ${JSON.stringify(source.experiment)}: name another experiment`, { field: 'to.experiment' });
  }
  const ids = await chooseItems(src, spec);
  const rows = await rowsOf(src, ids, spec.fromStep);
  const cuts = ids.map((id) => {
    const mine = rows.get(id);
    if (!mine) throw new NotFoundError(`item ${JSON.stringify(id)} of ${src.uri} was deleted while the fork read it: fork again`);
    return cutItem(id, mine, spec.fromStep, source);
  });

  if ((await place.objects.list('')).length > 0) {
    await checkSameFork(place, target, cuts, spec.fromStep);
    // A fork that stopped after its data but before its records (a crash): they are made now, or
    // its writers would take the forked items for new ones.
    if ((await readCoordRecord(place.objects)) === null) await target.initRecords();
    return { uri: place.uri, items: cuts.length, events: 0, keptEvents: 0, bytes: 0, unchanged: true };
  }
  try {
    return await write(place, target, cuts, source, spec.fromStep, o);
  } catch (e) {
    if (e instanceof DgclError) throw e;
    throw new UnavailableError(`fork of ${src.uri} to ${place.uri} failed: ${e instanceof Error ? e.message : String(e)}; drop ${place.uri} (dgcl drop), then fork again`, { cause: e });
  }
}

/** The forked items' ids: the selected ones in item order, then their children. */
async function chooseItems(src: LogReads, spec: ForkSpec): Promise<string[]> {
  const aggs = await src.aggregates(null);
  let selected: string[];
  if (spec.where !== null) {
    selected = (await selectAggregates(src, aggs, spec.where)).selected.map((a) => a.itemId);
    if (selected.length === 0) throw new NotFoundError(`the filter selects no item of ${src.uri}: nothing to fork`);
  } else {
    const known = new Set(aggs.map((a) => a.itemId));
    const missing = spec.itemIds!.filter((id) => !known.has(id));
    if (missing.length > 0) {
      throw new NotFoundError(`${missing.length} of the items to fork ${missing.length === 1 ? 'is' : 'are'} not in ${src.uri}: ${missing.slice(0, 5).map((m) => JSON.stringify(m)).join(', ')}${missing.length > 5 ? ', ...' : ''}`);
    }
    selected = spec.itemIds!;
  }
  if (!spec.children) return selected;
  return withChildren(selected, new Map(aggs.map((a) => [a.itemId, lineageOf(a)])));
}

/**
 * Every event of the items, every column (blob bytes included), each event once; except events
 * of an item at or after its first event of step `k` met so far, which its cut drops anyway
 * (`cutItem` cuts again: that event may come in a later batch). Only the rows kept are made
 * into objects: they are most of the fork's reading and of its memory.
 */
async function rowsOf(src: LogReads, ids: readonly string[], k: StepRef): Promise<Map<string, EventRow[]>> {
  const wanted = new Set(ids);
  return src.scanEvents({ columns: COLUMN_NAMES, filter: ids.length <= MAX_IN ? sqlIn('item_id', ids) : null }, () => collector(wanted, k));
}

function collector(wanted: ReadonlySet<string>, k: StepRef): EventVisitor<Map<string, EventRow[]>> {
  const out = new Map<string, EventRow[]>();
  /** Each item's lowest seq of step k met so far. */
  const cuts = new Map<string, number>();
  const stepBytes = typeof k === 'string' ? Buffer.from(k, 'utf8') : new Uint8Array(0);
  return {
    batch(b: RecordBatch, keep) {
      const item = new Utf8Column(b, 'item_id');
      const seq = new Int64Column(b, 'item_seq');
      const index = typeof k === 'number' ? new Int64Column(b, 'step_index') : null;
      const name = typeof k === 'string' ? new Utf8Column(b, 'step_name') : null;
      const ofStep = (r: number) => (index ? index.get(r) === k : name!.is(r, stepBytes));
      // null: not read (a duplicate, or another item's); undefined: no item id (its conversion says CORRUPT).
      const ids: (string | null | undefined)[] = new Array(b.numRows);
      for (let r = 0; r < b.numRows; r++) {
        if (!keep(r)) {
          ids[r] = null;
          continue;
        }
        const id = item.get(r);
        ids[r] = id === null ? undefined : wanted.has(id) ? id : null;
        if (id === null || ids[r] === null || !ofStep(r)) continue;
        const s = seq.get(r);
        if (s !== null && s < (cuts.get(id) ?? Infinity)) cuts.set(id, s);
      }
      const only: number[] = [];
      for (let r = 0; r < b.numRows; r++) {
        const id = ids[r];
        if (id === null) continue;
        // Met, even when nothing of it is kept: cutItem says why such an item cannot be forked.
        if (id !== undefined && !out.has(id)) out.set(id, []);
        const s = seq.get(r);
        if (id === undefined || s === null || s < (cuts.get(id) ?? Infinity)) only.push(r);
      }
      const rows = rowsFromArrow({ numRows: b.numRows, getChild: (name: string) => b.getChild(name) } as never, only);
      for (const row of rows) out.get(row.item_id)!.push(row);
    },
    done: () => out,
  };
}

async function write(place: AdminPlace, target: ForkTarget, cuts: readonly ItemCut[], source: { pipeline: string; experiment: string }, k: StepRef, o: ForkRunOptions): Promise<ForkResult> {
  const batchRows = o.batchRows ?? COPY_BATCH_ROWS;
  const batchBytes = o.batchBytes ?? COPY_BATCH_BYTES;
  const nowUs = o.nowUs();
  const base = await createBase(place);
  let events = 0;
  let keptEvents = 0;
  let bytes = 0;
  try {
    let group: EventRow[] = [];
    let groupBytes = 0;
    const flush = async () => {
      if (group.length === 0) return;
      const data = commitData(group);
      await base.table.add(data as never);
      bytes += committedBytes(data) ?? tableToIPC(committedTable(data)).byteLength;
      events += group.length;
      group = [];
      groupBytes = 0;
    };
    for (const c of cuts) {
      for (const r of [...c.kept, lineageRow(c, place.experiment, nowUs)]) {
        group.push(r);
        groupBytes += 128 + (r.value_blob?.byteLength ?? 0) + (r.value_json?.length ?? 0) + (r.value_str?.length ?? 0);
        if (group.length >= batchRows || groupBytes >= batchBytes) await flush();
      }
      keptEvents += c.kept.length;
    }
    await flush();
  } finally {
    base.close();
  }
  if (!isObjectStoreUri(place.uri)) await new DatasetSync(place.uri, new Set(['_dgcl'])).sync();
  await place.objects.put(FORK_MARKER, JSON.stringify({ pipeline: source.pipeline, experiment: source.experiment, fromStep: k, items: cuts.length }));
  const tables = new LanceTables(place.uri, place.storageOptions, place.objects);
  try {
    await tables.ensureBase();
  } finally {
    tables.close();
  }
  await target.initRecords();
  return { uri: place.uri, items: cuts.length, events, keptEvents, bytes, unchanged: false };
}

/**
 * Returns when the target holds exactly this fork (the lineage of every item, and of no other);
 * else refuses, naming the first difference.
 */
async function checkSameFork(place: AdminPlace, target: ForkTarget, cuts: readonly ItemCut[], k: StepRef): Promise<void> {
  const refuse = (why: string): never => {
    throw new InvalidInputError(`the fork's target ${place.uri} ${why}; a fork goes to a new experiment (or one holding this very fork): fork to another experiment, or drop it first (dgcl drop)`, { field: 'to.experiment' });
  };
  let opened;
  try {
    opened = await target.openReads();
  } catch (e) {
    if (e instanceof LogNotFoundError) refuse('holds data but no log (a copy or fork that stopped part-way?)');
    throw e;
  }
  let held: Map<string, ForkedFrom>;
  try {
    held = await lineageIn(opened.reads);
  } catch (e) {
    if (e instanceof LogNotFoundError) refuse('holds data but no log (a copy or fork that stopped part-way?)');
    throw e;
  } finally {
    await opened.close();
  }
  if (held.size === 0) refuse('holds a log that is not a fork');
  for (const c of cuts) {
    const h = held.get(c.itemId);
    if (!h) return refuse(`is another fork: it does not hold item ${JSON.stringify(c.itemId)}`);
    if (!sameLineage(h, c.lineage)) {
      refuse(`holds item ${JSON.stringify(c.itemId)} from another source or cut (${lineageJson(h)}; this fork from ${describeStep(k)} would keep ${lineageJson(c.lineage)})`);
    }
  }
  if (held.size !== cuts.length) {
    const mine = new Set(cuts.map((c) => c.itemId));
    const other = [...held.keys()].find((id) => !mine.has(id));
    refuse(`is another fork: it holds item ${JSON.stringify(other)}, which this fork does not select`);
  }
}
