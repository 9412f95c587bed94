import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stepsConformance } from './conformance/steps.ts';

stepsConformance('file:// root', {
  newRoot: async () => ({ root: `file://${mkdtempSync(path.join(tmpdir(), 'dgcl-steps-'))}`, env: {} }),
});
