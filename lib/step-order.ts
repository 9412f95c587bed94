/**
 * Which completed step is an item's cursor (where it resumes): the STEP_COMPLETED last in step
 * order, then the latest in the log (item_seq, event_id).
 *
 * Step order: steps of a loop (with an `iteration`) order by iteration, then step index; steps
 * outside loops (no iteration) by step index (a missing one counts lowest within its kind). Of
 * the last of each kind, the one with the higher step index (equal: the loop's); when either has
 * no index, the later in the log. So a step after a loop without an iteration comes after every
 * iteration of it (its index is higher), a step before it comes before, and steps named only (no
 * index) follow the log. Choosing the last of each kind first makes the choice one function of the
 * set of steps, whatever order they are met in (the listing aggregates merge parts in any order
 * and must agree with the fold). Iterations compare across all of an item's loops: number them
 * on from one loop to the next.
 *
 * Not simply the latest in the log: appends of valid batches are always written or answered
 * duplicate, and a batch can arrive after a later step of its item (a retry after an unknown
 * outcome, an at-least-once redelivery, a standard SQS queue). Such a batch lands at a higher
 * seq; ordered by seq, it would move the cursor back and a resume would run completed steps again.
 *
 * Shared by the fold (lib/fold.ts), the listing aggregates (lib/log/read/summary.ts), the report
 * (lib/report/aggregate.ts) and durable steps (lib/steps.ts): they must agree.
 */

export interface StepRank {
  iteration: number | null;
  index: number | null;
}

/** Whether a step is one of a loop's (it carries an iteration). */
export function inLoop(r: StepRank): boolean {
  return r.iteration !== null;
}

/** Sign of a against b, two steps of one kind (both in a loop, or both not); 0: the log decides. */
export function compareInKind(a: StepRank, b: StepRank): number {
  if (inLoop(a) && inLoop(b)) {
    const it = compareNullable(a.iteration, b.iteration);
    if (it !== 0) return it;
  }
  return compareNullable(a.index, b.index);
}

/**
 * The later of the last loop step and the last step outside loops (each null when none):
 * `logLater(a, b)` says whether a comes after b in the log.
 */
export function laterOfKinds<T extends StepRank>(loop: T | null, plain: T | null, logLater: (a: T, b: T) => boolean): T | null {
  if (loop === null || plain === null) return loop ?? plain;
  if (loop.index === null || plain.index === null) return logLater(loop, plain) ? loop : plain;
  return loop.index >= plain.index ? loop : plain;
}

/** Chooses the step last in step order among steps offered in log order. */
export class StepChooser<T extends StepRank> {
  private loop: { step: T; n: number } | null = null;
  private plain: { step: T; n: number } | null = null;
  private offered = 0;

  /** Offer the next step in log order: of equal rank, the later wins. */
  offer(step: T): void {
    const mark = { step, n: this.offered++ };
    if (inLoop(step)) {
      if (this.loop === null || compareInKind(step, this.loop.step) >= 0) this.loop = mark;
    } else if (this.plain === null || compareInKind(step, this.plain.step) >= 0) this.plain = mark;
  }

  get chosen(): T | null {
    const loop = this.loop;
    const plain = this.plain;
    if (loop === null || plain === null) return (loop ?? plain)?.step ?? null;
    return laterOfKinds(loop.step, plain.step, () => loop.n > plain.n);
  }
}

function compareNullable(a: number | null, b: number | null): number {
  if (a === b) return 0;
  if (a === null) return -1;
  if (b === null) return 1;
  return a < b ? -1 : 1;
}
