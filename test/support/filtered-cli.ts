/** The CLI as bin/dgcl.js runs it (stderr through the panic filter), from the sources (tsx). */
import { runFiltered } from '../../cli/panic-filter.ts';

runFiltered(['cli/main.ts', ...process.argv.slice(2)]);
