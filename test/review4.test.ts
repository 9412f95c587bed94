/**
 * Adversarial review 4 (issue 9 performance work, f8b12d4..532649f): interleavings and inputs
 * that break a promise of the log after the listing, merge, local store and format changes.
 * Real Lance datasets in temp folders, the real local store; schedules forced with promises.
 * F1 failed on 532649f (fixed on h-review4: lib/log/read/listing.ts); the probes pass on it and pin
 * what was tried (orders at the page bound, mixed file formats, the Arrow merge, local puts).
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { BASE_KEY } from '../lib/log/layout.ts';
import { EVENT_SCHEMA } from '../lib/schema.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { fileFormat } from './support/lance-format.ts';
import { createBatch } from './support/batches.ts';
import { raceFixture } from './support/race-kit.ts';

const LONG_TTL = 10 * 3_600_000;
const { setup } = raceFixture(LONG_TTL);

/** Pages through `items({limit})` until a page has no `next`; the ids seen, in order. */
/**
 * Make `log.aggregates` (a page's second pass) delete `ids` first, once, when its filter reaches
 * `bound`: the deletes land between the page's id pass and its aggregate pass.
 */
function deleteBeforeAggregating(
  log: { aggregates(filter?: string | null): Promise<unknown>; deleteItem(id: string): Promise<unknown> },
  bound: string,
  ids: string[],
): { ran: boolean } {
  const state = { ran: false };
  const aggregates = log.aggregates.bind(log);
  log.aggregates = async (filter) => {
    if (!state.ran && filter?.includes(`item_id <= '${bound}'`)) {
      state.ran = true;
      for (const id of ids) await log.deleteItem(id);
    }
    return aggregates(filter);
  };
  return state;
}

async function pageAll(log: { items(q: { limit: number; after?: string }): Promise<{ items: { itemId: string }[]; next?: string }> }, limit: number): Promise<string[]> {
  const seen: string[] = [];
  let after: string | undefined;
  for (let pages = 0; pages < 100; pages++) {
    const page = await log.items({ limit, ...(after !== undefined ? { after } : {}) });
    seen.push(...page.items.map((s) => s.itemId));
    if (page.next === undefined) return seen;
    after = page.next;
  }
  throw new Error('more than 100 pages');
}

describe('review4 F1: a page whose items are all deleted between its two passes ends the paging', () => {
  // items({limit}) finds the page's ids (pass 1), then aggregates `item_id <= last` (pass 2).
  // Each pass is its own consistent read. If every item of the page is deleted in between, pass 2
  // lists nothing and the page is `{ items: [] }` with no `next`: a client paging the log stops,
  // and every item after the page (never deleted) is skipped.
  it('items deleted between the id pass and the aggregate pass: later items are still listed', async () => {
    const { open } = setup();
    const W = open({ slot: 0, slots: 1 });
    await W.log.append([createBatch('a'), createBatch('b'), createBatch('c')]);
    const log = W.log;
    // Between the page's id pass and its aggregate pass: another client deletes item `a`.
    const deletes = deleteBeforeAggregating(log, 'a', ['a']);
    const seen = await pageAll(log, 1);
    expect(deletes.ran, 'the delete ran between the two passes of the first page').toBe(true);
    expect(seen).toEqual(['b', 'c']);
  });

  it('the same with a tag filter: the page\'s tagged items deleted before they are aggregated', async () => {
    const { open } = setup();
    const W = open({ slot: 0, slots: 1 });
    await W.log.append(['a', 'b', 'c', 'd'].map((id) => createBatch(id, { queryTags: { k: id === 'c' ? 2 : 1 } })));
    const log = W.log;
    const deletes = deleteBeforeAggregating(log, 'b', ['a', 'b']);
    const seen: string[] = [];
    let after: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const page = await log.items({ tags: { k: 1 }, limit: 2, ...(after !== undefined ? { after } : {}) });
      seen.push(...page.items.map((s) => s.itemId));
      if (page.next === undefined) break;
      after = page.next;
    }
    expect(deletes.ran, 'the deletes ran between the two passes of the first page').toBe(true);
    expect(seen).toEqual(['d']);
  });
});

describe('review4 probe: paging over ids that are hard to order or quote', () => {
  it('every page size lists every id once, in the one-call order', async () => {
    const { open } = setup();
    const W = open({ slot: 0, slots: 1 });
    const ids = ["a'b", 'a\\', 'a\\b', 'a\\\\', 'a%', 'a_', 'é', 'e\u0301', '\uE000', '\uFFFD', '\u{1F600}', '\u{10FFFF}x', 'z', 'Z', '日本', 'a b', 'a'];
    await W.log.append(ids.map((id) => createBatch(id)));
    await W.log.mergeOwnShard();
    await W.log.append([createBatch('\u{1F601}'), createBatch('\uE001')]); // some in a shard
    const all = (await W.log.items()).items.map((s) => s.itemId);
    expect(new Set(all).size).toBe(ids.length + 2);
    for (const limit of [1, 2, 3, 5]) expect(await pageAll(W.log, limit), `limit ${limit}`).toEqual(all);
    await W.log.maintain(); // compacted, item_id indexed: the bound goes through the index
    await W.log.append([createBatch('\u{1F602}'), createBatch('a\\c')]);
    const after = (await W.log.items()).items.map((s) => s.itemId);
    expect(after.length).toBe(all.length + 2);
    for (const limit of [1, 2, 3, 5]) expect(await pageAll(W.log, limit), `indexed, limit ${limit}`).toEqual(after);
    await W.log.mergeOwnShard(); // base: indexed fragments and one the index does not cover
    for (const limit of [1, 2, 3, 5]) expect(await pageAll(W.log, limit), `partly indexed, limit ${limit}`).toEqual(after);
  });
});

describe('review4 probe: a log whose base was created in format 2.2 (before issue 9), written on by this version', () => {
  it('2.1 shards merge into the 2.2 base; reads, pages, blobs, maintenance and deletes agree', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-r4-mixed-'));
    const logDir = path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance');
    // What an earlier version left: the base made in LanceDB 0.39's default format, and its marker.
    const conn = await lancedb.connect(path.dirname(logDir));
    await conn.createEmptyTable('log', EVENT_SCHEMA, { mode: 'create', storageOptions: { new_table_data_storage_version: '2.2' } });
    conn.close();
    await new LocalObjectStore(logDir).putIfAbsent(BASE_KEY, '');

    const blob = Buffer.from([0, 1, 2, 255, 254]);
    const big = Buffer.alloc(5000, 7);
    const batches = (n: number) => [
      createBatch(`m${n}`, { set: { i: { $int: String(2n ** 62n + BigInt(n)) }, neg: -(2 ** 40), f: 1.5, t: true, nothing: { value: null }, s: 'é\u{1F600}', j: { a: [1, 'x'] }, b: { $blob: blob.toString('base64') }, big: { $blob: big.toString('base64') } } }),
      createBatch(`n${n}`),
    ];
    const first = await openLog({ root, pipeline: 'p', experiment: 'e' });
    await first.append(batches(1));
    await first.close(); // merged into the 2.2 base
    const baseFiles = readdirSync(path.join(logDir, 'data'));
    expect(baseFiles.map((f) => fileFormat(readFileSync(path.join(logDir, 'data', f))))).toEqual(['2.2']);

    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    await log.append(batches(2)); // a 2.1 shard next to the 2.2 base
    const check = async (label: string, ids: string[]) => {
      for (const id of ids.filter((i) => i.startsWith('m'))) {
        const s = await log.fold(id);
        expect(s.violations, `${label} ${id}`).toEqual([]);
        expect([s.fields.i, s.fields.neg], `${label} ${id}`).toEqual([{ $int: String(2n ** 62n + BigInt(id.slice(1))) }, -(2 ** 40)]);
        expect([s.fields.f, s.fields.t, s.fields.nothing, s.fields.s, s.fields.j], `${label} ${id}`).toEqual([1.5, true, { value: null }, 'é\u{1F600}', { a: [1, 'x'] }]);
        expect(Buffer.from(await log.blob(id, 'b')), `${label} ${id}`).toEqual(blob);
        expect(Buffer.from(await log.blob(id, 'big')), `${label} ${id}`).toEqual(big);
      }
      expect((await log.items()).items.map((s) => s.itemId), label).toEqual(ids);
      expect(await pageAll(log, 1), label).toEqual(ids);
    };
    await check('base 2.2 + shard 2.1', ['m1', 'm2', 'n1', 'n2']);
    await log.mergeOwnShard();
    await check('both merged into the 2.2 base', ['m1', 'm2', 'n1', 'n2']);
    await log.append(batches(3));
    await log.maintain();
    await check('after maintenance', ['m1', 'm2', 'm3', 'n1', 'n2', 'n3']);
    await log.deleteItem('n1');
    await log.maintain();
    expect((await log.items()).items.map((s) => s.itemId)).toEqual(['m1', 'm2', 'm3', 'n2', 'n3']);
    await log.close();
    const again = await openLog({ root, pipeline: 'p', experiment: 'e' });
    expect((await again.items()).items.map((s) => s.itemId)).toEqual(['m1', 'm2', 'm3', 'n2', 'n3']);
    expect(readdirSync(path.join(logDir, 'data')).map((f) => fileFormat(readFileSync(path.join(logDir, 'data', f)))).every((v) => v === '2.2')).toBe(true);
    await again.close();
  });
});

describe('review4 probe: the merge passes the shard\'s Arrow data through', () => {
  it('every event reads the same from the shard and from the base after the merge (several record batches, all-null columns)', async () => {
    const { open } = setup();
    const W = open({ slot: 0, slots: 1, mergeEveryCommits: 1_000_000 });
    const out: Record<string, unknown>[] = [];
    for (let i = 0; i < 6_000; i++) {
      // The first rows carry no bool (value_bool null in whole record batches), later ones do.
      const set = i < 4_500 ? { s: `v${i}`, n: -i } : { t: i % 2 === 0, blob: { $blob: Buffer.from([i & 255, 0]).toString('base64') } };
      out.push(createBatch(`it${String(i).padStart(5, '0')}`, { set, ...(i % 7 === 0 ? { queryTags: { k: i % 3 } } : {}) }));
    }
    for (let i = 0; i < out.length; i += 2000) await W.log.append(out.slice(i, i + 2000));
    const snapshot = async () => {
      const states = await W.log.allStates();
      const blobs = await Promise.all(['it04500', 'it05999'].map(async (id) => Buffer.from(await W.log.blob(id, 'blob')).toString('hex')));
      return { states, blobs, items: await W.log.items({ tags: { k: 1 } }) };
    };
    const before = await snapshot();
    expect(before.states).toHaveLength(6_000);
    const merged = await W.log.mergeOwnShard();
    expect(merged.mergedRows, 'every event of the shard').toBe(before.states.reduce((n, st) => n + st.lastSeq, 0));
    expect(await snapshot()).toEqual(before);
    expect((await W.log.mergeOwnShard()).mergedRows, 'nothing left to merge').toBe(0);
    expect(await snapshot()).toEqual(before);
  }, 120_000);
});

describe('review4 probe: local puts that create their folder only when the write finds it missing', () => {
  it('a key below an object: putIfAbsent is INVALID_INPUT (direct parent or further up), put UNAVAILABLE; nothing is left behind', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-r4-local-'));
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
    const store = new LocalObjectStore(mkdtempSync(path.join(tmpdir(), 'dgcl-r4-local-')));
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
