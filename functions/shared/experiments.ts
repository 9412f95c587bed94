/**
 * The experiments under a root: `<root>/datagen_checkpoints/<pipeline>/<experiment>/log.lance`.
 * Local roots are listed through the folder, S3 roots with ListObjectsV2 and a `/` delimiter
 * (one request per 1,000 names), both through the ObjectStore implementations of lib/storage.
 * Names that are not valid pipeline/experiment names, and folders without a `log.lance`, are
 * skipped. Requests (S3): 1 LIST for the pipelines, 1 per pipeline, 1 per experiment.
 */
import path from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import { LocalObjectStore } from '../../lib/storage/local.ts';
import { CHECKPOINTS_DIR, joinKey, LOG_DATASET, pipelineLocation, s3ClientConfig, type Env, type Location } from '../../lib/storage/location.ts';
import type { ObjectStore } from '../../lib/storage/objects.ts';
import { S3ObjectStore } from '../../lib/storage/s3.ts';
import { validateName } from '../../lib/names.ts';

export interface ExperimentRef {
  pipeline: string;
  experiment: string;
}

const s3Clients = new Map<string, S3Client>();

function s3Client(env: Env): S3Client {
  const config = s3ClientConfig(env);
  const key = `${String(config.endpoint ?? '')}|${String(config.region)}`;
  let c = s3Clients.get(key);
  if (!c) s3Clients.set(key, (c = new S3Client(config)));
  return c;
}

/** An ObjectStore whose base is `loc` (a folder or an S3 prefix). */
function storeAt(loc: Location, env: Env): ObjectStore {
  return loc.kind === 'file' ? new LocalObjectStore(loc.dir) : S3ObjectStore.at(s3Client(env), loc);
}

function isName(kind: 'pipeline' | 'experiment', v: string): boolean {
  try {
    validateName(kind, v);
    return true;
  } catch {
    return false;
  }
}

/** Every experiment with a log, sorted; only those of `pipeline` when given. */
export async function listExperiments(root: Location, env: Env, pipeline?: string): Promise<ExperimentRef[]> {
  let pipelines: string[];
  if (pipeline !== undefined) {
    pipelines = [pipeline];
  } else {
    const checkpoints: Location =
      root.kind === 'file'
        ? { kind: 'file', dir: path.join(root.dir, CHECKPOINTS_DIR) }
        : { kind: 's3', bucket: root.bucket, prefix: joinKey(root.prefix, CHECKPOINTS_DIR) };
    pipelines = (await storeAt(checkpoints, env).list('')).filter((n) => isName('pipeline', n));
  }
  const out: ExperimentRef[] = [];
  for (const p of pipelines) {
    const store = storeAt(pipelineLocation(root, p), env);
    const experiments = (await store.list('')).filter((n) => isName('experiment', n));
    const withLog = await Promise.all(experiments.map(async (e) => ((await store.list(e)).includes(LOG_DATASET) ? e : null)));
    for (const e of withLog) if (e !== null) out.push({ pipeline: p, experiment: e });
  }
  return out.sort((a, b) => (a.pipeline === b.pipeline ? cmp(a.experiment, b.experiment) : cmp(a.pipeline, b.pipeline)));
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
