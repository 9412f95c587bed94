/**
 * Start-up of CLI commands as a user pays it, from process start to exit, against a baseline
 * measured in the same run: a process that only imports LanceDB (`node -e
 * "import('@lancedb/lancedb')"`), the least any command that reads a log must load. Prints each
 * command's median wall time and its ratio to the baseline's (pair by pair: runs interleave, so
 * a change in machine load affects both alike); asserts nothing.
 *
 *   npm run bench:cli                          # builds dist/, makes a demo log, 7 runs each
 *   npm run bench:cli -- --runs 15
 *   npm run bench:cli -- --root R --experiment E   # an existing log (pipeline `demo`)
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

function must(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { cwd: REPO, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

console.log(`node ${process.version}, ${runs} runs per command`);
must('npm', ['run', 'build', '--silent']);

let root = flag('--root');
let experiment = flag('--experiment');
let made: string | undefined;
if (!root || !experiment) {
  made = mkdtempSync(path.join(tmpdir(), 'dgcl-bench-cli-'));
  root = made;
  must(process.execPath, ['bin/dgcl.js', 'demo', '--root', root]);
  experiment = readdirSync(path.join(root, 'datagen_checkpoints', 'demo'))[0]!;
}

const log = ['--root', root, '--pipeline', 'demo', '--experiment', experiment];
const baseline = { name: "import('@lancedb/lancedb')", args: ['-e', "import('@lancedb/lancedb')"] };
const commands = [
  { name: 'dgcl --help', args: ['bin/dgcl.js', '--help'] },
  { name: 'dgcl items --json', args: ['bin/dgcl.js', 'items', ...log, '--json'] },
  { name: 'dgcl fold --json', args: ['bin/dgcl.js', 'fold', ...log, '--item', 'doc-000', '--json'] },
  { name: 'dgcl failures', args: ['bin/dgcl.js', 'failures', ...log] },
];

function once(args: string[]): number {
  const t0 = performance.now();
  must(process.execPath, args);
  return performance.now() - t0;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

console.log(`wall time per process (median of ${runs}), and its ratio to the baseline's run beside it`);
for (const c of commands) {
  once(c.args);
  once(baseline.args);
  const ms: number[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < runs; i++) {
    const a = once(c.args);
    const b = once(baseline.args);
    ms.push(a);
    ratios.push(a / b);
  }
  console.log(`  ${c.name.padEnd(20)} ${(median(ms) / 1000).toFixed(2)} s   ${median(ratios).toFixed(2)}x ${baseline.name}`);
}
if (made) rmSync(made, { recursive: true, force: true });
