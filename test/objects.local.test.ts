import { promises as fs, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

  /** Every path below `dir` (folders end with '/'), or null if `dir` does not exist. */
  async function tree(dir: string): Promise<string[] | null> {
    try {
      const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true });
      return entries
        .map((e) => path.relative(dir, path.join(e.parentPath, e.name)) + (e.isDirectory() ? '/' : ''))
        .sort();
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    }
  }

  it('reads must not write: get, list and deletes on a fresh root create no folder', async () => {
    const parent = path.join(root, 'reads-fresh');
    const dir = path.join(parent, 'log.lance');
    const store = new LocalObjectStore(dir);
    await store.get('_dgcl/shards/s00-e000001.lance/x');
    await store.list('_dgcl/shards');
    await store.list('');
    await store.delete('_dgcl/claims/c1');
    await store.deletePrefix('_dgcl/shards/s00-e000001.lance');
    await store.deleteOlderThan('_dgcl/retired', Date.now() + 3_600_000);
    expect(await tree(parent)).toBeNull(); // not even the base folder
  });

  it('reads must not write: on an existing root the folder tree is unchanged', async () => {
    const dir = path.join(root, 'reads-existing', 'log.lance');
    const store = new LocalObjectStore(dir);
    await store.putIfAbsent('_dgcl/meta/s00-e000001', '');
    const before = await tree(dir);
    expect(before).toEqual(['_dgcl/', '_dgcl/meta/', '_dgcl/meta/s00-e000001']);
    expect(await store.get('_dgcl/shards/s00-e000001.lance/x')).toBeNull();
    expect(await store.list('_dgcl/shards')).toEqual([]);
    expect(await store.list('_dgcl/meta/s00-e000001')).toEqual([]); // an object, not a folder
    await store.delete('_dgcl/shards/none');
    expect(await store.deletePrefix('_dgcl/retired')).toBe(0);
    expect(await tree(dir)).toEqual(before);
  });
});

describe('LocalObjectStore: puts that create their folder only when the write finds it missing', () => {
  it('a key below an object: putIfAbsent is INVALID_INPUT (direct parent or further up), put UNAVAILABLE; nothing is left behind', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-objects-local-'));
    const store = new LocalObjectStore(dir);
    expect(await store.putIfAbsent('a', 'x')).toBe(true);
    for (const key of ['a/b', 'a/b/c/d']) {
      for (const durable of [true, false]) {
        await expect(store.putIfAbsent(key, 'y', { durable }), `${key} durable ${durable}`).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'key' });
      }
      await expect(store.put(key, 'y'), key).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    }
    expect(readdirSync(dir, { recursive: true })).toEqual(['a']);
    expect(await store.get('a')).toBe('x');
  });

  it('many putIfAbsent of one key in a missing folder while a neighbour key is put and deleted (pruning the folder): exactly one wins each round', async () => {
    const store = new LocalObjectStore(mkdtempSync(path.join(tmpdir(), 'dgcl-objects-local-')));
    for (let round = 0; round < 150; round++) {
      let stop = false;
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      const churn = (async () => {
        while (!stop) {
          await store.put(`f${round}/g/s`, 'x');
          await store.delete(`f${round}/g/s`); // prunes f<round>/g and f<round> when empty
          started();
        }
      })();
      await running; // the folder is being created and pruned while the writers start
      const results = await Promise.all(Array.from({ length: 6 }, (_, j) => store.putIfAbsent(`f${round}/g/k`, `w${j}`, { durable: j % 2 === 0 })));
      stop = true;
      await churn;
      expect(results.filter((r) => r).length, `round ${round}: ${JSON.stringify(results)}`).toBe(1);
      expect(await store.get(`f${round}/g/k`)).toBe(`w${results.indexOf(true)}`);
    }
  }, 60_000);
});
