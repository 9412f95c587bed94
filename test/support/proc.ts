import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

export interface Proc {
  child: ChildProcess;
  lines: string[];
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
  onLine(fn: (line: string) => void): void;
}

/** Start a TypeScript script of this repo in its own node process (tsx loader). */
export function startTs(script: string, args: string[] = [], env: Record<string, string> = {}, stdin?: string): Proc {
  return startNode(script, args, env, stdin, ['--import', 'tsx']);
}

/** Start a script of this repo in its own node process. */
export function startNode(script: string, args: string[] = [], env: Record<string, string> = {}, stdin?: string, nodeArgs: string[] = []): Proc {
  const child = spawn(process.execPath, [...nodeArgs, script, ...args], {
    cwd: REPO,
    env: { ...process.env, ...env },
    stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (stdin !== undefined) {
    child.stdin!.end(stdin);
  }
  const lines: string[] = [];
  const listeners: Array<(l: string) => void> = [];
  createInterface({ input: child.stdout! }).on('line', (l) => {
    lines.push(l);
    for (const f of listeners) f(l);
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += String(d)));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stderr })),
  );
  return { child, lines, exit, onLine: (f) => listeners.push(f) };
}

/** Run the CLI as a user does, in its own process: the compiled bin (bin/dgcl.js, `npm run build`). */
export async function dgcl(args: string[], opts: { stdin?: string; env?: Record<string, string> } = {}) {
  const p = startNode('bin/dgcl.js', args, opts.env ?? {}, opts.stdin);
  const r = await p.exit;
  return { code: r.code, stdout: p.lines.join('\n'), stderr: r.stderr };
}
