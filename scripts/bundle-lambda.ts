/**
 * Builds the LanceDB Lambda layer from node_modules (the same step `cdk synth` runs) and
 * measures the deployment package.
 *
 *   npx tsx scripts/bundle-lambda.ts                 build (or reuse) dist/infra/lancedb-layer, print sizes
 *   npx tsx scripts/bundle-lambda.ts --force         rebuild even if the cached build is current
 *   npx tsx scripts/bundle-lambda.ts --no-strip      keep the native module's symbol table
 *   npx tsx scripts/bundle-lambda.ts --zip           also measure the zipped layer (needs `zip`)
 *   npx tsx scripts/bundle-lambda.ts --assembly cdk.out
 *                                                    measure every function (code + layers) of a
 *                                                    synthesized assembly against the 250 MB limit
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CloudAssembly } from 'aws-cdk-lib/cx-api';
import { buildLancedbLayer } from '../infra/lancedb-layer.ts';
import { assertFits, LAMBDA_UNZIPPED_LIMIT_BYTES, measureAssembly } from '../infra/sizes.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const flag = (name: string): boolean => args.includes(name);
const value = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const mb = (n: number): string => `${(n / 1e6).toFixed(1).padStart(7)} MB`;

const t0 = Date.now();
const result = await buildLancedbLayer({
  nodeModulesDir: path.join(root, 'node_modules'),
  outDir: path.join(root, 'dist', 'infra', 'lancedb-layer'),
  strip: flag('--no-strip') ? false : 'auto',
  force: flag('--force'),
  log: (m) => console.error(m),
});
const m = result.manifest;
console.log(`layer: ${path.relative(root, result.dir)} (${result.rebuilt ? 'built' : 'cached'} in ${Date.now() - t0} ms)`);
for (const p of m.packages) console.log(`  ${mb(p.bytes)}  ${p.name}@${p.version}`);
console.log(
  `  native module: ${mb(m.nativeBytesInstalled)} installed -> ${mb(m.nativeBytesShipped)} shipped` +
    (m.nativeStripped ? ' (symbol table stripped)' : ''),
);
console.log(`  total unzipped: ${mb(m.totalBytes)} in ${m.files} files (limit ${mb(LAMBDA_UNZIPPED_LIMIT_BYTES)} incl. function code)`);

if (flag('--zip')) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dgcl-layer-zip-'));
  try {
    const zip = path.join(tmp, 'layer.zip');
    execFileSync('zip', ['-q', '-r', zip, '.'], { cwd: result.dir });
    console.log(`  zipped (deflate -6): ${mb(fs.statSync(zip).size)}`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

const assemblyDir = value('--assembly');
if (assemblyDir) {
  const sizes = measureAssembly(new CloudAssembly(path.resolve(assemblyDir)));
  for (const s of sizes) {
    console.log(`stack ${s.stack}:`);
    for (const f of s.functions) {
      console.log(`  ${f.logicalId}: code ${mb(f.codeBytes)} + layers ${mb(f.layerBytes)} = ${mb(f.totalBytes)}`);
    }
  }
  assertFits(sizes);
  console.log(`all functions fit under ${LAMBDA_UNZIPPED_LIMIT_BYTES} bytes unzipped`);
}
