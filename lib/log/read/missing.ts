/**
 * A log that does not exist, said loudly: reads and maintenance of a misspelt root, pipeline or
 * experiment fail with LOG_NOT_FOUND instead of answering "nothing there" (an empty training set
 * with no error). The message names the log's place and what does exist near it, so the typo is
 * visible: the pipeline's experiments, else the root's pipelines, else that the root itself is
 * missing or not a folder. Only listings: nothing is created.
 */
import { statSync } from 'node:fs';
import { LogNotFoundError } from '../../errors.ts';
import { errCode } from '../../fsutil.ts';
import { validateName } from '../../names.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { CHECKPOINTS_DIR, formatLocation, LOG_DATASET, type Location } from '../../storage/location.ts';
import { META_DIR, parseMetaNames, type MetaNames } from '../layout.ts';

/** Names listed in a message at most (a root may hold many experiments). */
const SHOWN = 20;

/** Whether a meta folder listing shows a log: anything a writer or maintenance ever put there. */
export function logExists(meta: MetaNames): boolean {
  return (
    meta.logId !== '' ||
    meta.baseExists ||
    meta.gens.length > 0 ||
    meta.sealEpochs.length > 0 ||
    meta.fenceEpochs.length > 0 ||
    meta.retired.size > 0 ||
    meta.tombNames.length > 0
  );
}

/** Whether a read's listing (lib/log/read/reader.ts `ShardListing`) shows a log. */
export function listingShowsLog(l: {
  logId: string;
  baseExists: boolean;
  visible: readonly unknown[];
  invisible: readonly unknown[];
  retired: readonly unknown[];
  pending: readonly unknown[];
  sealedEpochs: readonly unknown[];
  fencedEpochs: readonly unknown[];
  tombstones: ReadonlyMap<string, number>;
}): boolean {
  return (
    l.logId !== '' ||
    l.baseExists ||
    l.visible.length + l.invisible.length + l.retired.length + l.pending.length + l.sealedEpochs.length + l.fencedEpochs.length > 0 ||
    l.tombstones.size > 0
  );
}

/** Whether the log behind `objects` (its `log.lance` folder) exists: one listing of its meta folder. */
export async function logExistsAt(objects: ObjectStore): Promise<boolean> {
  return logExists(parseMetaNames(await objects.list(META_DIR)));
}

/**
 * Whether the log's folder (`<experiment>/log.lance`) exists, whatever it holds: listed from its
 * experiment's folder, as the scheduled maintenance picks experiments (functions/shared/experiments.ts).
 * A first writer makes it before anything the meta folder shows (its item markers, its slot).
 */
export async function logFolderExists(place: LogPlace): Promise<boolean> {
  return (await place.rootObjects.list(`${CHECKPOINTS_DIR}/${place.pipeline}/${place.experiment}`)).includes(LOG_DATASET);
}

export interface LogPlace {
  root: Location;
  pipeline: string;
  experiment: string;
  /** The log's URI, as `CheckpointLog.uri`. */
  uri: string;
  /** A store at the root (lists `datagen_checkpoints/...`). */
  rootObjects: ObjectStore;
}

/** The LOG_NOT_FOUND error of `place`, naming what exists near it. */
export async function logNotFound(place: LogPlace): Promise<LogNotFoundError> {
  const head = `no log at ${place.uri}`;
  const rootUri = formatLocation(place.root);
  try {
    if (place.root.kind === 'file') {
      const problem = localRootProblem(place.root.dir);
      if (problem) return new LogNotFoundError(`${head}: ${problem}`, place.uri);
    }
    // Its own folder may be there without a log (a first write that did not get far).
    const experiments = (await names(place.rootObjects, `${CHECKPOINTS_DIR}/${place.pipeline}`, 'experiment')).filter((n) => n !== place.experiment);
    if (experiments.length > 0) {
      return new LogNotFoundError(`${head}; experiments of pipeline ${JSON.stringify(place.pipeline)}: ${shown(experiments)}`, place.uri);
    }
    const pipelines = await names(place.rootObjects, CHECKPOINTS_DIR, 'pipeline');
    if (pipelines.length > 0) {
      return new LogNotFoundError(`${head}; pipeline ${JSON.stringify(place.pipeline)} has no log; pipelines under ${rootUri}: ${shown(pipelines)}`, place.uri);
    }
    return new LogNotFoundError(`${head}; no pipeline has a log under the root ${rootUri}`, place.uri);
  } catch (e) {
    // The neighbours are a courtesy: the log is missing whatever they are.
    if (e instanceof LogNotFoundError) return new LogNotFoundError(`${head}: ${e.message}`, place.uri, { cause: e });
    return new LogNotFoundError(`${head} (what is near it could not be listed: ${e instanceof Error ? e.message : String(e)})`, place.uri, { cause: e });
  }
}

/** Why a local root cannot hold logs (missing, or a file), or null. */
function localRootProblem(dir: string): string | null {
  try {
    if (!statSync(dir).isDirectory()) return `the root ${dir} is a file, not a folder`;
    return null;
  } catch (e) {
    const code = errCode(e);
    if (code === 'ENOENT') return `the root folder ${dir} does not exist`;
    if (code === 'ENOTDIR') return `the root ${dir} is below a file, not a folder`;
    throw e;
  }
}

async function names(objects: ObjectStore, prefix: string, kind: 'pipeline' | 'experiment'): Promise<string[]> {
  const listed = await objects.list(prefix);
  return listed.filter((n) => {
    try {
      validateName(kind, n);
      return true;
    } catch {
      return false; // a stray file, not a log's folder
    }
  });
}

function shown(list: readonly string[]): string {
  const head = list.slice(0, SHOWN).join(', ');
  return list.length > SHOWN ? `${head} (and ${list.length - SHOWN} more)` : head;
}
