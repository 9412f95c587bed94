/**
 * The log commands of `dgcl` (cli/main.ts defines their options and loads this module when one
 * runs). Each opens the log, does one thing, closes it, and prints. What only some commands need
 * (the report, the export, the progress bar, the stdin reader) is loaded by those commands.
 */
import { fstatSync } from 'node:fs';
import type { ItemStatus } from '../lib/types.ts';
import type { ExportFormat, ExportStatus } from '../lib/export/formats.ts';
import type { CheckpointLog } from '../lib/api.ts';
import type { Where } from '../lib/select/where.ts';
import { openLog, type OpenLogOptions } from '../lib/open.ts';
import { MaintenanceFailed } from './exit-codes.ts';
import { formatFailures, formatFold, formatItems, formatSearch, formatSlotWait, formatSnapshot, formatSnapshots, formatStats, formatTrajectory } from './format.ts';
import type { Io, Output } from './io.ts';
import { threadNames } from './threads.ts';

/** Which log (checked by cli/main.ts before this module is loaded), and the output form. */
export interface LogFlags {
  root: string;
  pipeline: string;
  experiment: string;
  json?: boolean;
}

/** What a command prints to and reads from. */
export interface Ctx {
  io: Io;
  out: Output;
  err: Output;
}

/** Opens the log, runs `fn`, closes it (also cli/resume.ts). */
export async function using<T>(ctx: Ctx, flags: LogFlags, fn: (log: CheckpointLog) => Promise<T>, extra: Partial<OpenLogOptions> = {}): Promise<T> {
  const log = await openLog({ ...extra, root: flags.root, pipeline: flags.pipeline, experiment: flags.experiment, env: ctx.io.env });
  try {
    return await fn(log);
  } finally {
    await log.close();
  }
}

/** The progress bar of a long command (stderr; nothing with --json or off a terminal). */
async function progressOf(ctx: Ctx, flags: LogFlags) {
  const { progress } = await import('./progress.ts');
  return progress({ json: flags.json, stream: ctx.io.stderr, env: ctx.io.env });
}

/** Size of stdin when it is a regular file (`< batches.jsonl`); null for a pipe, a terminal or a test's stream. */
function stdinSize(ctx: Ctx): number | null {
  if (ctx.io.stdin !== process.stdin) return null;
  try {
    const st = fstatSync(0);
    return st.isFile() ? st.size : null;
  } catch {
    return null;
  }
}

export async function append(ctx: Ctx, flags: LogFlags): Promise<void> {
  const { readBatchLines } = await import('./input.ts');
  const bar = await progressOf(ctx, flags);
  let acks;
  try {
    // Lines typed at a terminal would be drawn over: no bar while a person types them.
    const typed = ctx.io.stdin.isTTY === true;
    if (!typed) bar.stage('reading stdin', stdinSize(ctx), 'bytes');
    const batches = await readBatchLines(ctx.io.stdin, typed ? undefined : (n) => bar.update(n));
    // One request, all or nothing: the acks arrive together when its commit is confirmed.
    bar.stage('appending', batches.length, 'batches');
    // A writer holds a slot: Ctrl-C or a kill gives it up at once (the queued batches are
    // served and merged first), and a wait for one says who holds them.
    acks = await using(ctx, flags, (log) => log.append(batches), {
      closeOnSignals: true,
      onSlotWait: (w) => {
        bar.stop();
        ctx.err.raw(`dgcl: ${formatSlotWait(w, Date.now())}\n`);
      },
    });
    bar.update(acks.length);
  } finally {
    bar.stop();
  }
  for (const a of acks) ctx.out.json(a);
}

export async function fold(ctx: Ctx, flags: LogFlags & { item: string }): Promise<void> {
  if (flags.json) {
    ctx.out.json(await using(ctx, flags, (log) => log.fold(flags.item)));
    return;
  }
  ctx.out.line(formatFold(await using(ctx, flags, (log) => log.fold(flags.item))));
}

export async function items(ctx: Ctx, flags: LogFlags & { status?: ItemStatus; where?: Where }): Promise<void> {
  await using(ctx, flags, async (log) => {
    const page = await log.items({ ...(flags.status ? { status: flags.status } : {}), ...(flags.where ? { where: flags.where } : {}) });
    if (flags.json) for (const i of page.items) ctx.out.json(i);
    else ctx.out.line(formatItems(page.items, await threadNames(log, page.items)));
  });
}

export async function trajectory(ctx: Ctx, flags: LogFlags & { item: string }): Promise<void> {
  const events = await using(ctx, flags, (log) => log.trajectory(flags.item));
  if (flags.json) for (const e of events) ctx.out.json(e);
  else ctx.out.line(formatTrajectory(events));
}

export async function blob(ctx: Ctx, flags: LogFlags & { item: string; field: string }): Promise<void> {
  const bytes = await using(ctx, flags, (log) => log.blob(flags.item, flags.field));
  await ctx.out.bytes(bytes);
}

export async function failures(ctx: Ctx, flags: LogFlags & { where?: Where }): Promise<void> {
  const list = await using(ctx, flags, (log) => log.failures(flags.where ? { where: flags.where } : {}));
  if (flags.json) for (const f of list) ctx.out.json(f);
  else ctx.out.line(formatFailures(list));
}

export async function search(ctx: Ctx, flags: LogFlags & { text: string; field?: string[]; limit: number }): Promise<void> {
  const hits = await using(ctx, flags, (log) => log.search(flags.text, { limit: flags.limit, ...(flags.field ? { fields: flags.field } : {}) }));
  if (flags.json) for (const h of hits) ctx.out.json(h);
  else ctx.out.line(formatSearch(hits));
  // Which events a search stops at is not said: the count alone cannot tell there were no more.
  if (hits.length === flags.limit) ctx.err.raw(`dgcl: search: ${flags.limit} events shown, the limit: more may match (--limit, at most 10000)\n`);
}

export async function maintain(ctx: Ctx, flags: LogFlags): Promise<void> {
  const bar = await progressOf(ctx, flags);
  let report;
  try {
    // The number of steps is known once the pass has listed the generations it merges.
    bar.stage('maintaining', null, 'steps');
    report = await using(ctx, flags, (log) => log.maintain({ onProgress: (step, done, total) => bar.update(done, total, step) }));
  } finally {
    bar.stop();
  }
  ctx.out.json(report, !flags.json);
  // The report is printed either way; a failed step must not read as a clean pass.
  if (report.failures.length > 0) throw new MaintenanceFailed(report.failures);
}

/** `dgcl repair` / `dgcl adopt`: what was rebuilt (docs/operations.md, "Repairing a log"). */
export async function rehome(ctx: Ctx, flags: LogFlags, mode: 'repair' | 'adopt'): Promise<void> {
  const r = await using(ctx, flags, (log) => (mode === 'repair' ? log.repair() : log.adopt()));
  if (flags.json) ctx.out.json(r);
  else {
    const sealed = r.sealedEpochs.length > 0 ? `, sealed ${r.sealedEpochs.join(' ')}` : '';
    ctx.out.line(`${mode === 'repair' ? 'repaired' : 'adopted'} ${flags.pipeline}/${flags.experiment}: log id ${r.logId}, ${r.markers} item markers and ${r.claims} claims rebuilt${sealed}`);
  }
}

export async function stats(ctx: Ctx, flags: LogFlags): Promise<void> {
  const [s, snapshots] = await using(ctx, flags, async (log) => [await log.stats(), await log.snapshots()] as const);
  if (flags.json) ctx.out.json({ ...s, snapshots });
  else ctx.out.line(formatStats(s, snapshots));
}

/** `dgcl fork` (docs/usage.md, "Forking a cohort"); cli/main.ts checked that one of --where and --items is given. */
export async function fork(ctx: Ctx, flags: LogFlags & { where?: Where; items?: string[]; fromStep: string; toExperiment: string; children?: boolean }): Promise<void> {
  const { parseStepRef } = await import('../lib/log/admin/fork-plan.ts');
  const r = await using(ctx, flags, (log) =>
    log.fork({
      ...(flags.where !== undefined ? { where: flags.where } : { itemIds: flags.items! }),
      fromStep: parseStepRef(flags.fromStep),
      to: { experiment: flags.toExperiment },
      children: flags.children === true,
    }),
  );
  if (flags.json) ctx.out.json(r);
  else if (r.unchanged) ctx.out.line(`${r.uri} already holds this fork of ${r.items} items: nothing written`);
  else ctx.out.line(`forked ${r.items} items (${r.keptEvents} events kept, ${r.items} lineage events, ${r.bytes} bytes) to ${r.uri}`);
}

/** `dgcl snapshot`: take one (`--name`), list them (`--list`) or drop one (`--drop`); cli/main.ts checked that exactly one is given. */
export async function snapshot(ctx: Ctx, flags: LogFlags & { name?: string; list?: boolean; drop?: string }): Promise<void> {
  if (flags.list) {
    const list = await using(ctx, flags, (log) => log.snapshots());
    if (flags.json) for (const x of list) ctx.out.json(x);
    else ctx.out.line(formatSnapshots(list));
  } else if (flags.drop !== undefined) {
    const name = flags.drop;
    await using(ctx, flags, (log) => log.dropSnapshot(name));
    if (flags.json) ctx.out.json({ name, dropped: true });
    else ctx.out.line(`snapshot ${name} dropped`);
  } else {
    const name = flags.name!;
    const r = await using(ctx, flags, (log) => log.snapshot(name));
    if (flags.json) ctx.out.json(r);
    else ctx.out.line(formatSnapshot(r));
  }
}

export async function report(
  ctx: Ctx,
  flags: LogFlags & { out: string; maxItems: number; where?: Where; snapshot?: string; compare?: string; field?: string },
): Promise<void> {
  const { report: write } = await import('../lib/report/report.ts');
  const r = await using(ctx, flags, async (log) => {
    const o = { out: flags.out, maxItems: flags.maxItems, env: ctx.io.env, ...(flags.where ? { where: flags.where } : {}), ...(flags.snapshot !== undefined ? { snapshot: flags.snapshot } : {}) };
    if (flags.compare === undefined) return write(log, o);
    // The fork: another experiment of this root and pipeline, only read.
    return using(ctx, { ...flags, experiment: flags.compare }, (fork) => write(log, { ...o, compare: { log: fork, ...(flags.field !== undefined ? { field: flags.field } : {}) } }));
  });
  const summary = {
    out: r.out!,
    items: r.data.itemCount,
    listed: r.data.items.length,
    events: r.data.events,
    status: r.data.status,
    ...(r.data.where ? { where: r.data.where } : {}),
    ...(r.data.snapshot ? { snapshot: r.data.snapshot.name } : {}),
    ...(r.data.compare ? { compare: r.data.compare } : {}),
  };
  if (flags.json) ctx.out.json(summary);
  else ctx.out.line(`report written to ${r.out!} (${r.data.itemCount} items, ${r.data.events} events${r.data.snapshot ? `; snapshot ${r.data.snapshot.name}` : ''}${r.data.where ? `; only items where ${r.data.where}` : ''}${r.data.compare ? `; compared with fork ${r.data.compare.fork.experiment}` : ''})`);
}

export async function exportCmd(
  ctx: Ctx,
  flags: LogFlags & { out: string; format?: ExportFormat; status: ExportStatus; fields?: string[]; blobs?: string; where?: Where; snapshot?: string },
): Promise<void> {
  const { exportItems } = await import('../lib/export/export.ts');
  const r = await using(ctx, flags, (log) =>
    exportItems(log, {
      out: flags.out,
      status: flags.status,
      env: ctx.io.env,
      ...(flags.format ? { format: flags.format } : {}),
      ...(flags.fields ? { fields: flags.fields } : {}),
      ...(flags.blobs !== undefined ? { blobs: flags.blobs } : {}),
      ...(flags.where ? { where: flags.where } : {}),
      ...(flags.snapshot !== undefined ? { snapshot: flags.snapshot } : {}),
    }),
  );
  if (flags.json) ctx.out.json(r);
  else ctx.out.line(`exported ${r.rows} items (${r.format}) to ${r.out}${r.blobFiles ? `, ${r.blobFiles} blob files` : ''}`);
}
