import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { logStoreConformance } from './conformance/log.ts';

logStoreConformance('file:// root', {
  newRoot: async () => ({ root: `file://${mkdtempSync(path.join(tmpdir(), 'dgcl-log-'))}`, env: {} }),
});
