/**
 * `report({compare})`: the source's report beside a fork made from it. The fork's lineage
 * (lib/log/read/lineage.ts) names, per forked item, the source item it came from; only lineage
 * naming this source counts, so the page compares the same cohort on both sides. Each side:
 * status counts, per-step pass rates and failures (from the report's own pass,
 * lib/report/aggregate.ts) and, with `field`, the distribution of that numeric field's final
 * values (read with loadFields: one scan of that field's events).
 */
import { InvalidInputError } from '../errors.ts';
import type { ForkedFrom } from '../types.ts';
import { lineageIn } from '../log/read/lineage.ts';
import { loadFields, MAX_IN } from '../log/read/select-loads.ts';
import type { EventSource } from '../log/read/source.ts';
import { onlyItems } from '../log/read/selected.ts';
import { sqlIn } from '../log/tables.ts';
import { REPORT_COLUMNS, ReportVisitor, type Aggregate } from './aggregate.ts';
import { quantile } from './figures.ts';
import type { CompareSide, FieldDistribution } from './model.ts';

/** `<pipeline>` and `<experiment>` from `.../<pipeline>/<experiment>/log.lance`. */
export function namesOf(uri: string): { pipeline: string; experiment: string } {
  const parts = uri.replace(/\/+$/, '').split('/');
  const n = parts.length;
  return { pipeline: parts[n - 3] ?? '', experiment: parts[n - 2] ?? '' };
}

/** The fork's items made from the source at `sourceUri` (fork item id → source item id); INVALID_INPUT when none. */
export async function cohortOf(fork: EventSource, forkUri: string, sourceUri: string): Promise<Map<string, string>> {
  const src = namesOf(sourceUri);
  const all: Map<string, ForkedFrom> = await lineageIn(fork);
  const out = new Map<string, string>();
  for (const [id, f] of all) if (f.pipeline === src.pipeline && f.experiment === src.experiment) out.set(id, f.itemId);
  if (out.size === 0) {
    const other = [...new Set([...all.values()].map((f) => `${f.pipeline}/${f.experiment}`))].sort();
    throw new InvalidInputError(
      `experiment ${JSON.stringify(namesOf(forkUri).experiment)} (${forkUri}) is not a fork of ${src.pipeline}/${src.experiment}: ` +
        (other.length > 0 ? `its items were forked from ${other.join(', ')}` : 'it holds no forked item') +
        '; name a fork made from this experiment (dgcl fork --to-experiment)',
      { field: 'compare' },
    );
  }
  return out;
}

/** The report's pass over `ids` only. */
export async function aggregateOf(src: EventSource, ids: ReadonlySet<string>, maxItems: number): Promise<Aggregate> {
  const list = [...ids];
  const filter = list.length <= MAX_IN ? (list.length > 0 ? sqlIn('item_id', list) : 'false') : null;
  return src.scanEvents({ columns: REPORT_COLUMNS, filter }, () => onlyItems(ids, new ReportVisitor(maxItems)));
}

/** Count, min, p50, p90, max and mean of the items' final numeric values of `field`. */
export async function fieldDistribution(src: EventSource, ids: readonly string[], field: string): Promise<FieldDistribution> {
  const fields = ids.length > 0 ? await loadFields(src, ids, [field]) : new Map<string, Record<string, unknown>>();
  const values: number[] = [];
  for (const id of ids) {
    const v = fields.get(id)?.[field];
    if (typeof v === 'number' && Number.isFinite(v)) values.push(v);
  }
  return distribution(field, values, ids.length - values.length);
}

/** Pure: the figures of `values` (`missing`: items without a numeric value). */
export function distribution(name: string, values: number[], missing: number): FieldDistribution {
  const d = [...values].sort((a, b) => a - b);
  const n = d.length;
  return {
    name,
    count: n,
    missing,
    min: n ? d[0]! : null,
    p50: quantile(d, 0.5),
    p90: quantile(d, 0.9),
    max: n ? d[n - 1]! : null,
    mean: n ? d.reduce((a, b) => a + b, 0) / n : null,
  };
}

/** One side of the comparison from its pass. */
export function sideOf(uri: string, agg: Aggregate, field: FieldDistribution | null): CompareSide {
  return {
    experiment: namesOf(uri).experiment,
    uri,
    itemCount: agg.itemCount,
    events: agg.events,
    status: agg.status,
    steps: agg.steps.map((s) => ({
      name: s.name,
      index: s.index,
      itemsPassed: s.itemsPassed,
      passRate: agg.itemCount > 0 ? s.itemsPassed / agg.itemCount : null,
      failures: s.failures,
    })),
    failures: agg.failures.map((f) => ({ errorType: f.errorType, events: f.events, items: f.items, failedNow: f.failedNow })),
    field,
  };
}
