/**
 * CDK app entry (cdk.json: `npx tsx infra/app.ts`). Builds (or reuses) the LanceDB layer from
 * node_modules, defines the stack, synthesizes, and refuses an assembly whose functions would
 * not fit Lambda's 250 MB unzipped limit. Works offline: nothing is downloaded, no Docker.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { App } from 'aws-cdk-lib';
import { readConfig } from './config.ts';
import { buildLancedbLayer, LAYER_MANIFEST, type LayerManifest } from './lancedb-layer.ts';
import { assertFits, formatSizes, measureAssembly } from './sizes.ts';
import { DgclStack, type LayerSource } from './stack.ts';

export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Where the layer is built (dist/ is git-ignored). */
export const DEFAULT_LAYER_DIR = path.join(PROJECT_ROOT, 'dist', 'infra', 'lancedb-layer');

function describe(m: LayerManifest): string {
  const v = (name: string): string => m.packages.find((p) => p.name === name)?.version ?? '?';
  return `@lancedb/lancedb ${v('@lancedb/lancedb')} (${m.nativePackage}${m.nativeStripped ? ', stripped' : ''}) + apache-arrow ${v('apache-arrow')}`;
}

const app = new App();
const config = readConfig(app.node);
const log = (msg: string): void => {
  process.stderr.write(`dgcl: ${msg}\n`);
};

let layer: LayerSource;
if (config.layerDir) {
  const dir = path.resolve(PROJECT_ROOT, config.layerDir);
  if (!fs.existsSync(path.join(dir, 'nodejs', 'node_modules', '@lancedb', 'lancedb'))) {
    throw new Error(`dgcl:layerDir ${dir} has no nodejs/node_modules/@lancedb/lancedb`);
  }
  const manifestFile = path.join(dir, LAYER_MANIFEST);
  const manifest = fs.existsSync(manifestFile)
    ? (JSON.parse(fs.readFileSync(manifestFile, 'utf8')) as LayerManifest)
    : undefined;
  layer = { dir, fingerprint: manifest?.fingerprint, description: manifest && describe(manifest) };
} else {
  const built = await buildLancedbLayer({
    nodeModulesDir: path.join(PROJECT_ROOT, 'node_modules'),
    outDir: DEFAULT_LAYER_DIR,
    strip: config.stripNative,
    log,
  });
  layer = { dir: built.dir, fingerprint: built.manifest.fingerprint, description: describe(built.manifest) };
}

const stack = new DgclStack(app, config.stackName, { config, projectRoot: PROJECT_ROOT, layer });

const assembly = app.synth();
// `cdk ls` / `cdk destroy` skip bundling (placeholder assets): nothing to measure then.
if (stack.bundlingRequired) {
  const sizes = measureAssembly(assembly);
  process.stderr.write(formatSizes(sizes));
  assertFits(sizes);
}
