#!/usr/bin/env node
// Runs the compiled CLI (dist/cli, from `npm run build`; the package ships it, and `npm install`
// in a clone builds it): `main(argv)` of dist/cli/main.js. No TypeScript loader at run time:
// that cost seconds per command.
//
// The project runs on Node 22 (LanceDB 0.39 needs it; Lambda runs it). In a source checkout npm
// scripts and npx get it from the pinned `node` devDependency (node_modules/.bin comes first on
// their PATH); run any other way (`node bin/dgcl.js`, a shell whose node is older than 22.13)
// this re-runs itself on that node. An installed package has no pinned node: it says which Node
// it needs.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import module from 'node:module';
import { fileURLToPath } from 'node:url';

// 22.13: local logs keep their coordination records in node:sqlite, unflagged from 22.13 on.
const MIN = [22, 13];
const [major, minor] = process.versions.node.split('.').map(Number);
const tooOld = major < MIN[0] || (major === MIN[0] && minor < MIN[1]);

if (tooOld) {
  const pinned = fileURLToPath(new URL('../node_modules/node/bin/node', import.meta.url));
  if (!existsSync(pinned)) {
    // Only a source checkout (tsconfig.json is not packed) gets the pinned node from npm install.
    const checkout = existsSync(fileURLToPath(new URL('../tsconfig.json', import.meta.url)));
    const hint = checkout ? '; run npm install (it brings the pinned node devDependency)' : '';
    process.stderr.write(`dgcl: datagen-checkpoint-log needs Node >= ${MIN.join('.')} (found ${process.version})${hint}\n`);
    process.exit(1);
  }
  const child = spawn(pinned, [...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  // The child gets the terminal's signals itself (same process group); these cover a kill of
  // this process alone.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code, signal) => {
    if (signal) {
      // Die of the same signal, as the shell expects; without our handler in the way.
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    }
    else process.exit(code ?? 1);
  });
} else {
  const main = new URL('../dist/cli/main.js', import.meta.url);
  if (!existsSync(fileURLToPath(main))) {
    process.stderr.write('dgcl: dist/cli/main.js is missing; run `npm run build` (a source checkout) or reinstall the package\n');
    process.exit(1);
  }
  // Node keeps the compiled code of the modules a command loads (in the OS temp folder, or
  // NODE_COMPILE_CACHE; NODE_DISABLE_COMPILE_CACHE=1 turns it off): later commands skip compiling
  // LanceDB, Arrow and the package again.
  module.enableCompileCache?.();
  oneArrow();
  const cli = await import(main.href);
  // LanceDB's Rust panics print on fd 2, which a Node process cannot redirect for itself: a
  // command that opens a log (and so loads LanceDB) runs in a child, this file again with
  // DGCL_RAW_STDERR=1, whose stderr drops them (cli/panic-filter.ts). --help, --version and bad
  // usage are answered here, before any child starts. DGCL_RAW_STDERR=1 runs every command here.
  const isolate = async (argv) => (await import(new URL('../dist/cli/panic-filter.js', import.meta.url).href)).runFiltered([fileURLToPath(import.meta.url), ...argv]);
  process.exitCode = await cli.main(process.argv.slice(2), undefined, process.env.DGCL_RAW_STDERR === '1' ? {} : { isolate });
}

/**
 * LanceDB (CommonJS) loads apache-arrow's CommonJS build; the package's modules import its ES
 * module build, a second copy of Arrow that costs a read command a good part of its start-up.
 * For the CLI both get the CommonJS build, loaded once (the same classes on both sides, which
 * lib/arrow-fix.ts patches either way). Where Node has no module.registerHooks (before 22.15)
 * the two copies load as they do for a program that imports the package.
 */
function oneArrow() {
  if (typeof module.registerHooks !== 'function') return;
  module.registerHooks({
    resolve(specifier, context, nextResolve) {
      if (specifier !== 'apache-arrow' && !specifier.startsWith('apache-arrow/')) return nextResolve(specifier, context);
      const conditions = [...context.conditions.filter((c) => c !== 'import' && c !== 'module-sync'), 'require'];
      return nextResolve(specifier, { ...context, conditions });
    },
  });
}
