/**
 * Wall time of one CLI read command (`dgcl items` on the demo's log, a local root) as a user
 * pays it, from process start to exit: the TypeScript sources through tsx (how bin/dgcl.js ran
 * them before the package was compiled) against the compiled dist/ (how it runs now). Prints
 * the median of several runs per variant; asserts nothing.
 *
 *   npm run bench:cli                          # builds dist/, makes a demo log, 7 runs each
 *   npm run bench:cli -- --runs 15
 *   npm run bench:cli -- --root R --experiment E   # an existing log (pipeline `demo`)
 *
 * `tsx, cold` disables tsx's transform cache (a first call, a fresh container or CI machine);
 * `tsx, warm` reuses it (repeated calls on one machine). Runs of the variants interleave, so a
 * change in machine load affects them alike; one unmeasured warm-up run each goes first.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('..', import.meta.url));

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const runs = Number(flag('--runs') ?? 7);
if (!Number.isSafeInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer, got ${flag('--runs')}`);

function must(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): string {
  const r = spawnSync(cmd, args, { cwd: REPO, env, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

console.log(`node ${process.version}, ${runs} runs per variant`);
must('npm', ['run', 'build', '--silent']);

let root = flag('--root');
let experiment = flag('--experiment');
let made: string | undefined;
if (!root || !experiment) {
  made = mkdtempSync(path.join(tmpdir(), 'dgcl-bench-cli-'));
  root = made;
  const t0 = performance.now();
  must(process.execPath, ['bin/dgcl.js', 'demo', '--root', root]);
  experiment = readdirSync(path.join(root, 'datagen_checkpoints', 'demo'))[0]!;
  console.log(`demo log made in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${root} (experiment ${experiment})`);
}

const command = ['items', '--root', root, '--pipeline', 'demo', '--experiment', experiment, '--json'];
const noCache = { ...process.env, TSX_DISABLE_CACHE: '1' };
const variants: Array<{ name: string; args: string[]; env: NodeJS.ProcessEnv }> = [
  { name: 'tsx, cold (before)', args: ['--import', 'tsx/esm', 'cli/main.ts', ...command], env: noCache },
  { name: 'tsx, warm (before)', args: ['--import', 'tsx/esm', 'cli/main.ts', ...command], env: process.env },
  { name: 'dist (after)', args: ['bin/dgcl.js', ...command], env: process.env },
];

function once(v: (typeof variants)[number]): { ms: number; stdout: string } {
  const t0 = performance.now();
  const stdout = must(process.execPath, v.args, v.env);
  return { ms: performance.now() - t0, stdout };
}

const times = new Map<string, number[]>(variants.map((v) => [v.name, []]));
// Every variant must print the same thing, or they are not doing the same work.
const outputs = new Set(variants.map((v) => once(v).stdout));
if (outputs.size !== 1) throw new Error('the variants printed different output');
const items = [...outputs][0]!.trim().split('\n').length; // JSON Lines, one item each
for (let i = 0; i < runs; i++) {
  for (const v of variants) times.get(v.name)!.push(once(v).ms);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const sec = (x: number) => `${(x / 1000).toFixed(2)} s`;
console.log(`\`dgcl items --json\` on a local root, ${items} items listed: wall time per process`);
const after = median(times.get('dist (after)')!);
for (const v of variants) {
  const xs = times.get(v.name)!;
  const m = median(xs);
  console.log(`  ${v.name.padEnd(20)} median ${sec(m)}  min ${sec(Math.min(...xs))}  max ${sec(Math.max(...xs))}  (${(m / after).toFixed(2)}x dist)`);
}
if (made) rmSync(made, { recursive: true, force: true });
