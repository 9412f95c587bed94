/**
 * Version clean-up beside tagged base versions (snapshots: lib/log/snapshot/). LanceDB 0.39's
 * prune refuses the whole clean-up while a tagged version is older than its cutoff (Lance's
 * `error_if_tagged_old_versions`, which its Node API does not let us turn off), and it takes one
 * cutoff time only. So the cutoff is held just below the oldest tagged version's time: versions
 * older than it are pruned; it and every later version stay until its tag is deleted.
 */
import type { ObjectStore } from '../../storage/objects.ts';
import type { Table } from '../tables.ts';

/** Where Lance keeps a dataset's tags (one `<name>.json` each), below the base's folder. */
const TAGS_DIR = '_refs/tags';
/** How far below a tagged version's time the cutoff stays. */
const TAG_MARGIN_MS = 1000;

/**
 * The prune cutoff (ms) for `base`: `wantedMs`, or earlier when a tagged version is not older.
 * `objects` is the log's store (rooted at the base's folder): a log without tags costs one
 * listing of it, and no call into Lance.
 */
export async function pruneCutoffMs(base: Table, objects: ObjectStore, wantedMs: number): Promise<number> {
  if ((await objects.list(TAGS_DIR)).length === 0) return wantedMs;
  const tagged = new Set(Object.values(await (await base.tags()).list()).map((t) => t.version));
  if (tagged.size === 0) return wantedMs;
  let cutoff = wantedMs;
  // Lance turns the cutoff into an age and back with its own clock readings, in nanoseconds:
  // a second below the tagged version's time stays below it (a pass keeps a few more versions).
  for (const v of await base.listVersions()) if (tagged.has(v.version)) cutoff = Math.min(cutoff, v.timestamp.getTime() - TAG_MARGIN_MS);
  return cutoff;
}
