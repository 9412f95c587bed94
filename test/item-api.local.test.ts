import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { itemApiConformance } from './conformance/item-api.ts';

itemApiConformance('file:// root', {
  newRoot: async () => ({ root: `file://${mkdtempSync(path.join(tmpdir(), 'dgcl-itemapi-'))}`, env: {} }),
});
