// LangGraph's own conformance suite (@langchain/langgraph-checkpoint-validation 1.1.1), unchanged,
// against the saver on a local root. The package's CLI is broken in 1.1.1 (findPackageRoot is
// not a function), so its validate() is called from here. `npm run test:langgraph`.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { validate } from '@langchain/langgraph-checkpoint-validation';
import { DgclCheckpointSaver } from '../../lib/langgraph/index.ts';

const root = `file://${mkdtempSync(path.join(tmpdir(), 'dgcl-langgraph-'))}`;
let n = 0;

validate({
  checkpointerName: 'DgclCheckpointSaver (file:// root)',
  // Each validation group gets its own experiment: the suite reuses thread ids across groups.
  createCheckpointer: () => new DgclCheckpointSaver({ root, pipeline: 'langgraph-validate', experiment: `e${++n}` }),
  destroyCheckpointer: (saver) => saver.close(),
});
