/**
 * The CLI as a process: the compiled bin (bin/dgcl.js runs dist/, from `npm run build`), a reader
 * that closes the pipe early, what a command loads before it runs, the demo's worker processes,
 * and the Node version checks of the bin and of the library.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { MIN_NODE } from '../lib/runtime.ts';
import { run } from './support/cli.ts';
import { dgcl } from './support/proc.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const root = mkdtempSync(path.join(tmpdir(), 'dgcl-cli-process-'));
const flags = ['--root', root, '--pipeline', 'p', '--experiment', 'many'];
/** Enough JSON Lines of `items --json` to overflow a pipe's buffer many times over. */
const ITEMS = 3000;

/** The machine's own node (PATH without any node_modules/.bin): older than the package needs. */
const systemPath = (process.env.PATH ?? '').split(path.delimiter).filter((d) => !d.includes('node_modules')).join(path.delimiter);
const systemNode = spawnSync('node', ['--version'], { env: { ...process.env, PATH: systemPath }, encoding: 'utf8' }).stdout.trim();

beforeAll(async () => {
  const batches = Array.from({ length: ITEMS }, (_, i) => JSON.stringify({ itemId: `it-${String(i).padStart(5, '0')}`, runId: 'r', create: {}, step: { name: 'load', index: 0 } }));
  const r = await run(['append', ...flags], { stdin: `${batches.join('\n')}\n` });
  expect(r.code, r.stderr).toBe(0);
});

describe('dgcl as a process', () => {
  it('a reader that closes the pipe early ends the command quietly with exit 0', () => {
    const cmd = `"${process.execPath}" bin/dgcl.js items --json ${flags.join(' ')} | head -n 1; echo "dgcl exit \${PIPESTATUS[0]}" >&2`;
    const r = spawnSync('bash', ['-c', cmd], { cwd: REPO, encoding: 'utf8' });
    expect(JSON.parse(r.stdout.trim()).itemId).toBe('it-00000');
    expect(r.stderr).toBe('dgcl exit 0\n');
  });

  it('--help loads neither LanceDB nor the AWS SDK; a read of a local root loads LanceDB and one Arrow, no AWS SDK', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-loads-'));
    const hook = path.join(dir, 'hook.mjs');
    const list = path.join(dir, 'packages.txt');
    // Records every package a module of the process resolves into.
    writeFileSync(
      hook,
      `import { registerHooks } from 'node:module';
import { appendFileSync } from 'node:fs';
registerHooks({ resolve(spec, ctx, next) {
  const r = next(spec, ctx);
  const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(r.url);
  // apache-arrow's two builds apart: its ES modules end in .mjs.
  if (m) appendFileSync(${JSON.stringify(list)}, m[1] + (m[1] === 'apache-arrow' && r.url.endsWith('.mjs') ? ' (ES modules)' : '') + '\\n');
  return r;
} });
`,
    );
    const loads = (args: string[]) => {
      writeFileSync(list, '');
      const r = spawnSync(process.execPath, ['--import', hook, 'bin/dgcl.js', ...args], { cwd: REPO, encoding: 'utf8' });
      return { code: r.status, stderr: r.stderr, packages: new Set(readFileSync(list, 'utf8').split('\n').filter(Boolean)) };
    };
    const help = loads(['--help']);
    expect(help.code, help.stderr).toBe(0);
    expect([...help.packages].sort()).toEqual(['commander']);
    const usage = loads(['fold', '--item', 'x']);
    expect(usage.code).toBe(2);
    expect([...usage.packages].filter((p) => p.startsWith('@lancedb') || p.startsWith('@aws-sdk'))).toEqual([]);
    const items = loads(['items', ...flags, '--status', 'failed']);
    expect(items.code, items.stderr).toBe(0);
    expect(items.packages.has('@lancedb/lancedb')).toBe(true);
    expect(items.packages.has('apache-arrow')).toBe(true);
    expect([...items.packages].filter((p) => p.startsWith('@aws-sdk') || ['apache-arrow (ES modules)', 'hyparquet-writer', 'chart.js', 'cli-progress'].includes(p))).toEqual([]);
  });

  it('--help, bad usage and an unknown command are answered by one process; a log command runs in a child behind the stderr filter, unless DGCL_RAW_STDERR=1', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-procs-'));
    const hook = path.join(dir, 'hook.mjs');
    const list = path.join(dir, 'pids.txt');
    // Preloaded into every node process of the command (the bin passes its flags on to its child).
    writeFileSync(hook, `import { appendFileSync } from 'node:fs';\nappendFileSync(${JSON.stringify(list)}, process.pid + '\\n');\n`);
    const processes = (args: string[], env: Record<string, string> = {}) => {
      writeFileSync(list, '');
      const r = spawnSync(process.execPath, ['--import', hook, 'bin/dgcl.js', ...args], { cwd: REPO, encoding: 'utf8', env: { ...process.env, ...env } });
      return { code: r.status, stderr: r.stderr, count: readFileSync(list, 'utf8').split('\n').filter(Boolean).length };
    };
    expect(processes(['--help'])).toMatchObject({ code: 0, count: 1 });
    expect(processes(['items', '--root', root])).toMatchObject({ code: 2, count: 1 });
    expect(processes(['items', ...flags, '--status', 'nonsense'])).toMatchObject({ code: 2, count: 1 });
    expect(processes(['bogus'])).toMatchObject({ code: 2, count: 1 });
    expect(processes(['stats', ...flags])).toMatchObject({ code: 0, count: 2 });
    // The child's exit code is the command's: a log that does not exist is 66.
    const missing = processes(['stats', '--root', root, '--pipeline', 'p', '--experiment', 'typo']);
    expect(missing, missing.stderr).toMatchObject({ code: 66, count: 2 });
    expect(missing.stderr).toMatch(/^dgcl: LOG_NOT_FOUND: .*experiments of pipeline "p": many\n$/);
    expect(processes(['stats', ...flags], { DGCL_RAW_STDERR: '1' })).toMatchObject({ code: 0, count: 1 });
  });

  it('a reader of stderr that goes away costs the messages, not the exit code', () => {
    const cmd = `"${process.execPath}" bin/dgcl.js stats --root ${root} --pipeline p --experiment typo 2> >(exec true); echo "dgcl exit $?"`;
    const r = spawnSync('bash', ['-c', cmd], { cwd: REPO, encoding: 'utf8' });
    expect(r.stdout).toBe('dgcl exit 66\n');
  });

  it('demo: a SIGKILLed worker, a resume from every cursor, no step twice, maintenance merges the dead shard', async () => {
    const demoRoot = mkdtempSync(path.join(tmpdir(), 'dgcl-demo-'));
    const r = await dgcl(['demo', '--root', demoRoot, '--items', '10', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout.split('\n').at(-1)!);
    expect(summary.crash.killed).toBe(true);
    expect(summary.resumedBatches).toBeGreaterThan(0);
    expect(summary.rootItems).toBe(10);
    expect(summary.childItems).toBe(20);
    expect(summary.repeatedSteps).toBe(0);
    expect(summary.violations).toBe(0);
    expect(summary.unfinished).toBe(0);
    expect(summary.maintenance.readsUnchanged).toBe(true);
    expect(summary.maintenance.unmergedShards).toBe(0);
    expect(summary.maintenance.baseRows).toBe(summary.events);
    expect(summary.log.startsWith(demoRoot)).toBe(true);
    // The demo ends by writing its report page and printing its path.
    expect(summary.report).toBe(path.join(demoRoot, `${summary.experiment}-report.html`));
    expect(readFileSync(summary.report, 'utf8')).toContain('<script type="application/json" id="dgcl-data">');
  });
});

describe('Node version (the package needs 22.13; LanceDB 0.39 needs 22, local logs node:sqlite)', () => {
  const old = () => {
    const [major = 0, minor = 0] = systemNode.replace(/^v/, '').split('.').map(Number);
    expect(major < MIN_NODE[0] || (major === MIN_NODE[0] && minor < MIN_NODE[1]), `these tests need the machine's own node to be older than ${MIN_NODE.join('.')}; it is ${systemNode}`).toBe(true);
    return { ...process.env, PATH: systemPath };
  };

  it('the tests run on it (npm scripts and npx take the pinned node devDependency)', () => {
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(22);
  });

  it("bin/dgcl.js of a source checkout started by the shell's older node runs on the pinned one: no AWS SDK Node-version warning", () => {
    const env = { ...old(), DGCL_LEASE_TABLE: 'dgcl-leases', AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:9', AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:9', AWS_ACCESS_KEY_ID: 'k', AWS_SECRET_ACCESS_KEY: 's', AWS_REGION: 'us-east-1', AWS_MAX_ATTEMPTS: '1' };
    const r = spawnSync('node', ['bin/dgcl.js', 'fold', '--root', 's3://dgcl-node-check/x', '--pipeline', 'p', '--experiment', 'e', '--item', 'x'], { cwd: REPO, env });
    const stderr = String(r.stderr);
    // It reached the S3 client (closed port: UNAVAILABLE, exit 75), and the SDK did not warn about the Node version.
    expect(r.status, stderr).toBe(75);
    expect(stderr).toContain('ECONNREFUSED');
    expect(stderr).not.toMatch(/NodeVersionSupportWarning|require node >=22/);
  });

  it('the bin of an installed package (no pinned node) on an older node says which Node it needs', () => {
    // The package's layout: bin/ beside package.json, no tsconfig.json, no node_modules/node.
    const pkg = mkdtempSync(path.join(tmpdir(), 'dgcl-installed-'));
    mkdirSync(path.join(pkg, 'bin'));
    copyFileSync(path.join(REPO, 'bin', 'dgcl.js'), path.join(pkg, 'bin', 'dgcl.js'));
    writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: 'datagen-checkpoint-log', type: 'module' }));
    const r = spawnSync('node', [path.join(pkg, 'bin', 'dgcl.js'), '--help'], { env: old(), encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(`dgcl: datagen-checkpoint-log needs Node >= ${MIN_NODE.join('.')} (found ${systemNode})\n`);
  });

  it('importing the library on an older node fails at once, saying which Node it needs', () => {
    for (const entry of ['dist/lib/index.js', 'dist/lib/langgraph/index.js', 'dist/functions/fold.js']) {
      const r = spawnSync('node', ['--input-type=module', '-e', `await import(${JSON.stringify(path.join(REPO, entry))})`], { env: old(), encoding: 'utf8' });
      expect(r.status, entry).toBe(1);
      expect(r.stderr, entry).toContain(`UnsupportedNodeError: datagen-checkpoint-log needs Node >= ${MIN_NODE.join('.')} (found ${systemNode})`);
    }
  });
});
