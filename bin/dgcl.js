#!/usr/bin/env node
// Runs the compiled CLI (dist/cli, from `npm run build`; the package ships it, and `npm install`
// in a clone builds it). No TypeScript loader at run time: that cost seconds per command.
//
// The project runs on Node 22 (LanceDB 0.39 needs it; Lambda runs it). npm scripts and npx get
// it from the pinned `node` devDependency (node_modules/.bin comes first on their PATH); run any
// other way (`node bin/dgcl.js`, a shell whose node is older than 22.13) this re-runs itself on
// that node.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// 22.13: local logs keep their coordination records in node:sqlite, unflagged from 22.13 on.
const MIN = [22, 13];
const [major, minor] = process.versions.node.split('.').map(Number);
const tooOld = major < MIN[0] || (major === MIN[0] && minor < MIN[1]);

if (tooOld) {
  const pinned = fileURLToPath(new URL('../node_modules/node/bin/node', import.meta.url));
  if (!existsSync(pinned)) {
    process.stderr.write(`dgcl: Node >= ${MIN.join('.')} is required, this is ${process.version}; run npm install (devDependency node) or use Node ${MIN.join('.')} or later\n`);
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
  // LanceDB's Rust panics print on fd 2, which a Node process cannot redirect for itself: the
  // command runs in a child whose stderr drops them (cli/panic-filter.ts).
  if (process.env.DGCL_RAW_STDERR === '1') await import(main.href);
  else (await import(new URL('../dist/cli/panic-filter.js', import.meta.url).href)).runFiltered([fileURLToPath(main), ...process.argv.slice(2)]);
}
