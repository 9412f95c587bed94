/**
 * `fork`: a filtered copy of a log into a new experiment of its pipeline (docs/usage.md,
 * "Forking a cohort"). The selected items (with their children when asked) keep their events
 * before their first event of the fork's step (lib/log/admin/fork-plan.ts), with the same ids,
 * seqs, values and blob bytes; each gets one lineage event after them (lib/lineage.ts). Written
 * as `copyLog` writes (lib/log/admin/copy.ts): large Lance commits into a new base, then the base
 * markers, then the fork's own coordination records (`initRecords`, rehome's `init`), so the
 * forked items are written on their own from then on. The source is only read.
 *
 * Bulk work, done in Arrow: the rows kept are copied out of the batches read (lib/log/admin/fork-read.ts)
 * and gathered into the commits (lib/log/gather.ts), never made into objects; the records are
 * those of the rows committed (item hashes, checkpoint spans), handed to `init`, which then does
 * not read the events again.
 *
 * The same fork again (same items, source and cut: the lineage events the target holds say so)
 * writes nothing and answers `unchanged`, also after the forked items moved on. A target holding
 * anything else is refused (INVALID_INPUT) before anything is written. A fork that fails part-way
 * leaves a target without its base marker: drop it (dgcl drop), then fork again.
 *
 * Memory: the kept events of the forked items (blob bytes included) are held at once.
 */
import { readCoordRecord } from '../../coord/choose.ts';
import { Table, tableToIPC, type RecordBatch } from 'apache-arrow';
import type { ForkResult } from '../../api.ts';
import { DgclError, InvalidInputError, LogNotFoundError, NotFoundError, UnavailableError } from '../../errors.ts';
import { lineageJson, sameLineage } from '../../lineage.ts';
import { COLUMN_NAMES, rowsToArrow } from '../../schema.ts';
import type { Where } from '../../select/where.ts';
import { DatasetSync } from '../../storage/dataset-sync.ts';
import { isObjectStoreUri } from '../../storage/location.ts';
import type { EventRow, ForkedFrom } from '../../types.ts';
import { FORK_MARKER, itemHash } from '../layout.ts';
import type { LogReads } from '../reads.ts';
import { MAX_IN } from '../read/select-loads.ts';
import { lineageIn } from '../read/lineage.ts';
import { selectAggregates } from '../read/selected.ts';
import { lineageOf } from '../read/summary.ts';
import { Int64Column, Utf8Column } from '../columns.ts';
import { LanceTables, sqlIn } from '../tables.ts';
import { gatherEvents } from '../gather.ts';
import { commitTable, committedBytes, committedTable } from '../write/lance-add.ts';
import { COPY_BATCH_BYTES, COPY_BATCH_ROWS, createBase } from './copy.ts';
import { describeStep, lineageOfCut, lineageRow, withChildren, type LineageSource, type StepRef } from './fork-plan.ts';
import { ChunkColumns, cutItems, forkReader, lineageSource, type ForkCuts } from './fork-read.ts';
import type { CheckpointSpan, RehomeRecords } from './rehome.ts';
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
  /** Writes the target's coordination records (rehome's `init`): from `known`, else from its events. */
  initRecords: (known?: RehomeRecords) => Promise<void>;
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
  const read = await src.scanEvents({ columns: COLUMN_NAMES, filter: ids.length <= MAX_IN ? sqlIn('item_id', ids) : null }, () => forkReader(ids, spec.fromStep));
  const cuts = cutItems(read, ids, spec.fromStep, src.uri);
  const cols = new ChunkColumns(cuts.chunks);
  const kept = ids.map((id, i) => lineageSource(cuts, i, id, cols));
  const lineages = kept.map((c) => lineageOfCut(c, source));

  if ((await place.objects.list('')).length > 0) {
    await checkSameFork(place, target, lineages, spec.fromStep);
    // A fork that stopped after its data but before its records (a crash): they are made now, or
    // its writers would take the forked items for new ones.
    if ((await readCoordRecord(place.objects)) === null) await target.initRecords();
    return { uri: place.uri, items: ids.length, events: 0, keptEvents: 0, bytes: 0, unchanged: true };
  }
  try {
    return await write(place, target, { ids, cuts, cols, kept, lineages }, source, spec.fromStep, o);
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

/** The forked items (in order), their kept events, and what their lineage events take. */
interface Plan {
  ids: readonly string[];
  cuts: ForkCuts;
  cols: ChunkColumns;
  kept: readonly LineageSource[];
  lineages: readonly ForkedFrom[];
}

/** Each row's size as the commits reckon it: a fixed part and its value's bytes. */
const ROW_BYTES = 128;

async function write(place: AdminPlace, target: ForkTarget, plan: Plan, source: { pipeline: string; experiment: string }, k: StepRef, o: ForkRunOptions): Promise<ForkResult> {
  const batchRows = o.batchRows ?? COPY_BATCH_ROWS;
  const batchBytes = o.batchBytes ?? COPY_BATCH_BYTES;
  const nowUs = o.nowUs();
  const { cuts, cols } = plan;
  const records: RehomeRecords = { items: new Set(plan.ids.map(itemHash)), checkpoints: new Map() };
  const base = await createBase(place);
  let events = 0;
  let bytes = 0;
  // One commit is written while the next is gathered; its failure is met before the next starts.
  let committing: Promise<unknown> | null = null;
  try {
    const lineageSrc = cuts.chunks.length;
    // The group's rows: row `row[i]` of source `src[i]` (a chunk read, or the group's lineage rows).
    const src = new Int32Array(batchRows);
    const row = new Int32Array(batchRows);
    let n = 0;
    let lineageRows: EventRow[] = [];
    let groupBytes = 0;
    const flush = async () => {
      if (n === 0) return;
      const sources = lineageRows.length > 0 ? [...cuts.chunks, rowsToArrow(lineageRows).batches[0]!] : cuts.chunks;
      const batch = gatherEvents(sources, src, row, n);
      spansOf(batch, records.checkpoints);
      const data = commitTable(new Table([batch]));
      events += n;
      n = 0;
      lineageRows = [];
      groupBytes = 0;
      await committing;
      committing = base.table.add(data as never);
      committing.catch(() => undefined); // met at the next await of it
      bytes += committedBytes(data) ?? tableToIPC(committedTable(data)).byteLength;
    };
    /** Adds a row to the group; true when the group is full. */
    const add = (s: number, r: number, size: number): boolean => {
      src[n] = s;
      row[n++] = r;
      groupBytes += ROW_BYTES + size;
      return n >= batchRows || groupBytes >= batchBytes;
    };
    for (let i = 0; i < plan.ids.length; i++) {
      for (let j = cuts.start[i]!; j < cuts.start[i + 1]!; j++) {
        const c = cols.of(cuts.chunk[j]!);
        const r = cuts.row[j]!;
        if (add(cuts.chunk[j]!, r, c.blob[r + 1]! - c.blob[r]! + c.json[r + 1]! - c.json[r]! + c.str[r + 1]! - c.str[r]!)) await flush();
      }
      const lineage = lineageRow(plan.kept[i]!, plan.lineages[i]!, place.experiment, nowUs);
      lineageRows.push(lineage);
      if (add(lineageSrc, lineageRows.length - 1, Buffer.byteLength(lineage.value_json!))) await flush();
    }
    await flush();
    await committing;
  } finally {
    // Not closed under a commit still running (a gather that failed meanwhile).
    await Promise.resolve(committing).catch(() => undefined);
    base.close();
  }
  if (!isObjectStoreUri(place.uri)) await new DatasetSync(place.uri, new Set(['_dgcl'])).sync();
  await place.objects.put(FORK_MARKER, JSON.stringify({ pipeline: source.pipeline, experiment: source.experiment, fromStep: k, items: plan.ids.length }));
  const tables = new LanceTables(place.uri, place.storageOptions, place.objects);
  try {
    await tables.ensureBase();
  } finally {
    tables.close();
  }
  await target.initRecords(records);
  return { uri: place.uri, items: plan.ids.length, events, keptEvents: events - plan.ids.length, bytes, unchanged: false };
}

/** The claims' spans of a commit's rows, added to `spans` (runs of one checkpoint decoded once). */
function spansOf(b: RecordBatch, spans: Map<string, CheckpointSpan>): void {
  const checkpoint = new Utf8Column(b, 'checkpoint_id');
  const seq = new Int64Column(b, 'item_seq');
  let span: CheckpointSpan | undefined;
  for (let r = 0; r < b.numRows; r++) {
    const s = seq.get(r)!;
    if (r === 0 || !checkpoint.same(r, r - 1)) {
      const id = checkpoint.get(r)!;
      span = spans.get(id);
      if (!span) {
        spans.set(id, { events: 1, firstSeq: s, lastSeq: s });
        span = spans.get(id);
        continue;
      }
    }
    span!.events++;
    span!.firstSeq = Math.min(span!.firstSeq, s);
    span!.lastSeq = Math.max(span!.lastSeq, s);
  }
}

/**
 * Returns when the target holds exactly this fork (the lineage of every item, and of no other);
 * else refuses, naming the first difference.
 */
async function checkSameFork(place: AdminPlace, target: ForkTarget, lineages: readonly ForkedFrom[], k: StepRef): Promise<void> {
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
  for (const l of lineages) {
    const h = held.get(l.itemId);
    if (!h) return refuse(`is another fork: it does not hold item ${JSON.stringify(l.itemId)}`);
    if (!sameLineage(h, l)) {
      refuse(`holds item ${JSON.stringify(l.itemId)} from another source or cut (${lineageJson(h)}; this fork from ${describeStep(k)} would keep ${lineageJson(l)})`);
    }
  }
  if (held.size !== lineages.length) {
    const mine = new Set(lineages.map((l) => l.itemId));
    const other = [...held.keys()].find((id) => !mine.has(id));
    refuse(`is another fork: it holds item ${JSON.stringify(other)}, which this fork does not select`);
  }
}
