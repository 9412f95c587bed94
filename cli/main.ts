/**
 * `dgcl`: the command line of CONTRACT.md. Exit codes (cli/exit-codes.ts): 0 ok, 2 bad usage or
 * input (message on stderr, nothing written), 66 no such log, 65 damaged data, 75 try again
 * later, 77 permission denied, 1 anything else.
 */
import { fstatSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { isDgclError } from '../lib/errors.ts';
import { exitCodeOf, MaintenanceFailed } from './exit-codes.ts';
import { createLeaseTable } from '../lib/lease/dynamo.ts';
import { openLog, type OpenLogOptions } from '../lib/index.ts';
import type { LanceCheckpointLog } from '../lib/log/log.ts';
import { ITEM_STATUSES, type ItemStatus } from '../lib/types.ts';
import { EXPORT_FORMATS, EXPORT_STATUSES, exportItems, type ExportFormat, type ExportStatus } from '../lib/export/export.ts';
import { report } from '../lib/report/report.ts';
import { runDemo } from './demo.ts';
import { formatFailures, formatItems, formatSlotWait, formatStats, formatTrajectory } from './format.ts';
import { readBatchLines } from './input.ts';
import { progress, type Progress } from './progress.ts';

interface LogFlags {
  root?: string;
  pipeline?: string;
  experiment?: string;
  json?: boolean;
}

class UsageError extends Error {}

function withLog(cmd: Command): Command {
  return cmd
    .addOption(new Option('--root <root>', 'file:///abs/dir, a local path, or s3://bucket/prefix').env('DGCL_ROOT'))
    .addOption(new Option('--pipeline <name>', 'pipeline name').env('DGCL_PIPELINE'))
    .addOption(new Option('--experiment <name>', 'experiment name').env('DGCL_EXPERIMENT'))
    .option('--json', 'machine-readable output');
}

async function open(flags: LogFlags, extra: Partial<OpenLogOptions> = {}): Promise<LanceCheckpointLog> {
  for (const k of ['root', 'pipeline', 'experiment'] as const) {
    if (!flags[k]) throw new UsageError(`missing --${k} (or DGCL_${k.toUpperCase()})`);
  }
  return openLog({ root: flags.root!, pipeline: flags.pipeline!, experiment: flags.experiment!, ...extra });
}

async function using<T>(flags: LogFlags, fn: (log: LanceCheckpointLog) => Promise<T>, extra: Partial<OpenLogOptions> = {}): Promise<T> {
  const log = await open(flags, extra);
  try {
    return await fn(log);
  } finally {
    await log.close();
  }
}

const out = (s: string) => process.stdout.write(s.endsWith('\n') ? s : `${s}\n`);
const json = (v: unknown, pretty = false) => out(JSON.stringify(v, null, pretty ? 2 : undefined));

export function buildProgram(): Command {
  const program = new Command('dgcl')
    .description('datagen-checkpoint-log: the checkpoint log of LLM data-generation pipelines')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });

  program
    .command('demo')
    .description('run a sample datagen pipeline on the embedded default (a local folder), with a crash and a resume')
    .addOption(new Option('--root <dir>', 'where the demo log goes').env('DGCL_ROOT').default('.dgcl-demo'))
    .option('--items <n>', 'root items to generate', (v) => positiveInt(v, '--items'), 24)
    .option('--seed <n>', 'random seed', (v) => positiveInt(v, '--seed'), 7)
    .option('--json', 'print the summary as JSON')
    .addOption(new Option('--worker <experiment>').hideHelp())
    .action(async (o: { root: string; items: number; seed: number; json?: boolean; worker?: string }) => {
      await runDemo(o);
    });

  withLog(program.command('append'))
    .description('append checkpoint batches read as JSON Lines on stdin; prints one ack per line')
    .action(async (flags: LogFlags) => {
      const bar = progressOf(flags);
      let acks;
      try {
        // Lines typed at a terminal would be drawn over: no bar while a person types them.
        const typed = process.stdin.isTTY === true;
        if (!typed) bar.stage('reading stdin', stdinSize(), 'bytes');
        const batches = await readBatchLines(process.stdin, typed ? undefined : (n) => bar.update(n));
        // One request, all or nothing: the acks arrive together when its commit is confirmed.
        bar.stage('appending', batches.length, 'batches');
        // A writer holds a slot: Ctrl-C or a kill gives it up at once (the queued batches are
        // served and merged first), and a wait for one says who holds them.
        acks = await using(flags, (log) => log.append(batches), {
          closeOnSignals: true,
          onSlotWait: (w) => {
            bar.stop();
            process.stderr.write(`dgcl: ${formatSlotWait(w, Date.now())}\n`);
          },
        });
        bar.update(acks.length);
      } finally {
        bar.stop();
      }
      for (const a of acks) json(a);
    });

  withLog(program.command('fold'))
    .description('the folded state of one item')
    .requiredOption('--item <id>', 'item id')
    .action(async (flags: LogFlags & { item: string }) => {
      const state = await using(flags, (log) => log.fold(flags.item));
      json(state, !flags.json);
    });

  withLog(program.command('items'))
    .description('one line per item: id, status, cursor, lastSeq')
    .addOption(new Option('--status <status>', 'only items with this status').choices([...ITEM_STATUSES]))
    .action(async (flags: LogFlags & { status?: ItemStatus }) => {
      const page = await using(flags, (log) => log.items(flags.status ? { status: flags.status } : {}));
      if (flags.json) for (const i of page.items) json(i);
      else out(formatItems(page.items));
    });

  withLog(program.command('trajectory'))
    .description("the item's events in item_seq order, without blob bytes")
    .requiredOption('--item <id>', 'item id')
    .action(async (flags: LogFlags & { item: string }) => {
      const events = await using(flags, (log) => log.trajectory(flags.item));
      if (flags.json) for (const e of events) json(e);
      else out(formatTrajectory(events));
    });

  withLog(program.command('blob'))
    .description("a blob field's bytes on stdout")
    .requiredOption('--item <id>', 'item id')
    .requiredOption('--field <name>', 'field name')
    .action(async (flags: LogFlags & { item: string; field: string }) => {
      const bytes = await using(flags, (log) => log.blob(flags.item, flags.field));
      await new Promise<void>((resolve, reject) => process.stdout.write(bytes, (e) => (e ? reject(e) : resolve())));
    });

  withLog(program.command('failures'))
    .description('failed items with their last error')
    .action(async (flags: LogFlags) => {
      const list = await using(flags, (log) => log.failures());
      if (flags.json) for (const f of list) json(f);
      else out(formatFailures(list));
    });

  withLog(program.command('maintain'))
    .description('merge shards, compact, refresh indexes, clean up; prints what it did')
    .action(async (flags: LogFlags) => {
      const bar = progressOf(flags);
      let report;
      try {
        // The number of steps is known once the pass has listed the generations it merges.
        bar.stage('maintaining', null, 'steps');
        report = await using(flags, (log) => log.maintain({ onProgress: (step, done, total) => bar.update(done, total, step) }));
      } finally {
        bar.stop();
      }
      json(report, !flags.json);
      // The report is printed either way; a failed step must not read as a clean pass.
      if (report.failures.length > 0) throw new MaintenanceFailed(report.failures);
    });

  withLog(program.command('stats'))
    .description('base versions/rows/fragments, shards and their unmerged generations, indexes')
    .action(async (flags: LogFlags) => {
      const stats = await using(flags, (log) => log.stats());
      if (flags.json) json(stats);
      else out(formatStats(stats));
    });

  withLog(program.command('report'))
    .description('one self-contained HTML page: progress, steps, failures, items with their trajectories, shards')
    .option('--out <file>', 'where the page goes (a path or s3://bucket/key)', 'report.html')
    .option('--max-items <n>', 'items listed with trajectories at most (failed and in-progress first)', (v) => nonNegativeInt(v, '--max-items'), 5000)
    .action(async (flags: LogFlags & { out: string; maxItems: number }) => {
      const r = await using(flags, (log) => report(log, { out: flags.out, maxItems: flags.maxItems }));
      const summary = { out: r.out!, items: r.data.itemCount, listed: r.data.items.length, events: r.data.events, status: r.data.status };
      if (flags.json) json(summary);
      else out(`report written to ${r.out!} (${r.data.itemCount} items, ${r.data.events} events)`);
    });

  withLog(program.command('export'))
    .description("finished items' final state as a dataset: one row per item (id, root/parent, status, attempts, fields)")
    .requiredOption('--out <file>', 'a path or s3://bucket/key')
    .addOption(new Option('--format <format>', 'default: parquet for a .parquet file, else jsonl').choices([...EXPORT_FORMATS]))
    .addOption(new Option('--status <status>', 'which items').choices([...EXPORT_STATUSES]).default('completed'))
    .option('--fields <a,b>', 'fields to export (default: all)', (v) => listOf(v, '--fields'))
    .option('--blobs <dir>', 'write blob fields as files here (a folder or s3:// prefix); rows hold their paths')
    .action(async (flags: LogFlags & { out: string; format?: ExportFormat; status: ExportStatus; fields?: string[]; blobs?: string }) => {
      const r = await using(flags, (log) =>
        exportItems(log, {
          out: flags.out,
          status: flags.status,
          ...(flags.format ? { format: flags.format } : {}),
          ...(flags.fields ? { fields: flags.fields } : {}),
          ...(flags.blobs !== undefined ? { blobs: flags.blobs } : {}),
        }),
      );
      if (flags.json) json(r);
      else out(`exported ${r.rows} items (${r.format}) to ${r.out}${r.blobFiles ? `, ${r.blobFiles} blob files` : ''}`);
    });

  program
    .command('setup-lease-table')
    .description('create the DynamoDB lease table (on-demand, pk String, TTL on ttl) if missing; for local or hand-made set-ups (the CDK stack creates its own)')
    .addOption(new Option('--table <name>', 'table name').env('DGCL_LEASE_TABLE'))
    .action(async (o: { table?: string }) => {
      if (!o.table) throw new UsageError('missing --table (or DGCL_LEASE_TABLE)');
      const client = new DynamoDBClient({});
      try {
        await createLeaseTable(client, o.table);
      } finally {
        client.destroy();
      }
      out(`lease table ${o.table} ready`);
    });

  return program;
}

/** The progress bar of a long command (stderr; nothing with --json or off a terminal). */
function progressOf(flags: LogFlags): Progress {
  // Run behind bin/dgcl.js's stderr filter (cli/panic-filter.ts), stderr is a pipe to a terminal.
  if (process.env.DGCL_STDERR_TTY === '1') Object.assign(process.stderr, { isTTY: true, columns: Number(process.env.COLUMNS) || 80 });
  return progress({ json: flags.json, stream: process.stderr, env: process.env });
}

/** Size of stdin when it is a regular file (`< batches.jsonl`); null for a pipe or terminal. */
function stdinSize(): number | null {
  try {
    const st = fstatSync(0);
    return st.isFile() ? st.size : null;
  } catch {
    return null;
  }
}

function nonNegativeInt(v: string, name: string): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new UsageError(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
  return n;
}

function listOf(v: string, name: string): string[] {
  const parts = v.split(',').map((s) => s.trim());
  if (parts.some((p) => p === '')) throw new UsageError(`${name} must be a comma-separated list of names, got ${JSON.stringify(v)}`);
  return parts;
}

function positiveInt(v: string, name: string): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`${name} must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
}

export async function main(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: 'user' });
    return 0;
  } catch (e) {
    if (e instanceof CommanderError) {
      // help and version print and exit 0; everything else commander rejects is bad usage
      return e.exitCode === 0 ? 0 : 2;
    }
    if (e instanceof UsageError) {
      process.stderr.write(`dgcl: ${e.message}\n`);
      return 2;
    }
    if (e instanceof MaintenanceFailed) {
      process.stderr.write(`dgcl: maintain: ${e.message}\n`);
      return e.exitCode;
    }
    if (isDgclError(e)) {
      process.stderr.write(`dgcl: ${e.code}: ${e.message}\n`);
      return exitCodeOf(e);
    }
    process.stderr.write(`dgcl: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
