/**
 * Builds the Lambda layer that ships LanceDB's native module (and the JavaScript packages that
 * load it) from the project's installed node_modules, without npm ci and without Docker.
 *
 * Layout of the result (a Lambda layer asset folder):
 *   <outDir>/nodejs/node_modules/@lancedb/lancedb/...
 *   <outDir>/nodejs/node_modules/@lancedb/lancedb-linux-x64-gnu/lancedb.linux-x64-gnu.node
 *   <outDir>/nodejs/node_modules/apache-arrow/...            (+ tslib, flatbuffers, ...)
 *   <outDir>/dgcl-layer.json                                  (what is inside, sizes, fingerprint)
 *
 * Which packages go in is not a hand-kept list: esbuild traces what `require()`/`import` of the
 * LAYER_SPECIFIERS (`@lancedb/lancedb`, `apache-arrow`, the Arrow subpath lib/ imports) reach (the
 * optional embedding providers excluded), then the native package for the target is added. Whole packages are copied, minus what is
 * never loaded at run time (type declarations, TypeScript sources, source maps, docs, Arrow's CLI
 * and browser bundles). Every traced file is checked to be present afterwards.
 *
 * The native module carries a full ELF symbol table, a sizeable part of the layer (its size:
 * docs/design/performance.md, "Lambda package sizes"); `strip --strip-unneeded` removes it (the dynamic symbols Node-API needs stay), when `strip` is on the PATH. The stripped
 * module is then loaded once, as an ES module import and through CommonJS, from the layer folder
 * alone (so a missing dependency cannot be masked by the project's node_modules).
 *
 * The build is cached: if `<outDir>/dgcl-layer.json` has the same fingerprint (package versions,
 * native module size, strip choice, builder format), nothing is rebuilt.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Metafile } from 'esbuild';

/** Bump when the layout or the pruning rules change (invalidates cached builds). */
const LAYER_FORMAT = 2;
export const LAYER_MANIFEST = 'dgcl-layer.json';

export type LayerArch = 'x64' | 'arm64';

export interface LayerBuildOptions {
  /** The project's node_modules folder to copy from. */
  nodeModulesDir: string;
  /** Output folder (the layer asset); replaced as a whole when rebuilt. */
  outDir: string;
  /** Target CPU of the functions; decides which native package is shipped. Default x64. */
  arch?: LayerArch;
  /** Strip the native module's symbol table: true, false, or 'auto' (if `strip` exists). */
  strip?: boolean | 'auto';
  /** Load the built layer once in a child Node process (real native module only). Default true. */
  verify?: boolean;
  /** Rebuild even if the cached build has the same fingerprint. */
  force?: boolean;
  /** Progress messages (default: none). */
  log?: (msg: string) => void;
}

export interface LayerPackage {
  /** Path below nodejs/node_modules, e.g. `@lancedb/lancedb` or `a/node_modules/b`. */
  path: string;
  name: string;
  version: string;
  /** Bytes shipped for this package (after pruning / stripping). */
  bytes: number;
}

export interface LayerManifest {
  format: number;
  fingerprint: string;
  arch: LayerArch;
  nativePackage: string;
  nativeStripped: boolean;
  /** Native module size as installed and as shipped. */
  nativeBytesInstalled: number;
  nativeBytesShipped: number;
  packages: LayerPackage[];
  /** Unzipped size of `nodejs/` (sum of file sizes: what Lambda's 250 MB quota counts). */
  totalBytes: number;
  files: number;
}

export interface LayerBuildResult {
  dir: string;
  manifest: LayerManifest;
  /** False when a cached build with the same fingerprint was reused. */
  rebuilt: boolean;
}

/** The package that holds the native module for a Lambda architecture (Lambda is glibc). */
export function nativePackageFor(arch: LayerArch): string {
  return arch === 'arm64' ? '@lancedb/lancedb-linux-arm64-gnu' : '@lancedb/lancedb-linux-x64-gnu';
}

/**
 * Module specifiers the project imports from the layer (lib/: `@lancedb/lancedb`, `apache-arrow`,
 * and `apache-arrow/visitor/vectorassembler` in lib/arrow-fix.ts). Traced, and loaded by
 * `verifyLayer`, both as ES modules and through CommonJS.
 */
export const LAYER_SPECIFIERS = ['@lancedb/lancedb', 'apache-arrow', 'apache-arrow/visitor/vectorassembler'];

/** Packages the layer's JavaScript may load but which we never use (embedding providers). */
const NEVER_SHIPPED = ['openai', '@huggingface/transformers'];

/** Per-package paths (relative to the package folder) never loaded at run time. */
const PRUNE_PATHS: Record<string, string[]> = {
  // arrow2csv needs command-line-args/-usage, which are not shipped; the rest are browser bundles.
  'apache-arrow': [
    'bin',
    'Arrow.es2015.min.js',
    'Arrow.esnext.min.js',
    'Arrow.externs.es2015.min.js',
    'Arrow.externs.esnext.min.js',
  ],
  '@lancedb/lancedb': ['AGENTS.md', 'CONTRIBUTING.md', 'pnpm-workspace.yaml', 'license_header.txt'],
};

/** True for files that are never loaded at run time (kept: licences and notices). */
export function isPrunedFile(relPath: string): boolean {
  const base = path.basename(relPath);
  if (/licen[cs]e|notice|copying/i.test(base)) return false;
  if (/\.(d\.[cm]?ts|[cm]?ts|tsx|map|md|markdown|tsbuildinfo)$/i.test(base)) return true;
  if (/^(\.npmignore|\.eslintrc.*|\.prettierrc.*|tsconfig.*\.json|\.editorconfig)$/i.test(base)) return true;
  return false;
}

interface TracedPackage {
  /** Absolute package folder. */
  dir: string;
  /** Path below the node_modules root. */
  rel: string;
}

function readJson(file: string): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
}

/** The package folder (below `nodeModulesDir`) that holds `file`, or null. */
function packageOf(nodeModulesDir: string, file: string): TracedPackage | null {
  const rel = path.relative(nodeModulesDir, file);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return null;
  const parts = rel.split(path.sep);
  // Walk a/b/node_modules/c/... : the package is the last `<scope>/<name>` or `<name>` that
  // follows the root or a nested node_modules.
  let start = 0;
  for (let i = 0; i < parts.length; i++) if (parts[i] === 'node_modules') start = i + 1;
  const first = parts[start];
  if (first === undefined) return null;
  const len = first.startsWith('@') ? 2 : 1;
  const pkgRel = parts.slice(0, start + len).join('/');
  return { dir: path.join(nodeModulesDir, pkgRel), rel: pkgRel };
}

/**
 * Which installed packages `require()` and `import` of the LAYER_SPECIFIERS reach, and the exact
 * files. Uses the project's esbuild.
 */
export async function traceRuntimePackages(
  nodeModulesDir: string,
): Promise<{ packages: TracedPackage[]; files: string[] }> {
  const esbuild = await import('esbuild');
  nodeModulesDir = fs.realpathSync(nodeModulesDir);
  const projectRoot = path.dirname(nodeModulesDir);
  const entry = [
    ...LAYER_SPECIFIERS.map((spec, i) => `import * as esm${i} from ${JSON.stringify(spec)};`),
    `globalThis.__dgclTrace = [${LAYER_SPECIFIERS.map((spec, i) => `esm${i}, require(${JSON.stringify(spec)})`).join(', ')}];`,
  ].join('\n');
  let metafile: Metafile;
  try {
    ({ metafile } = await esbuild.build({
      stdin: { contents: entry, resolveDir: projectRoot, loader: 'js', sourcefile: 'dgcl-layer-trace.js' },
      absWorkingDir: projectRoot,
      bundle: true,
      write: false,
      metafile: true,
      platform: 'node',
      format: 'esm',
      // Resolve like Node does (no `module` field / condition), so the traced files are the loaded ones.
      mainFields: ['main'],
      conditions: [],
      treeShaking: false,
      logLevel: 'silent',
      external: ['@lancedb/lancedb-*', '*.node', ...NEVER_SHIPPED],
    }));
  } catch (e) {
    const errors = (e as { errors?: { text: string }[] }).errors ?? [];
    throw new Error(
      `cannot trace ${LAYER_SPECIFIERS.join(', ')} in ${nodeModulesDir} (run npm install?): ` +
        (errors.map((x) => x.text).join('; ') || String(e)),
      { cause: e },
    );
  }
  const byRel = new Map<string, TracedPackage>();
  const files: string[] = [];
  for (const input of Object.keys(metafile.inputs)) {
    if (input.startsWith('<stdin>') || input === 'dgcl-layer-trace.js') continue;
    const abs = path.resolve(projectRoot, input);
    const pkg = packageOf(nodeModulesDir, abs);
    if (!pkg) continue;
    files.push(abs);
    byRel.set(pkg.rel, pkg);
  }
  if (!byRel.has('@lancedb/lancedb') || !byRel.has('apache-arrow')) {
    throw new Error(
      `tracing ${nodeModulesDir} did not reach @lancedb/lancedb and apache-arrow: are they installed (npm install)?`,
    );
  }
  return { packages: [...byRel.values()].sort((a, b) => a.rel.localeCompare(b.rel)), files };
}

function which(cmd: string): boolean {
  const r = spawnSync(cmd, ['--version'], { stdio: 'ignore' });
  return r.status === 0 && !r.error;
}

/** Sum of file sizes below `dir` (what Lambda's unzipped quota counts); optionally skips node_modules. */
function dirBytes(dir: string, skipNodeModules = false): { bytes: number; files: number } {
  let bytes = 0;
  let files = 0;
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) {
        if (!(skipNodeModules && e.name === 'node_modules')) walk(p);
      } else if (e.isFile()) {
        bytes += fs.statSync(p).size;
        files++;
      }
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return { bytes, files };
}
export { dirBytes as folderSize };

/** Copies one package folder (not its nested node_modules), skipping files never loaded. */
function copyPackage(srcDir: string, destDir: string, name: string): void {
  const prune = new Set(PRUNE_PATHS[name] ?? []);
  const walk = (rel: string): void => {
    const src = path.join(srcDir, rel);
    for (const e of fs.readdirSync(src, { withFileTypes: true })) {
      const childRel = rel ? `${rel}/${e.name}` : e.name;
      if (prune.has(childRel)) continue;
      if (e.isDirectory()) {
        if (e.name === 'node_modules') continue;
        walk(childRel);
      } else if (e.isFile()) {
        if (isPrunedFile(childRel)) continue;
        const dest = path.join(destDir, childRel);
        fs.mkdirSync(path.dirname(dest), { recursive: true });
        fs.copyFileSync(path.join(srcDir, childRel), dest);
      } else if (e.isSymbolicLink()) {
        const real = fs.realpathSync(path.join(srcDir, childRel));
        if (fs.statSync(real).isFile() && !isPrunedFile(childRel)) {
          const dest = path.join(destDir, childRel);
          fs.mkdirSync(path.dirname(dest), { recursive: true });
          fs.copyFileSync(real, dest);
        }
      }
    }
  };
  walk('');
}

/**
 * Imports the layer's LanceDB as an ES module and through CommonJS from a temporary folder
 * whose only node_modules is the layer's (symlinks preserved, so resolution cannot fall back to
 * the project's node_modules), and writes + reads a table. Then loads it the way the handler
 * bundles do on Lambda (functions/shared/layer.ts): from a folder with no node_modules, found
 * only through NODE_PATH, by `require.resolve(spec, {paths})`.
 */
export function verifyLayer(layerDir: string): void {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dgcl-layer-verify-'));
  try {
    fs.symlinkSync(path.join(layerDir, 'nodejs', 'node_modules'), path.join(tmp, 'node_modules'), 'dir');
    const probe = `
import * as lancedb from '@lancedb/lancedb';
import * as arrow from 'apache-arrow';
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const cjs = require('@lancedb/lancedb');
if (typeof cjs.connect !== 'function' || typeof arrow.tableFromArrays !== 'function') throw new Error('exports missing');
const fromLancedb = createRequire(require.resolve('@lancedb/lancedb'));
for (const spec of ${JSON.stringify(LAYER_SPECIFIERS)}) {
  const esm = await import(spec);
  const viaLancedb = fromLancedb(spec);
  if (Object.keys(esm).length === 0 || Object.keys(viaLancedb).length === 0) throw new Error('empty module ' + spec);
}
const db = await lancedb.connect(${JSON.stringify(path.join(tmp, 'db'))});
const t = await db.createTable('t', arrow.tableFromArrays({ id: Int32Array.from([1, 2, 3]) }));
const n = await t.countRows();
if (n !== 3) throw new Error('countRows ' + n);
const where = require.resolve('@lancedb/lancedb');
console.log(JSON.stringify({ ok: true, rows: n, where }));
`;
    fs.writeFileSync(path.join(tmp, 'probe.mjs'), probe);
    const env = { ...process.env };
    delete env.NODE_PATH;
    delete env.NODE_OPTIONS;
    const r = spawnSync(process.execPath, ['--preserve-symlinks', '--preserve-symlinks-main', 'probe.mjs'], {
      cwd: tmp,
      env,
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (r.status !== 0) {
      throw new Error(`the built layer does not load:\n${r.stderr || r.stdout || String(r.error)}`);
    }
    const out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { ok?: boolean; where?: string };
    if (!out.ok || !out.where?.startsWith(tmp)) {
      throw new Error(`layer verification resolved LanceDB outside the layer: ${r.stdout}`);
    }

    const task = path.join(tmp, 'task');
    fs.mkdirSync(task);
    const viaNodePath = `
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const paths = process.env.NODE_PATH.split(${JSON.stringify(path.delimiter)});
const load = (spec) => require(require.resolve(spec, { paths }));
for (const spec of ${JSON.stringify(LAYER_SPECIFIERS)}) {
  if (Object.keys(load(spec)).length === 0) throw new Error('empty module ' + spec);
}
const lancedb = load('@lancedb/lancedb');
const arrow = load('apache-arrow');
const db = await lancedb.connect(${JSON.stringify(path.join(tmp, 'db2'))});
const t = await db.createTable('t', arrow.tableFromArrays({ id: Int32Array.from([1, 2]) }));
const n = await t.countRows();
if (n !== 2) throw new Error('countRows ' + n);
console.log(JSON.stringify({ ok: true, where: require.resolve('@lancedb/lancedb', { paths }) }));
`;
    fs.writeFileSync(path.join(task, 'probe.mjs'), viaNodePath);
    const r2 = spawnSync(process.execPath, ['--preserve-symlinks', '--preserve-symlinks-main', 'probe.mjs'], {
      cwd: task,
      env: { ...env, NODE_PATH: path.join(tmp, 'node_modules') },
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (r2.status !== 0) {
      throw new Error(`the built layer does not load through NODE_PATH (as the handlers load it):\n${r2.stderr || r2.stdout || String(r2.error)}`);
    }
    const out2 = JSON.parse(r2.stdout.trim().split('\n').pop() ?? '{}') as { ok?: boolean; where?: string };
    if (!out2.ok || !out2.where?.startsWith(path.join(tmp, 'node_modules'))) {
      throw new Error(`layer verification through NODE_PATH resolved LanceDB outside the layer: ${r2.stdout}`);
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

function readManifest(dir: string): LayerManifest | null {
  try {
    return readJson(path.join(dir, LAYER_MANIFEST)) as unknown as LayerManifest;
  } catch {
    return null;
  }
}

/** Builds (or reuses) the LanceDB layer folder. */
export async function buildLancedbLayer(opts: LayerBuildOptions): Promise<LayerBuildResult> {
  const log = opts.log ?? ((): void => {});
  const arch = opts.arch ?? 'x64';
  // Real path: esbuild reports resolved (symlink-free) paths.
  const nodeModulesDir = fs.realpathSync(path.resolve(opts.nodeModulesDir));
  const outDir = path.resolve(opts.outDir);

  const traced = await traceRuntimePackages(nodeModulesDir);
  const lancedb = traced.packages.find((p) => p.rel === '@lancedb/lancedb');
  if (!lancedb) throw new Error('unreachable: @lancedb/lancedb not traced');
  const nativeName = nativePackageFor(arch);
  let nativeDir: string;
  try {
    const req = createRequire(path.join(lancedb.dir, 'package.json'));
    nativeDir = path.dirname(req.resolve(`${nativeName}/package.json`));
  } catch {
    const version = String(readJson(path.join(lancedb.dir, 'package.json')).version);
    throw new Error(
      `${nativeName} is not installed, so the Lambda layer cannot be built. npm installs only the ` +
        `native package of the machine it runs on; on another platform run\n` +
        `  npm install --no-save --force --os=linux --cpu=${arch} --libc=glibc ${nativeName}@${version}\n` +
        `or point the app at a pre-built layer folder with -c dgcl:layerDir=<dir>.`,
    );
  }
  const nativePkg = packageOf(nodeModulesDir, nativeDir) ?? {
    dir: nativeDir,
    rel: nativeName,
  };
  const nativeMain = String(readJson(path.join(nativeDir, 'package.json')).main ?? '');
  const nativeFile = path.join(nativeDir, nativeMain);
  if (!nativeMain.endsWith('.node') || !fs.existsSync(nativeFile)) {
    throw new Error(`${nativeName} has no native module at ${nativeFile}`);
  }
  const nativeBytesInstalled = fs.statSync(nativeFile).size;
  const strip = opts.strip === 'auto' || opts.strip === undefined ? which('strip') : opts.strip;

  const all = [...traced.packages, nativePkg];
  const described = all.map((p) => {
    const pj = readJson(path.join(p.dir, 'package.json'));
    return { path: p.rel, name: String(pj.name), version: String(pj.version), dir: p.dir };
  });
  const fingerprint = createHash('sha256')
    .update(
      JSON.stringify({
        format: LAYER_FORMAT,
        arch,
        strip,
        nativeBytesInstalled,
        packages: described.map((d) => `${d.path}=${d.name}@${d.version}`),
      }),
    )
    .digest('hex')
    .slice(0, 32);

  const cached = readManifest(outDir);
  if (!opts.force && cached && cached.fingerprint === fingerprint) {
    return { dir: outDir, manifest: cached, rebuilt: false };
  }

  log(`building LanceDB layer in ${outDir} (${described.length} packages, strip=${strip})`);
  const work = `${outDir}.tmp-${process.pid}`;
  fs.rmSync(work, { recursive: true, force: true });
  const modules = path.join(work, 'nodejs', 'node_modules');
  for (const d of described) copyPackage(d.dir, path.join(modules, d.path), d.name);

  // Every file the trace says is loaded must have survived pruning.
  const missing = traced.files
    .map((f) => path.relative(nodeModulesDir, f))
    .filter((rel) => !fs.existsSync(path.join(modules, rel)));
  if (missing.length > 0) {
    throw new Error(`pruning removed files that are loaded at run time: ${missing.slice(0, 10).join(', ')}`);
  }

  const shippedNative = path.join(modules, nativePkg.rel, nativeMain);
  let nativeStripped = false;
  if (strip) {
    execFileSync('strip', ['--strip-unneeded', shippedNative], { stdio: 'pipe' });
    nativeStripped = true;
  }
  const nativeBytesShipped = fs.statSync(shippedNative).size;

  if (opts.verify ?? true) {
    log('verifying the layer (loads the native module once)');
    verifyLayer(work);
  }

  const packages: LayerPackage[] = described.map((d) => ({
    path: d.path,
    name: d.name,
    version: d.version,
    bytes: dirBytes(path.join(modules, d.path), true).bytes,
  }));
  const size = dirBytes(path.join(work, 'nodejs'));
  const manifest: LayerManifest = {
    format: LAYER_FORMAT,
    fingerprint,
    arch,
    nativePackage: nativeName,
    nativeStripped,
    nativeBytesInstalled,
    nativeBytesShipped,
    packages,
    totalBytes: size.bytes,
    files: size.files,
  };
  fs.writeFileSync(path.join(work, LAYER_MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);

  fs.rmSync(outDir, { recursive: true, force: true });
  fs.mkdirSync(path.dirname(outDir), { recursive: true });
  fs.renameSync(work, outDir);
  return { dir: outDir, manifest, rebuilt: true };
}
