/**
 * Deployment settings, read from CDK context (cdk.json `context`, overridable with
 * `cdk synth -c dgcl:prefix=...`). Values given on the command line arrive as strings.
 */
import type { Node } from 'constructs';
import { parseDuration } from '../lib/duration.ts';
import { validateName } from '../lib/names.ts';

export interface DgclConfig {
  stackName: string;
  /** Key prefix of the root inside the bucket (`s3://<bucket>/<prefix>`); '' for the bucket root. */
  prefix: string;
  /** How often maintenance runs (EventBridge rate, minutes). */
  maintenanceRateMinutes: number;
  /**
   * Most concurrent append invocations (= most live writer shards): the event source's
   * maxConcurrency and the function's reserved concurrency; 2..the writer slots of an
   * experiment (16; infra/stack.ts rejects more).
   */
  appendMaxConcurrency: number;
  /** S3 versioning on the log bucket (off by default; see docs/design/deployment.md). */
  bucketVersioning: boolean;
  /** Days a noncurrent object version is kept when versioning is on. */
  noncurrentVersionDays: number;
  /** Optional e-mail address subscribed to the alarm topic. */
  alarmEmail: string | undefined;
  /** Folder with the handler entry files, relative to the project root. */
  functionsDir: string;
  /** A pre-built LanceDB layer folder (skips building it from node_modules). */
  layerDir: string | undefined;
  /** Strip the native module's symbol table: 'auto' (if `strip` exists), true or false. */
  stripNative: boolean | 'auto';
  /**
   * Where new logs keep item markers and claims (DGCL_COORDINATION of append and maintenance):
   * 'table' (the lease table) or 'objects'. Deploy with 'objects' while functions of a version
   * before 0.2.0 may still run (a deploy overlaps old and new invocations), then 'table'.
   */
  coordination: 'table' | 'objects';
  /**
   * The scheduled resume sweep: every `rateMinutes`, the resume function sends a resume
   * instruction for each non-terminal item of these experiments whose last event is older than
   * `stalledForMs`. Off (no schedule) while `experiments` is empty, the default.
   */
  resumeSweep: {
    experiments: Array<{ pipeline: string; experiment: string }>;
    stalledForMs: number;
    rateMinutes: number;
  };
}

export const DEFAULT_CONFIG: DgclConfig = {
  stackName: 'DatagenCheckpointLog',
  prefix: 'dgcl',
  maintenanceRateMinutes: 15,
  appendMaxConcurrency: 10,
  bucketVersioning: false,
  noncurrentVersionDays: 7,
  alarmEmail: undefined,
  functionsDir: 'functions',
  layerDir: undefined,
  stripNative: 'auto',
  coordination: 'table',
  resumeSweep: { experiments: [], stalledForMs: 3_600_000, rateMinutes: 30 },
};

function str(node: Node, key: string): string | undefined {
  const v: unknown = node.tryGetContext(`dgcl:${key}`);
  if (v === undefined || v === null) return undefined;
  return String(v);
}

function int(node: Node, key: string, def: number, min: number, max: number): number {
  const s = str(node, key);
  if (s === undefined || s === '') return def;
  const n = Number(s);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`context dgcl:${key} must be an integer in [${min}, ${max}], got ${JSON.stringify(s)}`);
  }
  return n;
}

function bool(node: Node, key: string, def: boolean): boolean {
  const s = str(node, key);
  if (s === undefined || s === '') return def;
  if (s === 'true') return true;
  if (s === 'false') return false;
  throw new Error(`context dgcl:${key} must be true or false, got ${JSON.stringify(s)}`);
}

/** Validates a key prefix: `a/b-c` style, no leading/trailing slash, no empty segment. */
export function normalizePrefix(prefix: string): string {
  if (prefix === '') return '';
  if (!/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/.test(prefix) || prefix.split('/').some((s) => s === '.' || s === '..')) {
    throw new Error(
      `context dgcl:prefix must be '' or segments of [A-Za-z0-9._-] separated by '/', got ${JSON.stringify(prefix)}`,
    );
  }
  return prefix;
}

function coordination(s: string): DgclConfig['coordination'] {
  if (s === 'table' || s === 'objects') return s;
  throw new Error(`context dgcl:coordination must be table or objects, got ${JSON.stringify(s)}`);
}

/**
 * `dgcl:resumeSweepExperiments`: `pipeline/experiment` entries, comma-separated (a JSON array in
 * cdk.json reads the same); '' = none.
 */
function sweepExperiments(node: Node): DgclConfig['resumeSweep']['experiments'] {
  const s = str(node, 'resumeSweepExperiments') ?? '';
  const out: DgclConfig['resumeSweep']['experiments'] = [];
  const seen = new Set<string>();
  for (const entry of s.split(',').map((e) => e.trim()).filter((e) => e !== '')) {
    const parts = entry.split('/');
    try {
      if (parts.length !== 2) throw new Error('expected pipeline/experiment');
      out.push({ pipeline: validateName('pipeline', parts[0]), experiment: validateName('experiment', parts[1]) });
    } catch (e) {
      throw new Error(`context dgcl:resumeSweepExperiments: ${JSON.stringify(entry)}: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (seen.has(entry)) throw new Error(`context dgcl:resumeSweepExperiments names ${JSON.stringify(entry)} twice`);
    seen.add(entry);
  }
  return out;
}

function sweepStalledFor(node: Node, def: number): number {
  const s = str(node, 'resumeSweepStalledFor');
  if (s === undefined || s === '') return def;
  try {
    return parseDuration(s, 'dgcl:resumeSweepStalledFor');
  } catch (e) {
    throw new Error(`context ${e instanceof Error ? e.message : String(e)}`);
  }
}

export function readConfig(node: Node): DgclConfig {
  const d = DEFAULT_CONFIG;
  const strip = str(node, 'stripNative');
  return {
    stackName: str(node, 'stackName') || d.stackName,
    prefix: normalizePrefix(str(node, 'prefix') ?? d.prefix),
    maintenanceRateMinutes: int(node, 'maintenanceRateMinutes', d.maintenanceRateMinutes, 1, 1440),
    appendMaxConcurrency: int(node, 'appendMaxConcurrency', d.appendMaxConcurrency, 2, 1000),
    bucketVersioning: bool(node, 'bucketVersioning', d.bucketVersioning),
    noncurrentVersionDays: int(node, 'noncurrentVersionDays', d.noncurrentVersionDays, 1, 3650),
    alarmEmail: str(node, 'alarmEmail') || undefined,
    functionsDir: str(node, 'functionsDir') || d.functionsDir,
    layerDir: str(node, 'layerDir') || undefined,
    stripNative: strip === undefined || strip === '' || strip === 'auto' ? 'auto' : bool(node, 'stripNative', true),
    coordination: coordination(str(node, 'coordination') || d.coordination),
    resumeSweep: {
      experiments: sweepExperiments(node),
      stalledForMs: sweepStalledFor(node, d.resumeSweep.stalledForMs),
      rateMinutes: int(node, 'resumeSweepRateMinutes', d.resumeSweep.rateMinutes, 1, 1440),
    },
  };
}
