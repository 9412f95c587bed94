/** Start bench/child.ts workers, release them together (barrier), collect their results. */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ChildResult } from './child.ts';

const CHILD = fileURLToPath(new URL('./child.ts', import.meta.url));

interface Running {
  ready: Promise<void>;
  result: Promise<ChildResult>;
  go(): void;
}

function start(args: string[]): Running {
  // process.execPath is the pinned Node 22 when run through npm scripts / npx tsx.
  const p = spawn(process.execPath, ['--no-warnings', '--import', 'tsx', CHILD, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  let onReady: () => void = () => undefined;
  const ready = new Promise<void>((res) => (onReady = res));
  const result = new Promise<ChildResult>((res, rej) => {
    let got: ChildResult | undefined;
    createInterface({ input: p.stdout! }).on('line', (line) => {
      if (line === 'ready') onReady();
      else if (line.startsWith('result ')) got = JSON.parse(line.slice(7)) as ChildResult;
    });
    p.on('exit', (code) => (got && code === 0 ? res(got) : rej(new Error(`bench child ${args.join(' ')} exited ${code}`))));
  });
  return { ready, result, go: () => p.stdin!.end('go\n') };
}

export interface Workers {
  /** Resolves when every worker has started and waits at the barrier (rejects if one died). */
  ready: Promise<void>;
  /** Release them all at once; their results in argument order. */
  go(): Promise<ChildResult[]>;
}

/**
 * Start workers now, release later: groups that are timed one after the other can start up
 * together (start-up is most of a worker's CPU on this busy machine) and wait idle, blocked on
 * stdin, while the other group runs.
 */
export function spawnWorkers(argLists: string[][]): Workers {
  const kids = argLists.map(start);
  const results = Promise.all(kids.map((k) => k.result));
  results.catch(() => undefined); // surfaced by ready or go
  const ready = Promise.race([Promise.all(kids.map((k) => k.ready)).then(() => undefined), results.then(() => undefined)]);
  return {
    ready,
    go: () => {
      for (const k of kids) k.go();
      return results;
    },
  };
}

/** Run workers with a start barrier; returns their results (in argument order). */
export async function runTogether(argLists: string[][]): Promise<ChildResult[]> {
  const w = spawnWorkers(argLists);
  await w.ready;
  return w.go();
}

/** Events per second over the union of the workers' timed spans. */
export function aggregateRate(rs: readonly ChildResult[]): number {
  const t0 = Math.min(...rs.map((r) => r.startMs));
  const t1 = Math.max(...rs.map((r) => r.endMs));
  return rs.reduce((s, r) => s + r.events, 0) / ((t1 - t0) / 1000);
}
