/**
 * One conformance suite for every ObjectStore (local folder, S3). Each test gets a fresh,
 * empty store from `open` (a new temp folder, or a new S3 prefix) and `close` cleans it up.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../lib/errors.ts';
import type { ObjectStore } from '../../lib/storage/objects.ts';

export interface StoreFixture {
  /** A fresh, empty store; `name` is unique per test. */
  open(name: string): Promise<ObjectStore>;
  /** Called after each test with the store `open` gave. */
  close?(store: ObjectStore): Promise<void>;
}

async function pool<T>(items: T[], width: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

export function objectStoreConformance(label: string, fixture: StoreFixture): void {
  describe(`ObjectStore conformance: ${label}`, () => {
    let store: ObjectStore;
    let n = 0;

    beforeEach(async () => {
      store = await fixture.open(`t${++n}-${Math.random().toString(36).slice(2, 8)}`);
    });
    afterEach(async () => {
      if (store && fixture.close) await fixture.close(store);
    });

    it('has a human-readable base URI', () => {
      expect(store.baseUri).toMatch(/^(file|s3):\/\/.+/);
    });

    it('putIfAbsent creates once, then returns false and keeps the first body', async () => {
      expect(await store.putIfAbsent('seals/000001.json', '{"v":1}')).toBe(true);
      expect(await store.putIfAbsent('seals/000001.json', '{"v":2}')).toBe(false);
      expect(await store.get('seals/000001.json')).toBe('{"v":1}');
    });

    it('10 concurrent putIfAbsent of one key: exactly one wins, its body is stored', async () => {
      const bodies = Array.from({ length: 10 }, (_, i) => `{"writer":${i}}`);
      const results = await Promise.all(bodies.map((b) => store.putIfAbsent('claims/item-1', b)));
      expect(results.filter((r) => r)).toHaveLength(1);
      const winner = results.indexOf(true);
      expect(await store.get('claims/item-1')).toBe(bodies[winner]);
    });

    it('10 concurrent putIfAbsent of one identical body: exactly one true (bodies never decide)', async () => {
      const body = '{"checkpoint":"c1","seqs":[1,2]}';
      const results = await Promise.all(Array.from({ length: 10 }, () => store.putIfAbsent('claims/same', body)));
      expect(results.filter((r) => r)).toHaveLength(1);
      expect(await store.putIfAbsent('claims/same', body)).toBe(false); // also for the same body later
      expect(await store.get('claims/same')).toBe(body);
    });

    it('reads and deletes of missing keys write nothing (no folder appears)', async () => {
      expect(await store.get('_dgcl/shards/s00-e000001/x')).toBeNull();
      expect(await store.list('_dgcl/shards')).toEqual([]);
      expect(await store.list('_dgcl/meta/deep')).toEqual([]);
      await store.delete('_dgcl/claims/none');
      expect(await store.deletePrefix('_dgcl/shards/s01')).toBe(0);
      expect(await store.deleteOlderThan('_dgcl/retired', Date.now() + 3_600_000)).toBe(0);
      expect(await store.list('')).toEqual([]);
      expect(await store.list('_dgcl')).toEqual([]);
    });

    it('put creates and replaces; concurrent puts leave one whole body', async () => {
      await store.put('m/owner', 'first');
      expect(await store.get('m/owner')).toBe('first');
      await store.put('m/owner', 'second');
      expect(await store.get('m/owner')).toBe('second');
      const bodies = Array.from({ length: 8 }, (_, i) => `body-${i}-${'x'.repeat(i * 100)}`);
      await Promise.all(bodies.map((b) => store.put('m/owner', b)));
      expect(bodies).toContain(await store.get('m/owner'));
      expect(await store.list('m')).toEqual(['owner']);
    });

    it('get of an absent key is null', async () => {
      expect(await store.get('nope')).toBeNull();
      expect(await store.get('no/such/deep/key.json')).toBeNull();
    });

    it('round-trips unicode and empty bodies', async () => {
      const body = 'héllo ✓ 𝄞\n{"k":[1,2]}';
      expect(await store.putIfAbsent('u/one', body)).toBe(true);
      expect(await store.get('u/one')).toBe(body);
      expect(await store.putIfAbsent('u/empty', '')).toBe(true);
      expect(await store.get('u/empty')).toBe('');
    });

    it('lists objects and folders directly below a prefix, sorted, relative', async () => {
      for (const k of ['a/y.json', 'a/x.json', 'a/sub/z', 'a/sub2/deep/w', 'ab/q', 'b']) {
        expect(await store.putIfAbsent(k, k)).toBe(true);
      }
      expect(await store.list('a')).toEqual(['sub', 'sub2', 'x.json', 'y.json']);
      expect(await store.list('a/')).toEqual(['sub', 'sub2', 'x.json', 'y.json']);
      expect(await store.list('')).toEqual(['a', 'ab', 'b']);
      expect(await store.list('a/sub2')).toEqual(['deep']);
      expect(await store.list('missing')).toEqual([]);
      expect(await store.list('a/sub/z/none')).toEqual([]);
    });

    it('delete removes one object; absent is fine; an emptied folder disappears', async () => {
      await store.putIfAbsent('d/one', '1');
      await store.putIfAbsent('d/two', '2');
      await store.delete('d/one');
      expect(await store.get('d/one')).toBeNull();
      expect(await store.list('d')).toEqual(['two']);
      await store.delete('d/one');
      await store.delete('never/was');
      await store.delete('d/two');
      expect(await store.list('')).toEqual([]);
      expect(await store.putIfAbsent('d/one', 'again')).toBe(true);
      expect(await store.get('d/one')).toBe('again');
    });

    it('deletePrefix removes everything below the prefix only and counts it', async () => {
      for (const k of ['shards/s1/a', 'shards/s1/b', 'shards/s1/deep/c', 'shards/s10/x', 'shards/s2/y', 'top']) {
        await store.putIfAbsent(k, k);
      }
      expect(await store.deletePrefix('shards/s1')).toBe(3);
      expect(await store.list('shards')).toEqual(['s10', 's2']);
      expect(await store.get('shards/s10/x')).toBe('shards/s10/x');
      expect(await store.deletePrefix('shards/s1')).toBe(0);
      expect(await store.deletePrefix('missing')).toBe(0);
      expect(await store.deletePrefix('')).toBe(3);
      expect(await store.list('')).toEqual([]);
    });

    it('deleteOlderThan removes only old objects directly below the prefix', async () => {
      for (const k of ['old/a', 'old/b', 'old/nested/c', 'other/d']) await store.putIfAbsent(k, k);
      const hour = 3_600_000;
      // far cutoffs, so clock skew between this machine and a server does not matter
      expect(await store.deleteOlderThan('old', Date.now() - hour)).toBe(0);
      expect(await store.deleteOlderThan('old', Date.now() + hour)).toBe(2);
      expect(await store.list('old')).toEqual(['nested']);
      expect(await store.get('old/nested/c')).toBe('old/nested/c');
      expect(await store.get('other/d')).toBe('other/d');
      expect(await store.deleteOlderThan('missing', Date.now() + hour)).toBe(0);
    });

    it('lists and deletes past one page (1,005 objects)', async () => {
      const keys = Array.from({ length: 1005 }, (_, i) => `many/k${String(i).padStart(5, '0')}`);
      await pool(keys, 16, async (k) => expect(await store.putIfAbsent(k, 'x')).toBe(true));
      const names = await store.list('many');
      expect(names).toHaveLength(1005);
      expect(names[0]).toBe('k00000');
      expect(names[1004]).toBe('k01004');
      expect(await store.deletePrefix('many')).toBe(1005);
      expect(await store.list('many')).toEqual([]);
    });

    it('rejects malformed keys before any I/O', async () => {
      for (const bad of ['', '/abs', 'a//b', '../up', 'a/./b', 'a/..', 'trailing/']) {
        await expect(store.putIfAbsent(bad, 'x')).rejects.toBeInstanceOf(InvalidInputError);
        await expect(store.get(bad)).rejects.toBeInstanceOf(InvalidInputError);
      }
      await expect(store.list('../x')).rejects.toBeInstanceOf(InvalidInputError);
      await expect(store.deletePrefix('a/../..')).rejects.toBeInstanceOf(InvalidInputError);
    });
  });
}
