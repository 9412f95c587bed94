/**
 * The Node versions the package runs on, checked when it is imported: on an older Node the
 * import fails with one sentence saying so, instead of an error from deep inside the first write
 * (local logs keep their coordination records in `node:sqlite`, unflagged from 22.13 on; LanceDB
 * 0.39 needs 22).
 */
export const MIN_NODE = [22, 13] as const;

/** Thrown at import on a Node older than MIN_NODE. */
export class UnsupportedNodeError extends Error {
  override readonly name = 'UnsupportedNodeError';
  readonly code = 'UNSUPPORTED_NODE';
}

/** The error for Node `version` (e.g. `20.19.0`), or null when the package runs on it. */
export function nodeVersionError(version: string): UnsupportedNodeError | null {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  if (major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1])) return null;
  return new UnsupportedNodeError(`datagen-checkpoint-log needs Node >= ${MIN_NODE.join('.')} (found v${version.replace(/^v/, '')})`);
}

const tooOld = nodeVersionError(process.versions.node);
if (tooOld) throw tooOld;
