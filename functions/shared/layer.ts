/**
 * Loads a package of the Lambda layer (LanceDB, Arrow) the way stock Node 22 can: through
 * CommonJS, from the folders on NODE_PATH and Lambda's `/opt/nodejs/node_modules`.
 *
 * Why: Node's ES module resolver never looks at NODE_PATH, so a bare `import 'apache-arrow'` in
 * a bundle under /var/task resolves only through the Lambda runtime's own patched resolver
 * (stock Node fails with ERR_MODULE_NOT_FOUND). `require.resolve(spec, {paths})` searches the
 * given folders like node_modules, so it works anywhere. The bundles reach this module through
 * the esbuild aliases of infra/stack.ts (functions/shared/layer/*.cjs); local runs of the
 * handlers from source never use it (lib/ imports the packages from the project's node_modules).
 *
 * Loading the CommonJS builds is also what LanceDB itself does with Arrow, so lib/ and LanceDB
 * share one Arrow instance (no dual-package hazard).
 */
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { DgclError } from '../../lib/errors.ts';

/** Where Lambda mounts a Node.js layer's packages. */
export const LAMBDA_LAYER_NODE_MODULES = '/opt/nodejs/node_modules';

/** The layer is missing from the deployment (or lacks the package): a deployment fault, not the input's. */
export class LayerModuleError extends DgclError {
  override readonly name = 'LayerModuleError';
  readonly code = 'INTERNAL' as const;
  readonly retryable = false;
  /** The package that was not found. */
  readonly specifier: string;
  constructor(specifier: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.specifier = specifier;
  }
}

/** Folders searched for layer packages: NODE_PATH's entries, then /opt/nodejs/node_modules. */
export function layerSearchPaths(env: Record<string, string | undefined> = process.env): string[] {
  const fromEnv = (env.NODE_PATH ?? '').split(path.delimiter).filter((p) => p.trim() !== '');
  return [...new Set([...fromEnv, LAMBDA_LAYER_NODE_MODULES])];
}

const req = createRequire(import.meta.url);

/** The resolved file of a layer package (its CommonJS entry). */
export function resolveLayerModule(specifier: string, env: Record<string, string | undefined> = process.env): string {
  const paths = layerSearchPaths(env);
  try {
    return req.resolve(specifier, { paths });
  } catch (e) {
    throw new LayerModuleError(
      specifier,
      `${specifier} is not in the Lambda layer: searched ${paths.join(', ')} (NODE_PATH and ${LAMBDA_LAYER_NODE_MODULES}); deploy the function with the LanceDB layer`,
      { cause: e },
    );
  }
}

/** `require()` of a layer package, found by resolveLayerModule. */
export function loadLayerModule(specifier: string): unknown {
  return req(resolveLayerModule(specifier)) as unknown;
}
