/**
 * `log.fork(options)` (docs/usage.md, "Forking a cohort"): the options checked, the fork's place
 * opened beside its source (same root and pipeline), and the fork made by
 * lib/log/admin/fork.ts; the fork's records are written as a copy's are (lib/admin.ts).
 * `openLog` hands each log its fork through this module, loaded on the first fork.
 */
import type { CheckpointLog, ForkOptions, ForkResult } from './api.ts';
import type { Clock } from './clock.ts';
import { InvalidInputError } from './errors.ts';
import { checkStepRef } from './log/admin/fork-plan.ts';
import { forkItems } from './log/admin/fork.ts';
import { openPlace } from './log/admin/place.ts';
import type { LanceCheckpointLog } from './log/log.ts';
import { readsOf } from './log/reads.ts';
import type { LeaseStore } from './lease/types.ts';
import { validateName } from './names.ts';
import { checkWhere } from './select/check.ts';
import type { Env } from './storage/location.ts';

export interface ForkContext {
  root: string;
  pipeline: string;
  experiment: string;
  env: Env;
  clock: Clock;
  /** The lease store the source was opened with, when one was given. */
  leases?: LeaseStore;
  /** Opens a log of the source's root and pipeline, as the source was opened. */
  openLog: (experiment: string) => Promise<CheckpointLog>;
}

export async function forkLog(source: CheckpointLog, options: ForkOptions, ctx: ForkContext): Promise<ForkResult> {
  const spec = checkForkOptions(options);
  const place = await openPlace({ root: ctx.root, pipeline: ctx.pipeline, experiment: spec.to, env: ctx.env, clock: ctx.clock, ...(ctx.leases ? { leases: ctx.leases } : {}) });
  try {
    return await forkItems(
      readsOf(source),
      { pipeline: ctx.pipeline, experiment: ctx.experiment },
      {
        place,
        openReads: async () => {
          const log = await ctx.openLog(spec.to);
          return { reads: readsOf(log), close: () => log.close() };
        },
        initRecords: async (known) => {
          const log = (await ctx.openLog(spec.to)) as unknown as LanceCheckpointLog;
          try {
            await log.initRecords(known);
          } finally {
            await log.close();
          }
        },
      },
      spec,
      { nowUs: () => ctx.clock.nowMs() * 1000 },
    );
  } finally {
    await place.close();
  }
}

function checkForkOptions(o: ForkOptions) {
  if (o === null || typeof o !== 'object') throw new InvalidInputError('fork options must be an object {where | itemIds, fromStep, to: {experiment}}', { field: 'options' });
  if ((o.where === undefined) === (o.itemIds === undefined)) throw new InvalidInputError('give exactly one of where and itemIds: the items to fork', { field: o.where === undefined ? 'where' : 'itemIds' });
  let itemIds: string[] | null = null;
  if (o.itemIds !== undefined) {
    if (!Array.isArray(o.itemIds) || o.itemIds.length === 0 || o.itemIds.some((id) => typeof id !== 'string' || id.length === 0)) {
      throw new InvalidInputError('itemIds must be a non-empty array of item ids', { field: 'itemIds' });
    }
    itemIds = [...new Set(o.itemIds)];
  }
  const where = o.where === undefined ? null : checkWhere(o.where, 'where');
  const fromStep = checkStepRef(o.fromStep, 'fromStep');
  if (o.to === null || typeof o.to !== 'object') throw new InvalidInputError('to must be {experiment}: the fork\'s experiment', { field: 'to' });
  const to = validateName('experiment', o.to.experiment);
  if (o.children !== undefined && typeof o.children !== 'boolean') throw new InvalidInputError('children must be true or false', { field: 'children' });
  return { where, itemIds, fromStep, children: o.children === true, to };
}
