/**
 * Measures what each Lambda function of a synthesized cloud assembly will unpack to: its code
 * asset plus every layer it uses, the quantity Lambda limits to 250 MB (262,144,000 bytes,
 * "Unzipped size must be smaller than 262144000 bytes").
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CloudAssembly } from 'aws-cdk-lib/cx-api';
import { folderSize } from './lancedb-layer.ts';

export const LAMBDA_UNZIPPED_LIMIT_BYTES = 262_144_000;

export interface FunctionSize {
  logicalId: string;
  codeBytes: number;
  layerBytes: number;
  totalBytes: number;
}

export interface StackSizes {
  stack: string;
  functions: FunctionSize[];
  layers: { logicalId: string; bytes: number }[];
}

type Template = { Resources?: Record<string, { Type: string; Properties?: Record<string, unknown> }> };

interface AssetManifest {
  files?: Record<string, { source: { path?: string; packaging?: string } }>;
}

/** Asset hash -> staged folder, from every `*.assets.json` in the assembly. */
function stagedAssets(dir: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const f of fs.readdirSync(dir)) {
    if (!f.endsWith('.assets.json')) continue;
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as AssetManifest;
    for (const [hash, entry] of Object.entries(manifest.files ?? {})) {
      if (entry.source.path && entry.source.packaging === 'zip') map.set(hash, path.join(dir, entry.source.path));
    }
  }
  return map;
}

function zipKey(obj: unknown): string | undefined {
  const key = (obj as { S3Key?: unknown } | undefined)?.S3Key;
  return typeof key === 'string' && key.endsWith('.zip') ? key.slice(0, -'.zip'.length) : undefined;
}

export function measureAssembly(assembly: CloudAssembly): StackSizes[] {
  const assets = stagedAssets(assembly.directory);
  const sizeOfAsset = new Map<string, number>();
  const bytesOf = (hash: string | undefined, what: string): number => {
    if (!hash) throw new Error(`${what}: code is not a zip asset of this assembly`);
    const dir = assets.get(hash);
    if (!dir || !fs.existsSync(dir)) throw new Error(`${what}: staged asset ${hash} not found`);
    let n = sizeOfAsset.get(hash);
    if (n === undefined) {
      n = folderSize(dir).bytes;
      sizeOfAsset.set(hash, n);
    }
    return n;
  };

  return assembly.stacks.map((stack) => {
    const resources = (stack.template as Template).Resources ?? {};
    const layers = new Map<string, number>();
    for (const [id, r] of Object.entries(resources)) {
      if (r.Type === 'AWS::Lambda::LayerVersion') layers.set(id, bytesOf(zipKey(r.Properties?.Content), id));
    }
    const functions: FunctionSize[] = [];
    for (const [id, r] of Object.entries(resources)) {
      if (r.Type !== 'AWS::Lambda::Function') continue;
      const code = r.Properties?.Code as Record<string, unknown> | undefined;
      if (code && 'ZipFile' in code) continue; // inline code (e.g. CDK helper functions): tiny
      const codeBytes = bytesOf(zipKey(code), id);
      let layerBytes = 0;
      for (const l of (r.Properties?.Layers as unknown[] | undefined) ?? []) {
        const ref = (l as { Ref?: string }).Ref;
        const bytes = ref ? layers.get(ref) : undefined;
        if (bytes === undefined) throw new Error(`${id}: layer ${JSON.stringify(l)} is not in the stack`);
        layerBytes += bytes;
      }
      functions.push({ logicalId: id, codeBytes, layerBytes, totalBytes: codeBytes + layerBytes });
    }
    return {
      stack: stack.stackName,
      functions,
      layers: [...layers].map(([logicalId, bytes]) => ({ logicalId, bytes })),
    };
  });
}

const mb = (n: number): string => `${(n / 1e6).toFixed(1)} MB`;

export function formatSizes(all: StackSizes[], limit = LAMBDA_UNZIPPED_LIMIT_BYTES): string {
  const lines: string[] = [];
  for (const s of all) {
    const biggest = [...s.functions].sort((a, b) => b.totalBytes - a.totalBytes)[0];
    if (!biggest) continue;
    lines.push(
      `dgcl: ${s.stack}: largest function ${biggest.logicalId}: code ${mb(biggest.codeBytes)} + layers ` +
        `${mb(biggest.layerBytes)} = ${mb(biggest.totalBytes)} unzipped (limit ${mb(limit)}, ` +
        `${mb(limit - biggest.totalBytes)} to spare)`,
    );
  }
  return lines.length ? `${lines.join('\n')}\n` : '';
}

/** Throws if any function (code + layers) would exceed Lambda's unzipped size limit. */
export function assertFits(all: StackSizes[], limit = LAMBDA_UNZIPPED_LIMIT_BYTES): void {
  const over = all.flatMap((s) => s.functions.filter((f) => f.totalBytes >= limit).map((f) => ({ s, f })));
  if (over.length > 0) {
    throw new Error(
      `Lambda unzipped size limit (${limit} bytes) exceeded: ` +
        over.map(({ s, f }) => `${s.stack}/${f.logicalId} = ${f.totalBytes} bytes`).join(', '),
    );
  }
}
