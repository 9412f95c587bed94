/**
 * `fold` handler (read-only; docs/design/handlers.md):
 *  - `{pipeline, experiment, itemId}` -> the item state (NotFoundError if there is no such item);
 *  - `{pipeline, experiment, itemId, trajectory: true}` -> the item's trajectory events, in
 *    `item_seq` order, blobs as `$blobRef`;
 *  - `{pipeline, experiment, status?, limit?, after?}` -> a page of item summaries
 *    `{items: [{itemId, status, cursor, lastSeq}], next?}`; pass `next` as `after` for the
 *    following page.
 * A warm container keeps its Lance handles per experiment (functions/shared/logs.ts); reads take
 * no lease.
 */
import type { Context } from 'aws-lambda';
import type { ItemPage } from '../lib/api.ts';
import { InvalidInputError } from '../lib/errors.ts';
import type { ItemState, TrajectoryEvent } from '../lib/types.ts';
import { readConfig } from './shared/config.ts';
import { logCache } from './shared/logs.ts';
import { lambdaHandler, observability } from './shared/observability.ts';
import { FoldItemSchema, FoldPageSchema, parseInput } from './shared/schemas.ts';
import { deadlineOf, leaseTtlFor, withinDeadline } from './shared/time.ts';

const obs = observability('fold');

export type FoldResult = ItemState | TrajectoryEvent[] | ItemPage;

export const handler = lambdaHandler(obs, async (event: unknown, context: Context): Promise<FoldResult> => {
  const config = readConfig();
  const deadline = deadlineOf(context);
  const open = (pipeline: string, experiment: string) =>
    logCache.get(config, pipeline, experiment, { leaseTtlMs: leaseTtlFor(context, config.leaseTtlMaxMs) });

  if (typeof event === 'object' && event !== null && 'itemId' in event) {
    const q = parseInput(FoldItemSchema, event);
    const { log } = await open(q.pipeline, q.experiment);
    if (q.trajectory) return withinDeadline(log.trajectory(q.itemId), deadline, `trajectory of ${q.itemId}`);
    return withinDeadline(log.fold(q.itemId), deadline, `fold of ${q.itemId}`);
  }
  if (typeof event === 'object' && event !== null && 'trajectory' in event) {
    throw new InvalidInputError('is required with "trajectory" (a trajectory is of one item)', { field: 'event.itemId' });
  }
  const q = parseInput(FoldPageSchema, event);
  const { log } = await open(q.pipeline, q.experiment);
  return withinDeadline(
    log.items({
      ...(q.status !== undefined ? { status: q.status } : {}),
      ...(q.limit !== undefined ? { limit: q.limit } : {}),
      ...(q.after !== undefined ? { after: q.after } : {}),
    }),
    deadline,
    'item listing',
  );
});
