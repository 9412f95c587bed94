/**
 * The CoordStore conformance suite on lib/coord/objects.ts: records as objects in a log's folder
 * (a LocalObjectStore in a temp dir). "Another scope" is another log folder.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';
import { ObjectCoordStore } from '../lib/coord/objects.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { coordStoreConformance } from './conformance/coord.ts';

const root = await fs.mkdtemp(path.join(os.tmpdir(), 'dgcl-coord-'));
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

let n = 0;
coordStoreConformance('objects in a local folder', {
  kind: 'objects',
  async create() {
    const dir = path.join(root, `t${n++}`);
    return {
      store: new ObjectCoordStore(new LocalObjectStore(path.join(dir, 'a', 'log.lance'))),
      other: new ObjectCoordStore(new LocalObjectStore(path.join(dir, 'b', 'log.lance'))),
      destroy: () => fs.rm(dir, { recursive: true, force: true }),
    };
  },
});
