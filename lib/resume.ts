/**
 * Where an item resumes, from its folded state: the step after the cursor; a failed step is
 * retried with attempt + 1; terminal items are not resumed. Loop iterations are the pipeline's
 * business (the cursor carries `iteration` for it).
 */
import type { Cursor, ItemState, ItemStatus } from './types.ts';

export interface ResumePoint {
  itemId: string;
  status: ItemStatus;
  cursor: Cursor | null;
  /** Index of the step to run next; null for terminal items. */
  nextStepIndex: number | null;
  /** Attempt number to run it with. */
  attempt: number;
  resumable: boolean;
}

export function resumePoint(state: ItemState): ResumePoint {
  const terminal = state.status === 'completed' || state.status === 'filtered';
  const next = state.cursor ? (state.cursor.stepIndex ?? -1) + 1 : 0;
  let attempt = 1;
  if (state.status === 'failed') {
    const last = state.failures.at(-1);
    attempt = (last?.attempt ?? 0) + 1;
  }
  return {
    itemId: state.itemId,
    status: state.status,
    cursor: state.cursor,
    nextStepIndex: terminal ? null : next,
    attempt,
    resumable: !terminal,
  };
}
