/**
 * THE CoordStore conformance suite (lib/coord/types.ts): every store of item markers and
 * checkpoint claims runs exactly these tests through a small fixture, so the objects beside a
 * log and the lease table are held to the same semantics. Keys look like the log's own
 * (`_dgcl/items/<hash>`, `_dgcl/claims/<checkpointId>.json`, lib/log/layout.ts).
 */
import { rejection } from '../support/rejection.ts';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CoordKind, CoordStore } from '../../lib/coord/types.ts';
import { InvalidInputError } from '../../lib/errors.ts';
import { claimKey, itemKey } from '../../lib/log/layout.ts';

export interface CoordHarness {
  /** A fresh, empty store. */
  store: CoordStore;
  /** Another fresh store on the same backend (another scope / folder): must never meet `store`'s records. */
  other: CoordStore;
  destroy(): Promise<void>;
}

export interface CoordFixture {
  kind: CoordKind;
  create(): Promise<CoordHarness>;
}

const EXPIRY = { expiresAfterMs: 7 * 24 * 3600 * 1000 };


export function coordStoreConformance(label: string, fixture: CoordFixture): void {
  describe(`CoordStore conformance: ${label}`, () => {
    let h: CoordHarness;
    let store: CoordStore;

    beforeEach(async () => {
      h = await fixture.create();
      store = h.store;
    });
    afterEach(async () => {
      await h.destroy();
    });

    it('says which kind it is', () => {
      expect(store.kind).toBe(fixture.kind);
    });

    it('get of an absent key is null', async () => {
      expect(await store.get(itemKey('never-written'))).toBeNull();
      expect(await store.get(claimKey('cp-never'))).toBeNull();
    });

    it('put then get returns the body; a second put replaces it whole', async () => {
      const k = itemKey('item-1');
      await store.put(k, 's00-e000001 first');
      expect(await store.get(k)).toBe('s00-e000001 first');
      await store.put(k, 's01-e000002');
      expect(await store.get(k)).toBe('s01-e000002');
      // bodies are stored as given: unicode, JSON, newlines
      const body = JSON.stringify({ itemId: 'é/ü\n✓', n: 1 });
      await store.put(k, body);
      expect(await store.get(k)).toBe(body);
    });

    it('putIfAbsent creates once (true), then false keeping the first body', async () => {
      const k = claimKey('cp-1');
      expect(await store.putIfAbsent(k, 'first nonce-a', EXPIRY)).toBe(true);
      expect(await store.putIfAbsent(k, 'second nonce-b', EXPIRY)).toBe(false);
      expect(await store.get(k)).toBe('first nonce-a');
    });

    it('putIfAbsent over a put record is false and leaves it; put over a claim replaces it', async () => {
      const k = claimKey('cp-2');
      await store.put(k, 'put body');
      expect(await store.putIfAbsent(k, 'claim body', EXPIRY)).toBe(false);
      expect(await store.get(k)).toBe('put body');
      const c = claimKey('cp-3');
      expect(await store.putIfAbsent(c, 'claim body', EXPIRY)).toBe(true);
      await store.put(c, 'replaced');
      expect(await store.get(c)).toBe('replaced');
    });

    it('10 concurrent putIfAbsent of one key: exactly one true, and its body is stored', async () => {
      const k = claimKey(`cp-race-${randomUUID()}`);
      const bodies = Array.from({ length: 10 }, (_, i) => `writer ${i} nonce ${randomUUID()}`);
      const results = await Promise.all(bodies.map((b) => store.putIfAbsent(k, b, EXPIRY)));
      const winners = results.flatMap((r, i) => (r ? [i] : []));
      expect(winners).toHaveLength(1);
      expect(await store.get(k)).toBe(bodies[winners[0]!]);
    });

    it('10 concurrent putIfAbsent with identical bodies: still exactly one true', async () => {
      const k = claimKey(`cp-same-${randomUUID()}`);
      const results = await Promise.all(Array.from({ length: 10 }, () => store.putIfAbsent(k, 'same body', EXPIRY)));
      expect(results.filter((r) => r)).toHaveLength(1);
      expect(await store.get(k)).toBe('same body');
    });

    it('delete removes a record, deleting an absent one is fine, and the key can be created again', async () => {
      const k = claimKey('cp-del');
      expect(await store.putIfAbsent(k, 'a', EXPIRY)).toBe(true);
      await store.delete(k);
      expect(await store.get(k)).toBeNull();
      await store.delete(k);
      await store.delete(itemKey('never-written'));
      expect(await store.putIfAbsent(k, 'b', EXPIRY)).toBe(true);
      expect(await store.get(k)).toBe('b');
      const m = itemKey('marker');
      await store.put(m, 'x');
      await store.delete(m);
      expect(await store.get(m)).toBeNull();
    });

    it('getMany of no keys is an empty map', async () => {
      const got = await store.getMany([]);
      expect(got).toBeInstanceOf(Map);
      expect(got.size).toBe(0);
    });

    it('getMany of 3 keys (one absent, one given twice) maps each to its body or null', async () => {
      const [a, b, c] = [itemKey('a'), itemKey('b'), claimKey('cp-c')];
      await store.put(a, 'body a');
      expect(await store.putIfAbsent(c, 'body c', EXPIRY)).toBe(true);
      const got = await store.getMany([a, b, c, a]);
      expect(got).toEqual(
        new Map<string, string | null>([
          [a, 'body a'],
          [b, null],
          [c, 'body c'],
        ]),
      );
    });

    it('getMany of 250 keys (more than one request of a batched store) returns exactly the right map', async () => {
      const keys = Array.from({ length: 250 }, (_, i) => itemKey(`bulk-${i}`));
      const expected = new Map<string, string | null>();
      // every fifth key absent, spread over all chunks
      const writes: Array<Promise<unknown>> = [];
      keys.forEach((k, i) => {
        const body = i % 5 === 3 ? null : `s${i % 7}-e${i} ${'x'.repeat(i % 50)}`;
        expected.set(k, body);
        if (body !== null) writes.push(i % 2 === 0 ? store.put(k, body) : store.putIfAbsent(k, body, EXPIRY));
      });
      for (let i = 0; i < writes.length; i += 25) await Promise.all(writes.slice(i, i + 25));
      const got = await store.getMany(keys);
      expect(got.size).toBe(250);
      expect(got).toEqual(expected);
      expect([...got.values()].filter((v) => v === null)).toHaveLength(50);
    });

    it('two stores on one backend never see each other\'s records', async () => {
      const k = itemKey('shared-name');
      const c = claimKey('cp-shared');
      await store.put(k, 'mine');
      expect(await store.putIfAbsent(c, 'my claim', EXPIRY)).toBe(true);
      expect(await h.other.get(k)).toBeNull();
      expect(await h.other.getMany([k, c])).toEqual(
        new Map<string, string | null>([
          [k, null],
          [c, null],
        ]),
      );
      // the other store creates its own claim of the same name, and deletes its own records only
      expect(await h.other.putIfAbsent(c, 'their claim', EXPIRY)).toBe(true);
      await h.other.put(k, 'theirs');
      await h.other.delete(k);
      expect(await store.get(k)).toBe('mine');
      expect(await store.get(c)).toBe('my claim');
      expect(await h.other.get(c)).toBe('their claim');
    });

    it('bad keys are InvalidInputError naming the key, and nothing is written', async () => {
      for (const bad of ['', '/_dgcl/items/x']) {
        const errors = await Promise.all([
          rejection(store.get(bad)),
          rejection(store.put(bad, 'x')),
          rejection(store.putIfAbsent(bad, 'x', EXPIRY)),
          rejection(store.delete(bad)),
          rejection(store.getMany([itemKey('ok'), bad])),
        ]);
        for (const e of errors) {
          expect(e).toBeInstanceOf(InvalidInputError);
          expect((e as InvalidInputError).field).toMatch(/^keys?(\[1\])?$/);
        }
      }
      // the same name without the leading '/' was never created by the refused calls
      expect(await store.get('_dgcl/items/x')).toBeNull();
    });
  });
}
