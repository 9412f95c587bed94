/**
 * Where an item resumes, from its folded state: resume starts after the cursor, the completed
 * step last in step order (lib/step-order.ts; for steps in index order, the last
 * STEP_COMPLETED). A failed step is retried with attempt + 1; terminal
 * items are not resumed. Loop iterations are the pipeline's business (the cursor carries
 * `iteration` for it).
 *
 * Step indexes are optional in a batch, so a cursor may name its step without numbering it.
 * Such an item resumes by name: `nextStepIndex` is null and `resumeBy` is 'name', meaning "the
 * step after `cursor.stepName` (`stepInstanceId`, `iteration`)", which only the pipeline knows.
 * Guessing an index instead (step 0) would re-run every completed step.
 */
import type { Cursor, ItemState, ItemStatus } from './types.ts';

/**
 * One message of the resume queue (docs/design/handlers.md, `resume`). `lastSeq` is the item's
 * last seq when the instruction was made: (item, `lastSeq`) identifies it, so a second copy
 * (a retried send, a second sweep) is recognisable, and a worker drops an instruction whose
 * `lastSeq` is below the item's current one (someone resumed it since).
 */
export interface ResumeInstruction {
  pipeline: string;
  experiment: string;
  itemId: string;
  status: ItemStatus;
  cursor: Cursor | null;
  /** The step to run by index; null when resuming by name. */
  nextStepIndex: number | null;
  /** 'index': run step `nextStepIndex`; 'name': run the step after `cursor.stepName`. */
  resumeBy: Exclude<ResumeBy, null>;
  attempt: number;
  lastSeq: number;
}

/**
 * How the pipeline finds the step to run: 'index' = run step `nextStepIndex` (0 with no
 * cursor); 'name' = run the step after the cursor's step; null = terminal, nothing to run.
 */
export type ResumeBy = 'index' | 'name' | null;

export interface ResumePoint {
  itemId: string;
  status: ItemStatus;
  cursor: Cursor | null;
  /** Index of the step to run next; null for terminal items and when resuming by name. */
  nextStepIndex: number | null;
  resumeBy: ResumeBy;
  /** Attempt number to run it with. */
  attempt: number;
  resumable: boolean;
}

export function resumePoint(state: ItemState): ResumePoint {
  const terminal = state.status === 'completed' || state.status === 'filtered';
  const { cursor } = state;
  let attempt = 1;
  if (state.status === 'failed') {
    const last = state.failures.at(-1);
    attempt = (last?.attempt ?? 0) + 1;
  }
  let nextStepIndex: number | null = null;
  let resumeBy: ResumeBy = null;
  if (!terminal) {
    if (cursor === null) [nextStepIndex, resumeBy] = [0, 'index'];
    else if (cursor.stepIndex !== null) [nextStepIndex, resumeBy] = [cursor.stepIndex + 1, 'index'];
    else resumeBy = 'name';
  }
  return { itemId: state.itemId, status: state.status, cursor, nextStepIndex, resumeBy, attempt, resumable: !terminal };
}

/** The instruction that resumes `state`'s item, or null when it is terminal (nothing to run). */
export function resumeInstruction(at: { pipeline: string; experiment: string }, state: ItemState): ResumeInstruction | null {
  const p = resumePoint(state);
  // Not `nextStepIndex === null`: an item whose cursor has no step index resumes by name.
  if (!p.resumable || p.resumeBy === null) return null;
  const { pipeline, experiment } = at;
  return { pipeline, experiment, itemId: state.itemId, status: p.status, cursor: p.cursor, nextStepIndex: p.nextStepIndex, resumeBy: p.resumeBy, attempt: p.attempt, lastSeq: state.lastSeq };
}
