/**
 * `dgcl`: the command line. Exit codes (cli/exit-codes.ts, after sysexits): 0 ok
 * (also when the reader of stdout closed the pipe early), 2 bad usage or input (message on
 * stderr, nothing written), 66 no such log, 65 damaged data, 75 try again later, 77 permission
 * denied, 1 anything else.
 *
 * `main(argv)` runs one command; bin/dgcl.js calls it (this module never runs on import, so tests
 * call `main` in-process). Only the command line is defined here: each command loads what it
 * needs when it runs (cli/commands.ts, and the report, export, demo and lease table modules it
 * loads in turn), so `--help` and a usage error load no LanceDB and no AWS SDK, and run in this
 * process even where the commands that open a log run in another (`MainOptions.isolate`).
 */
import { Command, CommanderError, Option } from 'commander';
import { isDgclError } from '../lib/errors.ts';
import { parseDuration } from '../lib/duration.ts';
import { EXPORT_FORMATS, EXPORT_STATUSES, type ExportFormat, type ExportStatus } from '../lib/export/formats.ts';
import { checkSnapshotName } from '../lib/log/snapshot/record.ts';
import { parseWhere } from '../lib/select/parse.ts';
import type { Where } from '../lib/select/where.ts';
import { ITEM_STATUSES, type ItemStatus } from '../lib/types.ts';
import type { Ctx, LogFlags } from './commands.ts';
import { exitCodeOf, MaintenanceFailed, ResumesNotSent } from './exit-codes.ts';
import { Output, PipeClosed, processIo, type Io } from './io.ts';
import { UsageError } from './usage.ts';

export interface MainOptions {
  /**
   * Runs a command line whose command opens a log (so loads LanceDB) somewhere else and resolves
   * to its exit code; called once the command line has parsed and its options are checked.
   * bin/dgcl.js runs such a command in a child process whose stderr drops LanceDB's Rust panic
   * reports (cli/panic-filter.ts). Default: the command runs in this process.
   */
  isolate?: (argv: string[]) => Promise<number>;
}

/** Runs a command in this process, or hands its command line to `MainOptions.isolate`. */
type Runner = (here: () => Promise<void>) => Promise<void>;

function withLog(cmd: Command): Command {
  return cmd
    .addOption(new Option('--root <root>', 'file:///abs/dir, a local path, or s3://bucket/prefix').env('DGCL_ROOT'))
    .addOption(new Option('--pipeline <name>', 'pipeline name').env('DGCL_PIPELINE'))
    .addOption(new Option('--experiment <name>', 'experiment name').env('DGCL_EXPERIMENT'))
    .option('--json', 'machine-readable output');
}

interface LogOptions {
  root?: string;
  pipeline?: string;
  experiment?: string;
  json?: boolean;
}

/**
 * `--where EXPR` (docs/usage.md, "Selecting items"), parsed here so that a bad expression is
 * INVALID_INPUT (exit 2, naming its column) before any log is opened. Given twice, both hold.
 */
function withWhere(cmd: Command): Command {
  return cmd.option('--where <expr>', "only the items this filter selects, e.g. \"status = failed and tag.model = 'gpt'\"", (v: string, prev?: Where) => {
    const w = parseWhere(v, '--where');
    return prev ? { and: [prev, w] } : w;
  });
}

/** `--snapshot NAME`: read the state a snapshot holds (docs/usage.md, "Snapshots"); a bad name is INVALID_INPUT before any log is opened. */
function withSnapshot(cmd: Command): Command {
  return cmd.option('--snapshot <name>', 'read the log as snapshot <name> holds it (dgcl snapshot --name)', (v: string) => checkSnapshotName(v, '--snapshot'));
}

type Commands = typeof import('./commands.ts');

type ResumeOptions = LogOptions & { stalledFor: number; send?: boolean; queueUrl?: string; limit?: number; where?: Where };

export function buildProgram(ctx: Ctx, runner: Runner = (here) => here()): Command {
  /**
   * The action of a log command: the log's options checked (bad usage loads nothing more), then
   * cli/commands.ts loaded and its command run.
   */
  const logAction =
    <F extends LogOptions>(run: (c: Commands, flags: F & LogFlags) => Promise<void>) =>
    async (flags: F) => {
      checkLogFlags(flags);
      await runner(async () => run(await import('./commands.ts'), flags as F & LogFlags));
    };

  const program = new Command('dgcl')
    .description('datagen-checkpoint-log: the checkpoint log of LLM data-generation pipelines')
    .exitOverride()
    .configureOutput({ writeOut: (s) => ctx.out.raw(s), writeErr: (s) => ctx.err.raw(s) });

  program
    .command('demo')
    .description('run a sample datagen pipeline on the embedded default (a local folder), with a crash and a resume')
    .addOption(new Option('--root <dir>', 'where the demo log goes').env('DGCL_ROOT').default('.dgcl-demo'))
    .option('--items <n>', 'root items to generate', (v) => positiveInt(v, '--items'), 24)
    .option('--seed <n>', 'random seed', (v) => positiveInt(v, '--seed'), 7)
    .option('--json', 'print the summary as JSON')
    .addOption(new Option('--worker <experiment>').hideHelp())
    .action(async (o: { root: string; items: number; seed: number; json?: boolean; worker?: string }) => {
      await runner(async () => (await import('./demo.ts')).runDemo(o));
    });

  withLog(program.command('append'))
    .description('append checkpoint batches read as JSON Lines on stdin; prints one ack per line')
    .action(logAction<LogOptions>((c, flags) => c.append(ctx, flags)));

  withLog(program.command('fold'))
    .description('the folded state of one item (text: long values as their size and first characters; --json: whole)')
    .requiredOption('--item <id>', 'item id')
    .action(logAction<LogOptions & { item: string }>((c, flags) => c.fold(ctx, flags)));

  withWhere(withLog(program.command('items')))
    .description('one line per item: id, status, cursor, lastSeq')
    .addOption(new Option('--status <status>', 'only items with this status').choices([...ITEM_STATUSES]))
    .action(logAction<LogOptions & { status?: ItemStatus; where?: Where }>((c, flags) => c.items(ctx, flags)));

  withLog(program.command('trajectory'))
    .description("the item's events in item_seq order, with their times, without blob bytes")
    .requiredOption('--item <id>', 'item id')
    .action(logAction<LogOptions & { item: string }>((c, flags) => c.trajectory(ctx, flags)));

  withLog(program.command('blob'))
    .description("a blob field's bytes on stdout")
    .requiredOption('--item <id>', 'item id')
    .requiredOption('--field <name>', 'field name')
    .action(logAction<LogOptions & { item: string; field: string }>((c, flags) => c.blob(ctx, flags)));

  withWhere(withLog(program.command('failures')))
    .description('failed items with their last error: type, message and the innermost traceback frame')
    .action(logAction<LogOptions & { where?: Where }>((c, flags) => c.failures(ctx, flags)));

  withLog(program.command('search'))
    .description('events whose text (string values, string values inside JSON, error dumps, tracebacks) holds every word of TEXT, in any case; the whole history')
    .argument('<text>', 'the words to find')
    .option('--field <name>', 'only events of this field (repeat for several)', (v: string, prev: string[] | undefined) => [...(prev ?? []), v])
    .option('--limit <n>', 'most events shown (at most 10000)', (v) => positiveInt(v, '--limit'), 100)
    .action((text: string, flags: LogOptions & { field?: string[]; limit: number }) =>
      logAction<LogOptions & { field?: string[]; limit: number; text: string }>((c, f) => c.search(ctx, f))({ ...flags, text }),
    );

  withLog(program.command('maintain'))
    .description('merge shards, compact, refresh indexes, clean up; prints what it did')
    .action(logAction<LogOptions>((c, flags) => c.maintain(ctx, flags)));

  withLog(program.command('repair'))
    .description("rebuild the log's item markers, claims and records in the lease table (or coord.sqlite) from its events, under a new log id; needs its writers and maintainers stopped")
    .action(logAction<LogOptions>((c, flags) => c.rehome(ctx, flags, 'repair')));

  withLog(program.command('adopt'))
    .description('make a log copied or restored by other tools (aws s3 sync, cp -r, a backup) a log of its own where it lies: repair under a new log id')
    .action(logAction<LogOptions>((c, flags) => c.rehome(ctx, flags, 'adopt')));

  withLog(program.command('stats'))
    .description('base versions/rows/fragments, shards and their unmerged generations, indexes')
    .action(logAction<LogOptions>((c, flags) => c.stats(ctx, flags)));

  withLog(program.command('snapshot'))
    .description('name the log\'s current state (--name), so that export and report can read it later (--snapshot); or --list, or --drop one')
    .option('--name <name>', 'take a snapshot named <name> (1-128 of A-Z a-z 0-9 . _ -)', (v: string) => checkSnapshotName(v, '--name'))
    .option('--list', 'list the snapshots')
    .option('--drop <name>', 'delete snapshot <name>', (v: string) => checkSnapshotName(v, '--drop'))
    .action(async (flags: LogOptions & { name?: string; list?: boolean; drop?: string }) => {
      if ([flags.name !== undefined, flags.list === true, flags.drop !== undefined].filter(Boolean).length !== 1) {
        throw new UsageError('snapshot: give exactly one of --name <name>, --list, --drop <name>');
      }
      await logAction<typeof flags>((c, f) => c.snapshot(ctx, f))(flags);
    });

  withWhere(withLog(program.command('fork')))
    .description('a new experiment of this pipeline holding the selected items (--where or --items) as they were before step --from-step, with their lineage; they resume at that step')
    .option('--items <ids>', 'these items (comma-separated ids)', (v: string) => v.split(',').filter((s) => s.length > 0))
    .requiredOption('--from-step <step>', 'the step the forked items resume at: a step name or a step index')
    .requiredOption('--to-experiment <name>', "the fork's experiment (same root and pipeline)")
    .option('--children', 'also fork the items whose root or parent is a selected item')
    .action(async (flags: LogOptions & { where?: Where; items?: string[]; fromStep: string; toExperiment: string; children?: boolean }) => {
      if ((flags.where === undefined) === (flags.items === undefined)) throw new UsageError('fork: give exactly one of --where <expr> and --items <ids>');
      await logAction<typeof flags>((c, f) => c.fork(ctx, f))(flags);
    });

  withSnapshot(withWhere(withLog(program.command('report'))))
    .description('one self-contained HTML page: progress, steps, failures, items with their trajectories, shards')
    .option('--out <file>', 'where the page goes (a path or s3://bucket/key)', 'report.html')
    .option('--max-items <n>', 'items listed with trajectories at most (failed and in-progress first)', (v) => nonNegativeInt(v, '--max-items'), 5000)
    .option('--compare <experiment>', 'only the items fork <experiment> (same root and pipeline) was made from, beside the fork')
    .option('--field <name>', "with --compare: each side's distribution of this numeric field")
    .action(async (flags: LogOptions & { out: string; maxItems: number; where?: Where; snapshot?: string; compare?: string; field?: string }) => {
      if (flags.field !== undefined && flags.compare === undefined) throw new UsageError('report: --field needs --compare <experiment>');
      await logAction<typeof flags>((c, f) => c.report(ctx, f))(flags);
    });

  withSnapshot(withWhere(withLog(program.command('export'))))
    .description("finished items' final state as a dataset: one row per item (id, root/parent, status, attempts, fields)")
    .requiredOption('--out <file>', 'a path or s3://bucket/key')
    .addOption(new Option('--format <format>', 'default: parquet for a .parquet file, else jsonl').choices([...EXPORT_FORMATS]))
    .addOption(new Option('--status <status>', 'which items').choices([...EXPORT_STATUSES]).default('completed'))
    .option('--fields <a,b>', 'fields to export (default: all)', (v) => listOf(v, '--fields'))
    .option('--blobs <dir>', 'write blob fields as files here (a folder or s3:// prefix); rows hold their paths, relative to the output file where they can be')
    .action(
      logAction<LogOptions & { out: string; format?: ExportFormat; status: ExportStatus; fields?: string[]; blobs?: string; where?: Where; snapshot?: string }>((c, flags) => c.exportCmd(ctx, flags)),
    );

  withWhere(withLog(program.command('resume')))
    .description('items that stalled (not terminal, last event older than --stalled-for): listed, or with --send each sent a resume instruction')
    .requiredOption('--stalled-for <duration>', 'idle for more than this: 90s, 30m, 2h, 1d, 1h30m', (v) => parseDuration(v, '--stalled-for'))
    .option('--send', 'send each a resume instruction to the resume queue (default: only list them)')
    .addOption(new Option('--queue-url <url>', 'SQS queue URL of the resume instructions (with --send)').env('DGCL_RESUME_QUEUE_URL'))
    .option('--limit <n>', 'at most this many items', (v) => positiveInt(v, '--limit'))
    .action(async (o: ResumeOptions) => {
      // Before the log (and, with --send, before a child process is started for nothing).
      if (o.send && !/^https?:\/\/[^/]+\/.+/.test(o.queueUrl ?? '')) {
        throw new UsageError(o.queueUrl ? `--queue-url is not an SQS queue URL: ${JSON.stringify(o.queueUrl)}` : '--send needs --queue-url (or DGCL_RESUME_QUEUE_URL)');
      }
      await logAction<ResumeOptions>(async (_c, flags) => (await import('./resume.ts')).resume(ctx, flags))(o);
    });

  // Deletes nothing without --yes; loads no LanceDB (objects, leases and the lease table only).
  withLog(program.command('drop'))
    .description("delete a log whole: its objects, its records in the lease table, its leases; refused while its writers or maintenance run")
    .option('--yes', 'delete it (without: print what would be deleted, exit 2)')
    .action(async (flags: LogOptions & { yes?: boolean }) => {
      checkLogFlags(flags);
      await (await import('./admin-commands.ts')).drop(ctx, flags as LogFlags & { yes?: boolean });
    });

  withLog(program.command('copy'))
    .description("copy a log's events (every visible event, blobs included) to a new log at another root, pipeline or experiment")
    .option('--to-root <root>', 'the copy\'s root (default: --root)')
    .option('--to-pipeline <name>', 'the copy\'s pipeline (default: --pipeline)')
    .option('--to-experiment <name>', 'the copy\'s experiment (default: --experiment)')
    .action(async (flags: LogOptions & { toRoot?: string; toPipeline?: string; toExperiment?: string }) => {
      checkLogFlags(flags);
      await runner(async () => (await import('./admin-commands.ts')).copy(ctx, flags as LogFlags & typeof flags));
    });

  program
    .command('setup-lease-table')
    .description('create the DynamoDB lease table (on-demand, pk String, TTL on ttl) if missing; for local or hand-made set-ups (the CDK stack creates its own)')
    .addOption(new Option('--table <name>', 'table name').env('DGCL_LEASE_TABLE'))
    .action(async (o: { table?: string }) => {
      if (!o.table) throw new UsageError('missing --table (or DGCL_LEASE_TABLE)');
      const [{ DynamoDBClient }, { createLeaseTable }] = await Promise.all([import('@aws-sdk/client-dynamodb'), import('../lib/lease/dynamo.ts')]);
      const client = new DynamoDBClient({});
      try {
        await createLeaseTable(client, o.table);
      } finally {
        client.destroy();
      }
      ctx.out.line(`lease table ${o.table} ready`);
    });

  return program;
}

/** The options naming a log are there (else bad usage, before anything is loaded). */
function checkLogFlags(flags: LogOptions): void {
  for (const k of ['root', 'pipeline', 'experiment'] as const) {
    if (!flags[k]) throw new UsageError(`missing --${k} (or DGCL_${k.toUpperCase()})`);
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

/** The exit code of a command that threw `e` (cli/exit-codes.ts), its message written to stderr. */
function failed(e: unknown, err: Output): number {
  if (e instanceof PipeClosed) return 0;
  if (e instanceof CommanderError) {
    // help and version print and exit 0; everything else commander rejects is bad usage
    return e.exitCode === 0 ? 0 : 2;
  }
  if (e instanceof UsageError) {
    err.raw(`dgcl: ${e.message}\n`);
    return 2;
  }
  if (e instanceof MaintenanceFailed || e instanceof ResumesNotSent) {
    err.raw(`dgcl: ${e instanceof MaintenanceFailed ? 'maintain' : 'resume'}: ${e.message}\n`);
    return e.exitCode;
  }
  if (isDgclError(e)) {
    err.raw(`dgcl: ${e.code}: ${e.message}\n`);
    return exitCodeOf(e);
  }
  err.raw(`dgcl: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  return 1;
}

/** Run one command line (`argv` without the node and script paths); resolves to the exit code. */
export async function main(argv: string[], io: Io = processIo(), options: MainOptions = {}): Promise<number> {
  const ctx: Ctx = { io, out: new Output(io.stdout), err: new Output(io.stderr) };
  const { isolate } = options;
  let isolated: number | undefined;
  const runner: Runner = isolate
    ? async () => {
        isolated = await isolate(argv);
      }
    : (here) => here();
  let code: number;
  try {
    await buildProgram(ctx, runner).parseAsync(argv, { from: 'user' });
    code = isolated ?? 0;
  } catch (e) {
    code = failed(e, ctx.err);
  }
  const writeError = ctx.out.error;
  if (writeError) {
    ctx.err.raw(`dgcl: cannot write to stdout: ${writeError.message}\n`);
    return 1;
  }
  return code;
}
