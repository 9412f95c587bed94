/**
 * Which completed step is an item's cursor (where it resumes): the STEP_COMPLETED that comes last
 * in step order, i.e. the highest iteration, then the highest step index within it, then the
 * latest in the log (item_seq, event_id). A missing iteration or step index counts below any
 * number, so steps named only (no index, no iteration) order by the log alone.
 *
 * Not simply the latest in the log: appends of valid batches are always written or answered
 * duplicate, and a batch can arrive after a later step of its item (a retry after an unknown
 * outcome, an at-least-once redelivery, a standard SQS queue). Such a batch lands at a higher
 * seq; ordered by seq, it would move the cursor back and a resume would run completed steps again.
 *
 * Shared by the fold (lib/fold.ts), the listing aggregates (lib/log/read/summary.ts), the report
 * (lib/report/aggregate.ts) and durable steps (lib/steps.ts): they must agree.
 */

/** Sign of (iteration, stepIndex) of a against b, nulls lowest; 0 when both are equal (then the log order decides). */
export function compareStepRank(aIteration: number | null, aIndex: number | null, bIteration: number | null, bIndex: number | null): number {
  const it = compareNullable(aIteration, bIteration);
  return it !== 0 ? it : compareNullable(aIndex, bIndex);
}

function compareNullable(a: number | null, b: number | null): number {
  if (a === b) return 0;
  if (a === null) return -1;
  if (b === null) return 1;
  return a < b ? -1 : 1;
}
