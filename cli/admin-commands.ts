/**
 * The operator commands of `dgcl` that act on a log as a whole: `drop` and `copy`
 * (lib/log/admin/). cli/main.ts defines their options and loads this module when one runs.
 */
import { openPlace, type AdminPlace, type DropPlan, type OpenedPlace } from '../lib/admin.ts';
import type { Ctx, LogFlags } from './commands.ts';
import { UsageError } from './usage.ts';

async function withPlace<T>(ctx: Ctx, o: { root: string; pipeline: string; experiment: string }, fn: (p: OpenedPlace) => Promise<T>): Promise<T> {
  const place = await openPlace({ ...o, env: ctx.io.env });
  try {
    return await fn(place);
  } finally {
    await place.close();
  }
}

export async function drop(ctx: Ctx, flags: LogFlags & { yes?: boolean }): Promise<void> {
  const { dropLog, dropPlan } = await import('../lib/admin.ts');
  await withPlace(ctx, flags, async (place) => {
    if (!flags.yes) {
      const plan = await dropPlan(place);
      if (!plan.exists) return nothingToDrop(ctx, flags, place);
      if (flags.json) ctx.out.json(plan);
      else ctx.out.line(formatDropPlan(plan));
      throw new UsageError('drop deletes the log for good: run it again with --yes to delete it');
    }
    const r = await dropLog(place);
    if (r.objects + r.records + r.leases === 0) return nothingToDrop(ctx, flags, place);
    if (flags.json) ctx.out.json(r);
    else ctx.out.line(`dropped ${place.uri}: ${r.objects} objects, ${r.records} records in the lease table, ${r.leases} leases`);
  });
}

function nothingToDrop(ctx: Ctx, flags: LogFlags, place: AdminPlace): void {
  if (flags.json) ctx.out.json({ objects: 0, records: 0, leases: 0 });
  else ctx.out.line(`nothing to drop at ${place.uri}`);
}

export function formatDropPlan(p: DropPlan): string {
  const slots = p.leases.filter((k) => k.what.startsWith('writer slot')).length;
  const shared = p.leases.filter((k) => !k.scoped);
  const lines = [`dgcl drop would delete the log at ${p.uri}:`];
  lines.push(`  every object under it${p.coordination === null ? '' : ` (its coordination record says "${p.coordination}")`}`);
  if (p.table !== null) {
    if (p.copyOf !== null) lines.push(`  no record in the lease table ${p.table}: this log is a copy of ${p.copyOf}, whose records they are`);
    else lines.push(`  its records in the lease table ${p.table}${p.scope === null ? '' : ` under ${p.scope}`} (item markers, claims, sentinel), and those of earlier logs at this place`);
  }
  lines.push(`  first it takes ${slots} writer slot leases and the maintainer lease (refused while any is held), and gives them back at the end`);
  if (shared.length > 0) lines.push(`  kept, released: ${shared.length} lease records named by pipeline and experiment alone (shared with logs of these names elsewhere)`);
  return lines.join('\n');
}

export interface CopyFlags extends LogFlags {
  toRoot?: string;
  toPipeline?: string;
  toExperiment?: string;
}

export async function copy(ctx: Ctx, flags: CopyFlags): Promise<void> {
  const { copyLog } = await import('../lib/admin.ts');
  const to = { root: flags.toRoot ?? flags.root, pipeline: flags.toPipeline ?? flags.pipeline, experiment: flags.toExperiment ?? flags.experiment };
  const r = await withPlace(ctx, flags, (source) => withPlace(ctx, to, async (target) => ({ ...(await copyLog(source, target, { env: ctx.io.env })), uri: target.uri })));
  if (flags.json) ctx.out.json({ events: r.events, items: r.items, bytes: r.bytes });
  else ctx.out.line(`copied ${r.events} events of ${r.items} items (${r.bytes} bytes) to ${r.uri}`);
}
