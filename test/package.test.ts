/**
 * The package as another project gets it: `npm pack` of a clean copy of the sources (no dist/,
 * so only the pack's own build can put it there), the tarball installed into an empty project
 * (without a warning), and that project using it on Node 22 with nothing of this repo on its
 * module path: a plain .mjs file, a type-checked .ts file, and `npx dgcl demo`; on the machine's
 * older Node, the library and the bin say which Node they need.
 */
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const BIN = path.join(REPO, 'node_modules', '.bin');
const NODE = path.join(BIN, 'node');
const NAME = 'datagen-checkpoint-log';
// npm, npx and every `node` they start run on the pinned Node 22.
const env = { ...process.env, PATH: `${BIN}${path.delimiter}${process.env.PATH ?? ''}` };
/** The machine's own node (PATH without any node_modules/.bin), older than 22.13 on this machine. */
const systemPath = (process.env.PATH ?? '').split(path.delimiter).filter((d) => !d.includes('node_modules')).join(path.delimiter);
const systemNode = spawnSync('node', ['--version'], { env: { ...process.env, PATH: systemPath }, encoding: 'utf8' }).stdout.trim();

function run(cmd: string, args: string[], opts: SpawnSyncOptions & { cwd: string }) {
  const r = spawnSync(cmd, args, { env, encoding: 'utf8', timeout: 180_000, maxBuffer: 64 << 20, ...opts });
  const out = { status: r.status, stdout: String(r.stdout), stderr: String(r.stderr) };
  return { ...out, why: `${cmd} ${args.join(' ')} -> ${r.status} ${r.error ?? ''}\n${out.stderr}\n${out.stdout}`.slice(0, 8000) };
}

let tmp: string;
let consumer: string;
let packed: string[];
let installOutput: string;

beforeAll(() => {
  tmp = mkdtempSync(path.join(tmpdir(), 'dgcl-package-'));
  // Packing a copy keeps this repo's own dist/ untouched while other tests run the bin from it.
  const stage = path.join(tmp, 'stage');
  mkdirSync(stage);
  for (const f of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'README.md', 'lib', 'cli', 'functions', 'bin']) {
    cpSync(path.join(REPO, f), path.join(stage, f), { recursive: true });
  }
  symlinkSync(path.join(REPO, 'node_modules'), path.join(stage, 'node_modules'), 'dir');
  const pack = run('npm', ['pack', '--json', '--loglevel=error', '--pack-destination', tmp], { cwd: stage });
  expect(pack.status, pack.why).toBe(0);
  // npm prints the lifecycle scripts' output before the JSON.
  const [info] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('[\n'))) as Array<{ filename: string; files: Array<{ path: string }> }>;
  packed = info!.files.map((f) => f.path);

  consumer = path.join(tmp, 'consumer');
  mkdirSync(consumer);
  writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  // Warnings shown: the install must have none.
  const install = run('npm', ['install', path.join(tmp, info!.filename), '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=warn'], { cwd: consumer });
  expect(install.status, install.why).toBe(0);
  installOutput = install.stdout + install.stderr;
}, 300_000);

// The installed tree is about 270 MB (LanceDB's native module).
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('the packed package', () => {
  it('installs without a warning: no lifecycle script in its package.json (npm flags a prepare script it will not run)', () => {
    expect(installOutput).not.toMatch(/npm warn/i);
    const manifest = JSON.parse(readFileSync(path.join(consumer, 'node_modules', NAME, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    for (const s of ['preinstall', 'install', 'postinstall', 'prepare']) expect(manifest.scripts?.[s], s).toBeUndefined();
  });

  it('holds the compiled code, types and bin, and no TypeScript sources', () => {
    for (const f of ['dist/lib/index.js', 'dist/lib/index.d.ts', 'dist/lib/index.js.map', 'dist/cli/main.js', 'dist/functions/fold.js', 'bin/dgcl.js']) {
      expect(packed).toContain(f);
    }
    expect(packed.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
    expect(packed.filter((f) => !/^(dist\/(lib|cli|functions)\/|bin\/|package\.json$|README\.md$)/.test(f))).toEqual([]);
    // tsx is for development only: the installed tree must not have it.
    expect(existsSync(path.join(consumer, 'node_modules', 'tsx'))).toBe(false);
  });

  it('a plain .mjs file on Node 22 imports openLog, appends and folds', () => {
    writeFileSync(
      path.join(consumer, 'use.mjs'),
      `import { openLog } from '${NAME}';
import { handler } from '${NAME}/functions/fold';
const log = await openLog({ root: process.argv[2], pipeline: 'p', experiment: 'e' });
const [ack] = await log.append([{ itemId: 'doc-1', runId: 'r1', create: {}, step: { name: 'load', index: 0 }, set: { answer: '42', n: 7 } }]);
const state = await log.fold('doc-1');
await log.close();
console.log(JSON.stringify({ resolved: import.meta.resolve('${NAME}'), node: process.version, handler: typeof handler, ack, state }));
`,
    );
    const r = run(NODE, ['use.mjs', path.join(tmp, 'root-mjs')], { cwd: consumer });
    expect(r.status, r.why).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    expect(out.resolved).toBe(`file://${path.join(consumer, 'node_modules', NAME, 'dist', 'lib', 'index.js')}`);
    expect(out.node).toMatch(/^v22\./);
    expect(out.handler).toBe('function');
    expect(out.ack).toMatchObject({ itemId: 'doc-1', firstSeq: 1, lastSeq: 4, duplicate: false });
    expect(out.state).toMatchObject({ itemId: 'doc-1', status: 'in_progress', fields: { answer: '42', n: 7 }, lastSeq: 4, failures: [], violations: [] });
    expect(out.state.cursor).toMatchObject({ stepName: 'load', stepIndex: 0, attempt: 1 });
  });

  it('a .ts file using the types type-checks against the installed package', () => {
    writeFileSync(
      path.join(consumer, 'use.ts'),
      `import { openLog, InvalidInputError, type Ack, type CheckpointBatchInput, type ItemState, type ItemStatus } from '${NAME}';

const batch: CheckpointBatchInput = { itemId: 'doc-1', runId: 'r1', create: {}, step: { name: 'load', index: 0 } };
const log = await openLog({ root: './data', pipeline: 'p', experiment: 'e' });
const acks: Ack[] = await log.append([batch]);
const state: ItemState = await log.fold(acks[0]!.itemId);
const status: ItemStatus = state.status;
const code: string = new InvalidInputError('x', { field: 'f' }).code;
// If the package's types were missing (everything \`any\`), these lines would not be errors and
// tsc would fail on the unused directives.
// @ts-expect-error fold takes an item id string
await log.fold(42);
// @ts-expect-error not an option
await openLog({ root: './data', pipeline: 'p', experiment: 'e', colour: 'red' });
export { status, code };
`,
    );
    writeFileSync(
      path.join(consumer, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          // The package's own .d.ts files are checked too (their imports must resolve).
          skipLibCheck: false,
          types: ['node'],
          typeRoots: [path.join(REPO, 'node_modules', '@types')],
        },
        files: ['use.ts'],
      }),
    );
    const r = run(path.join(BIN, 'tsc'), ['-p', 'tsconfig.json'], { cwd: consumer });
    expect(r.status, r.why).toBe(0);
    expect(r.stdout + r.stderr).toBe('');
  });

  it('npx dgcl demo passes its self-checks', () => {
    const r = run('npx', ['--no-install', 'dgcl', 'demo', '--root', path.join(tmp, 'demo')], { cwd: consumer });
    expect(r.status, r.why).toBe(0);
    expect(r.stdout).toContain('checks: no step completed twice; 0 fencing violations; 0 unfinished;');
    expect(r.stdout).toContain('every item reads the same as before: yes');
    expect(readFileSync(path.join(consumer, 'node_modules', '.bin', 'dgcl'), 'utf8')).toContain("'../dist/cli/main.js'");
  }, 180_000);

  it("on the machine's older Node, importing the library fails at once saying which Node it needs", () => {
    writeFileSync(path.join(consumer, 'old.mjs'), `import { openLog } from '${NAME}';\nawait openLog({ root: process.argv[2], pipeline: 'p', experiment: 'e' });\n`);
    const r = run('node', ['old.mjs', path.join(tmp, 'root-old')], { cwd: consumer, env: { ...process.env, PATH: systemPath } });
    expect(r.status, r.why).toBe(1);
    expect(r.stderr).toContain(`UnsupportedNodeError: datagen-checkpoint-log needs Node >= 22.13 (found ${systemNode})`);
    expect(r.stderr).not.toMatch(/npm install|INTERNAL/);
  });

  it("on the machine's older Node, the installed bin says which Node it needs (not to run npm install)", () => {
    const r = run('node', [path.join(consumer, 'node_modules', '.bin', 'dgcl'), '--help'], { cwd: consumer, env: { ...process.env, PATH: systemPath } });
    expect(r.status, r.why).toBe(1);
    expect(r.stderr).toBe(`dgcl: datagen-checkpoint-log needs Node >= 22.13 (found ${systemNode})\n`);
  });
});
