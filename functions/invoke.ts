/**
 * Invoke a handler locally, by hand, the way Lambda would:
 *
 *   DGCL_ROOT=./data npx tsx functions/invoke.ts append event.json
 *   echo '{"pipeline":"p","experiment":"e","itemId":"doc-1"}' | DGCL_ROOT=./data npx tsx functions/invoke.ts fold -
 *   DGCL_ROOT=./data npx tsx functions/invoke.ts append --sqs batches.jsonl   # one SQS record per line
 *   DGCL_ROOT=./data npx tsx functions/invoke.ts resume --dry-run event.json  # print, do not send
 *   DGCL_ROOT=./data npx tsx functions/invoke.ts maintenance                   # event {}
 *
 * Options: `--sqs` wraps each JSON line of the input (each must carry pipeline and experiment)
 * as a record of an SQS event; `--eventbridge` wraps the input as an EventBridge event's
 * `detail`; `--timeout-ms N` is the remaining time the context reports (default 60000);
 * `--dry-run` (resume) collects the instructions in memory and prints them instead of sending.
 * Prints the handler's result as JSON on stdout; the handler's logs go to stderr. On error prints `{errorType, errorMessage}` (what Lambda
 * reports) on stderr and exits 2 for InvalidInputError, 1 otherwise. Before exiting it closes the
 * logs it opened (merging the shard it wrote, releasing its writer slot).
 */
import { Console } from 'node:console';
import { readFileSync } from 'node:fs';
import { eventBridgeEvent, lambdaContext, sqsEvent } from './shared/events.ts';
import { logCache } from './shared/logs.ts';
import { MemoryResumeSink } from './shared/resume-sink.ts';

// Logs go to stderr, the result alone to stdout: Powertools in dev mode writes through the global
// console (pretty-printed, metrics off unless POWERTOOLS_METRICS_DISABLED=false).
process.env.POWERTOOLS_DEV ??= 'true';
globalThis.console = new Console({ stdout: process.stderr, stderr: process.stderr });

const HANDLERS = ['append', 'fold', 'resume', 'maintenance'] as const;
type Name = (typeof HANDLERS)[number];

const USAGE = `usage: npx tsx functions/invoke.ts ${HANDLERS.join('|')} [event.json | -] [--sqs | --eventbridge] [--timeout-ms N] [--dry-run]`;

async function main(argv: string[]): Promise<number> {
  const args = [...argv];
  const flag = (f: string) => {
    const i = args.indexOf(f);
    if (i < 0) return false;
    args.splice(i, 1);
    return true;
  };
  const option = (f: string) => {
    const i = args.indexOf(f);
    if (i < 0) return undefined;
    const v = args[i + 1];
    args.splice(i, 2);
    return v;
  };
  const sqs = flag('--sqs');
  const eventBridge = flag('--eventbridge');
  const dryRun = flag('--dry-run');
  const timeoutMs = Number(option('--timeout-ms') ?? 60_000);
  const [name, file] = args as [string | undefined, string | undefined];
  if (!name || !(HANDLERS as readonly string[]).includes(name) || !Number.isFinite(timeoutMs) || args.length > 2) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }

  const text = file === undefined ? (process.stdin.isTTY ? '' : readFileSync(0, 'utf8')) : readFileSync(file === '-' ? 0 : file, 'utf8');
  let event: unknown;
  try {
    if (sqs) {
      event = sqsEvent(text.split('\n').filter((l) => l.trim() !== ''));
    } else {
      const parsed: unknown = text.trim() === '' ? {} : JSON.parse(text);
      event = eventBridge ? eventBridgeEvent(parsed) : parsed;
    }
  } catch (e) {
    process.stderr.write(`the event is not valid JSON: ${e instanceof Error ? e.message : String(e)}\n`);
    return 2;
  }

  const handler = await load(name as Name, dryRun);
  const context = lambdaContext(`dgcl-${name}-local`, timeoutMs);
  try {
    const result = await handler(event, context);
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (e) {
    const err = e as { name?: string; message?: string };
    process.stderr.write(`${JSON.stringify({ errorType: err.name ?? 'Error', errorMessage: err.message ?? String(e) })}\n`);
    // Input errors (InvalidInputError and its item-state subclasses) exit 2.
    return ['InvalidInputError', 'ItemExistsError', 'ItemNotFoundError', 'ItemTerminalError'].includes(err.name ?? '') ? 2 : 1;
  } finally {
    await logCache.closeAll();
  }
}

type AnyHandler = (event: unknown, context: ReturnType<typeof lambdaContext>) => Promise<unknown>;

async function load(name: Name, dryRun: boolean): Promise<AnyHandler> {
  switch (name) {
    case 'append':
      return (await import('./append.ts')).handler as AnyHandler;
    case 'fold':
      return (await import('./fold.ts')).handler as AnyHandler;
    case 'maintenance':
      return (await import('./maintenance.ts')).handler as AnyHandler;
    case 'resume': {
      const m = await import('./resume.ts');
      if (!dryRun) return m.handler as AnyHandler;
      return m.createResumeHandler({ sink: () => new MemoryResumeSink() }) as AnyHandler;
    }
  }
}

process.exitCode = await main(process.argv.slice(2));
