/**
 * The layer builder on a small fake node_modules (no real native module: fast, and independent
 * of the installed LanceDB). What it must do: ship exactly the packages `require`/`import` of
 * LanceDB and Arrow reach plus the native package, prune what is never loaded, keep licences,
 * cache by fingerprint, and say how to get a missing native package.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildLancedbLayer, isPrunedFile, LAYER_MANIFEST, nativePackageFor, type LayerManifest } from '../../infra/lancedb-layer.ts';

let tmp: string;

function write(file: string, text: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}
function pkg(nm: string, name: string, extra: Record<string, unknown>, files: Record<string, string>): void {
  write(path.join(nm, name, 'package.json'), JSON.stringify({ name, version: '1.0.0', ...extra }));
  for (const [f, text] of Object.entries(files)) write(path.join(nm, name, f), text);
}

/** A fake project node_modules shaped like the real one. */
function fakeNodeModules(root: string, withNative = true): string {
  const nm = path.join(root, 'node_modules');
  pkg(nm, '@lancedb/lancedb', { main: 'dist/index.js', dependencies: { 'reflect-metadata': '*' } }, {
    'dist/index.js': [
      "require('apache-arrow');",
      "require('reflect-metadata');",
      "exports.embedding = require('./embedding');",
      'function load() {',
      "  try { return require('./lancedb.linux-x64-gnu.node'); } catch {}",
      "  return require('@lancedb/lancedb-linux-x64-gnu');",
      '}',
      'exports.connect = () => load();',
    ].join('\n'),
    'dist/embedding/index.js': "exports.openai = () => require('openai');\n",
    'dist/index.d.ts': 'export {};\n',
    'dist/index.js.map': '{}',
    'README.md': '# readme\n',
    'AGENTS.md': 'agents\n',
    'LICENSE': 'Apache-2.0\n',
    'RUST_THIRD_PARTY_LICENSES.html': '<html></html>\n',
  });
  if (withNative) {
    pkg(nm, '@lancedb/lancedb-linux-x64-gnu', { main: 'lancedb.linux-x64-gnu.node' }, {
      'lancedb.linux-x64-gnu.node': 'x'.repeat(4096),
      'README.md': 'native\n',
    });
  }
  pkg(
    nm,
    'apache-arrow',
    {
      main: 'Arrow.node.js',
      exports: {
        '.': { node: { import: './Arrow.node.mjs', require: './Arrow.node.js' } },
        './*': { import: './*.mjs', require: './*.js' },
      },
      dependencies: { tslib: '*', 'command-line-args': '*', flatbuffers: '*' },
    },
    {
      'Arrow.node.js': "require('tslib'); require('flatbuffers'); require('./Arrow.dom.js');\n",
      'Arrow.dom.js': 'exports.dom = 1;\n',
      'Arrow.node.mjs': "import 'tslib'; import './Arrow.dom.mjs'; export const x = 1;\n",
      'Arrow.dom.mjs': 'export const dom = 1;\n',
      'visitor/vectorassembler.js': 'exports.VectorAssembler = class {};\n',
      'visitor/vectorassembler.mjs': 'export class VectorAssembler {}\n',
      'visitor/vectorassembler.d.ts': 'export {};\n',
      'Arrow.node.d.ts': 'export {};\n',
      'Arrow.node.js.map': '{}',
      'Arrow.es2015.min.js': 'var browser;\n',
      'bin/arrow2csv.js': "require('command-line-args');\n",
      'src/Arrow.ts': 'export {};\n',
      'LICENSE.txt': 'Apache-2.0\n',
      'NOTICE.txt': 'notice\n',
    },
  );
  pkg(nm, 'tslib', { main: 'tslib.js' }, { 'tslib.js': 'module.exports = {};\n' });
  pkg(nm, 'flatbuffers', { main: 'js/flatbuffers.js' }, {
    'js/flatbuffers.js': "module.exports = require('./builder.js');\n",
    'js/builder.js': 'module.exports = {};\n',
    'ts/builder.ts': 'export {};\n',
  });
  pkg(nm, 'reflect-metadata', { main: 'Reflect.js' }, { 'Reflect.js': '\n' });
  pkg(nm, 'command-line-args', { main: 'index.js' }, { 'index.js': '\n' });
  pkg(nm, 'openai', { main: 'index.js' }, { 'index.js': '\n' });
  pkg(nm, 'unrelated', { main: 'index.js' }, { 'index.js': '\n' });
  return nm;
}

function listFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(path.join(d, e.name), r);
      else out.push(r);
    }
  };
  walk(dir, '');
  return out.sort();
}

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dgcl-layer-test-'));
});
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

describe('buildLancedbLayer', () => {
  it('ships the reachable packages and the native module, pruned, and caches the build', async () => {
    const nm = fakeNodeModules(path.join(tmp, 'a'));
    const outDir = path.join(tmp, 'a', 'layer');
    const first = await buildLancedbLayer({ nodeModulesDir: nm, outDir, strip: false, verify: false });
    expect(first.rebuilt).toBe(true);

    const files = listFiles(path.join(outDir, 'nodejs', 'node_modules'));
    expect(files).toEqual(
      [
        '@lancedb/lancedb-linux-x64-gnu/lancedb.linux-x64-gnu.node',
        '@lancedb/lancedb-linux-x64-gnu/package.json',
        '@lancedb/lancedb/LICENSE',
        '@lancedb/lancedb/RUST_THIRD_PARTY_LICENSES.html',
        '@lancedb/lancedb/dist/embedding/index.js',
        '@lancedb/lancedb/dist/index.js',
        '@lancedb/lancedb/package.json',
        'apache-arrow/Arrow.dom.js',
        'apache-arrow/Arrow.dom.mjs',
        'apache-arrow/Arrow.node.js',
        'apache-arrow/Arrow.node.mjs',
        'apache-arrow/LICENSE.txt',
        'apache-arrow/NOTICE.txt',
        'apache-arrow/package.json',
        'apache-arrow/visitor/vectorassembler.js',
        'apache-arrow/visitor/vectorassembler.mjs',
        'flatbuffers/js/builder.js',
        'flatbuffers/js/flatbuffers.js',
        'flatbuffers/package.json',
        'reflect-metadata/Reflect.js',
        'reflect-metadata/package.json',
        'tslib/package.json',
        'tslib/tslib.js',
      ].sort(),
    );

    const manifest = JSON.parse(fs.readFileSync(path.join(outDir, LAYER_MANIFEST), 'utf8')) as LayerManifest;
    expect(manifest).toEqual(first.manifest);
    expect(manifest.nativePackage).toBe('@lancedb/lancedb-linux-x64-gnu');
    expect(manifest.nativeStripped).toBe(false);
    expect(manifest.nativeBytesShipped).toBe(4096);
    expect(manifest.packages.map((p) => p.name).sort()).toEqual(
      ['@lancedb/lancedb', '@lancedb/lancedb-linux-x64-gnu', 'apache-arrow', 'flatbuffers', 'reflect-metadata', 'tslib'].sort(),
    );
    expect(manifest.totalBytes).toBe(manifest.packages.reduce((s, p) => s + p.bytes, 0));
    expect(manifest.files).toBe(files.length);

    const again = await buildLancedbLayer({ nodeModulesDir: nm, outDir, strip: false, verify: false });
    expect(again.rebuilt).toBe(false);
    expect(again.manifest.fingerprint).toBe(first.manifest.fingerprint);

    // A different package version invalidates the cache.
    const pj = path.join(nm, 'tslib', 'package.json');
    fs.writeFileSync(pj, JSON.stringify({ name: 'tslib', version: '2.0.0', main: 'tslib.js' }));
    const changed = await buildLancedbLayer({ nodeModulesDir: nm, outDir, strip: false, verify: false });
    expect(changed.rebuilt).toBe(true);
    expect(changed.manifest.fingerprint).not.toBe(first.manifest.fingerprint);
    expect(fs.readdirSync(path.dirname(outDir)).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('names the install command when the native package is missing', async () => {
    const nm = fakeNodeModules(path.join(tmp, 'b'), false);
    await expect(
      buildLancedbLayer({ nodeModulesDir: nm, outDir: path.join(tmp, 'b', 'layer'), strip: false, verify: false }),
    ).rejects.toThrow(/npm install --no-save --force --os=linux --cpu=x64 --libc=glibc @lancedb\/lancedb-linux-x64-gnu@1\.0\.0/);
  });

  it('prunes declarations, sources, maps and docs but keeps licences', () => {
    for (const f of ['a.d.ts', 'a.d.mts', 'src/a.ts', 'a.js.map', 'README.md', 'tsconfig.json']) expect(isPrunedFile(f), f).toBe(true);
    for (const f of ['a.js', 'a.mjs', 'a.cjs', 'package.json', 'LICENSE', 'LICENSE.md', 'NOTICE.txt', 'x.node']) {
      expect(isPrunedFile(f), f).toBe(false);
    }
    expect(nativePackageFor('arm64')).toBe('@lancedb/lancedb-linux-arm64-gnu');
  });
});
