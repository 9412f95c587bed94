import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { objectStoreConformance } from './conformance/objects.ts';

const root = await fs.mkdtemp(path.join(os.tmpdir(), 'dgcl-objects-'));
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

objectStoreConformance('local folder', {
  async open(name) {
    return new LocalObjectStore(path.join(root, name, 'log.lance'));
  },
});

describe('LocalObjectStore specifics', () => {
  it('leaves no temporary files behind and uses a file:// base URI', async () => {
    const dir = path.join(root, 'specifics', 'log.lance');
    const store = new LocalObjectStore(dir);
    expect(store.baseUri).toBe(`file://${dir}`);
    await Promise.all(Array.from({ length: 5 }, (_, i) => store.putIfAbsent('seal', String(i))));
    expect(await fs.readdir(dir)).toEqual(['seal']);
  });
});
