/**
 * A log's location as the sentinel of its records in the lease table names it
 * (lib/coord/choose.ts, `_dgcl/log`): an S3 URI as it is; a local `file:` URL with its symlinks
 * resolved (the deepest existing folder: a dropped log's own folders are gone), so a log
 * reached through a link is the same place. The same rule as choose.ts's, which keeps its own
 * private; both must agree, or drop would take the log's records for another log's.
 */
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { UnavailableError } from '../../errors.ts';

export function canonicalLocation(uri: string): string {
  if (!uri.startsWith('file:')) return uri;
  let dir = fileURLToPath(uri);
  const rest: string[] = [];
  for (;;) {
    try {
      return pathToFileURL(path.join(realpathSync(dir), ...rest)).href;
    } catch (e) {
      const parent = path.dirname(dir);
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || parent === dir) {
        throw new UnavailableError(`cannot resolve the location of the log ${uri}: ${(e as Error).message}`, { cause: e });
      }
      rest.unshift(path.basename(dir));
      dir = parent;
    }
  }
}
