/**
 * `report(log)`: one self-contained HTML page about an experiment, from the log alone. Two kinds
 * of read, both streaming over light columns (no value or blob column): one pass over every
 * event for the figures and the item records (lib/report/aggregate.ts), then the listed items'
 * trajectories by item id (lib/report/trajectories.ts); plus `stats()` for the shard picture.
 * With `where`, the items it selects are chosen first (lib/log/read/selected.ts) and the pass
 * counts only their events: every figure of the page is of them. With `snapshot`, every read is
 * of the state that snapshot holds (lib/log/snapshot/view.ts), and the page says which. With
 * `compare`, the page is of the items a fork was made from, beside the fork (lib/report/compare.ts).
 */
import { writeFile } from 'node:fs/promises';
import { systemClock, type Clock } from '../clock.ts';
import { InvalidInputError } from '../errors.ts';
import { shardLabel, type CheckpointLog } from '../api.ts';
import { readsOf } from '../log/reads.ts';
import { loadFields } from '../log/read/select-loads.ts';
import type { EventSource } from '../log/read/source.ts';
import { checkSnapshotName } from '../log/snapshot/record.ts';
import { SnapshotView } from '../log/snapshot/view.ts';
import { selectedAggregates } from '../log/read/selected.ts';
import { checkWhere } from '../select/check.ts';
import { formatWhere } from '../select/format.ts';
import type { Where } from '../select/where.ts';
import type { Env } from '../storage/location.ts';
import { formatTarget, parseTarget, writeTarget } from '../export/output.ts';
import { isHashedThreadItem } from '../langgraph/view.ts';
import { THREAD_ID_FIELD } from '../langgraph/records.ts';
import { REPORT_COLUMNS, ReportVisitor, STEP_TIME } from './aggregate.ts';
import { aggregateOf, cohortOf, fieldDistribution, namesOf, sideOf } from './compare.ts';
import type { CompareData, ReportData } from './model.ts';
import { renderHtml } from './render.ts';
import { lightTrajectories } from './trajectories.ts';

export interface ReportOptions {
  /** Write the page here: a local path or `s3://bucket/key`. Without it only the result holds it. */
  out?: string;
  /** Items listed (with trajectories) at most; failed and in-progress first when there are more. Default 5,000. */
  maxItems?: number;
  /** The page's title (default `<pipeline> / <experiment>` from the log's URI). */
  title?: string;
  /** Report only the items this filter selects (docs/usage.md, "Selecting items"); the page says which. */
  where?: Where;
  /** Report the state snapshot `snapshot` holds (docs/usage.md, "Snapshots"); the page says which. */
  snapshot?: string;
  /**
   * Report only the items the fork `log` (an experiment of this pipeline) was made from, beside
   * the fork's items made from them; with `field`, both sides' distribution of that numeric field.
   */
  compare?: { log: CheckpointLog; field?: string };
  clock?: Clock;
  env?: Env;
}

export interface ReportResult {
  html: string;
  data: ReportData;
  /** Where it was written, when `out` was given. */
  out?: string;
}

export const DEFAULT_REPORT_ITEMS = 5000;

export async function report(log: CheckpointLog, o: ReportOptions = {}): Promise<ReportResult> {
  const reads = readsOf(log);
  const maxItems = o.maxItems ?? DEFAULT_REPORT_ITEMS;
  if (!Number.isSafeInteger(maxItems) || maxItems < 0) {
    throw new InvalidInputError(`maxItems must be a non-negative integer, got ${JSON.stringify(o.maxItems)}`, { field: 'maxItems' });
  }
  // Checked before any read, so bad input fails at once and writes nothing.
  const target = o.out !== undefined ? parseTarget(o.out, 'out') : null;
  const where = o.where === undefined ? null : checkWhere(o.where, 'where');
  if (o.snapshot !== undefined) checkSnapshotName(o.snapshot, 'snapshot');
  const field = o.compare?.field;
  if (field !== undefined && (typeof field !== 'string' || field.length === 0)) {
    throw new InvalidInputError(`must be a non-empty field name, got ${JSON.stringify(field)}`, { field: 'compare.field' });
  }
  const clock = o.clock ?? systemClock;
  const src: EventSource = o.snapshot === undefined ? reads : await reads.openSnapshot(o.snapshot);
  const scan = src.scanEvents.bind(src);
  const forkReads = o.compare ? readsOf(o.compare.log) : null;
  // Fork item id -> the source item it was made from; only lineage naming this log counts.
  const cohort = forkReads ? await cohortOf(forkReads, forkReads.uri, reads.uri) : null;
  let agg;
  let chosen: string[] | null = null;
  if (where || cohort) {
    let ids = where ? (await selectedAggregates(src, where)).map((a) => a.itemId) : null;
    if (cohort) {
      const from = new Set(cohort.values());
      ids = ids ? ids.filter((id) => from.has(id)) : [...from];
    }
    chosen = ids!;
    agg = await aggregateOf(src, new Set(chosen), maxItems);
  } else {
    agg = await scan({ columns: REPORT_COLUMNS }, () => new ReportVisitor(maxItems));
  }
  const lineage = await reads.lineage.of(src, agg.items.map((i) => i.id));
  for (const i of agg.items) {
    const f = lineage.get(i.id);
    if (f) i.forkedFrom = f;
  }
  const threads = agg.items.filter((i) => i.name !== null);
  const trajectories = await lightTrajectories(scan, agg.items.map((i) => i.id), new Set(threads.map((i) => i.id)));
  // A thread whose id could not be its item's id: its name says the thread id (field thread_id),
  // read for all of them at once (an item deleted since the pass has none).
  const hashed = threads.filter((t) => isHashedThreadItem(t.id));
  const threadIds = hashed.length > 0 ? await loadFields(src, hashed.map((t) => t.id), [THREAD_ID_FIELD]) : new Map<string, Record<string, unknown>>();
  for (const t of hashed) {
    const threadId = threadIds.get(t.id)?.[THREAD_ID_FIELD];
    if (typeof threadId === 'string') t.name = `LangGraph thread ${JSON.stringify(threadId)}`;
  }
  let compare: CompareData | undefined;
  if (forkReads && cohort && chosen) {
    const from = new Set(chosen);
    const forkIds = [...cohort].filter(([, f]) => from.has(f)).map(([id]) => id);
    const forkAgg = await aggregateOf(forkReads, new Set(forkIds), 0);
    compare = {
      source: sideOf(reads.uri, agg, field === undefined ? null : await fieldDistribution(src, chosen, field)),
      fork: sideOf(forkReads.uri, forkAgg, field === undefined ? null : await fieldDistribution(forkReads, forkIds, field)),
    };
  }
  const stats = await src.stats();
  const data: ReportData = {
    title: (o.title ?? titleOf(reads.uri)) + (where ? ` (where ${formatWhere(where)})` : '') + (o.snapshot !== undefined ? ` (snapshot ${o.snapshot})` : '') +
      (forkReads ? ` (compared with fork ${namesOf(forkReads.uri).experiment})` : ''),
    stepTime: STEP_TIME,
    uri: reads.uri,
    where: where && formatWhere(where),
    snapshot: src instanceof SnapshotView ? { name: src.name, createdAtMs: src.record.createdAtMs, baseVersion: src.record.baseVersion, tailRows: src.record.tailRows } : null,
    generatedAtMs: clock.nowMs(),
    events: agg.events,
    itemCount: agg.itemCount,
    status: agg.status,
    progress: agg.progress,
    steps: agg.steps,
    failures: agg.failures,
    items: agg.items,
    itemsOmitted: agg.itemsOmitted,
    trajectories,
    stats: { ...stats, shards: stats.shards.map((s) => ({ ...s, label: shardLabel(s) })) },
    ...(compare ? { compare } : {}),
  };
  const html = renderHtml(data);
  if (!target) return { html, data };
  await writeTarget(target, o.env ?? process.env, (p) => writeFile(p, html));
  return { html, data, out: formatTarget(target) };
}

/** `<pipeline> / <experiment>` from `.../datagen_checkpoints/<pipeline>/<experiment>/log.lance`. */
function titleOf(uri: string): string {
  const parts = uri.split('/');
  const n = parts.length;
  return n >= 3 ? `dgcl report: ${parts[n - 3]} / ${parts[n - 2]}` : `dgcl report: ${uri}`;
}
