/**
 * The operator commands on a log as a whole (docs/operations.md): `dropLog`, and `copyLog`, whose
 * copy gets its own records (lib/log/admin/rehome.ts) so that it is written on its own. The CLI's
 * `dgcl drop` and `dgcl copy` call these.
 */
import { openLog } from './open.ts';
import { copyLog as copyEvents, type CopyResult } from './log/admin/copy.ts';
import type { LanceCheckpointLog } from './log/log.ts';
import type { AdminPlace } from './log/admin/place.ts';
import { formatLocation } from './storage/location.ts';
import type { Clock } from './clock.ts';

export { dropLog, dropPlan, type DropPlan } from './log/admin/drop.ts';
export { openPlace, type AdminPlace, type OpenedPlace } from './log/admin/place.ts';
export type { CopyResult } from './log/admin/copy.ts';

/**
 * A consistent copy of `source` at `target` (every event acknowledged before it began), with
 * records of its own: a log under a new id, writable on its own, sharing nothing with its origin.
 */
export async function copyLog(source: AdminPlace, target: AdminPlace, o: { env?: Record<string, string | undefined>; clock?: Clock } = {}): Promise<CopyResult> {
  return copyEvents(source, target, {
    ...(o.clock ? { clock: o.clock } : {}),
    initRecords: async (t) => {
      const log = (await openLog({
        root: formatLocation(t.root),
        pipeline: t.pipeline,
        experiment: t.experiment,
        leases: t.leases,
        ...(o.env ? { env: o.env } : {}),
        ...(o.clock ? { clock: o.clock } : {}),
      })) as LanceCheckpointLog;
      try {
        await log.initRecords();
      } finally {
        await log.close();
      }
    },
  });
}
