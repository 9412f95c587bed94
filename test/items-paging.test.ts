/**
 * Paging through items({limit, after}) (lib/log/read/listing.ts): every item is listed once, in
 * the one-call order, also when a page's items are deleted between its two passes and for ids that
 * are hard to order or quote. Real Lance datasets in temp folders, the real local store.
 */
import { describe, expect, it } from 'vitest';
import type { CheckpointLog } from '../lib/api.ts';
import { readsOf } from '../lib/log/reads.ts';
import { createBatch } from './support/batches.ts';
import { pageAll } from './support/paging.ts';
import { raceFixture } from './support/race-kit.ts';

const LONG_TTL = 10 * 3_600_000;
const { setup } = raceFixture(LONG_TTL);

/**
 * Make the log's `aggregates` (a page's second pass) delete `ids` first, once, when its filter
 * reaches `bound`: the deletes land between the page's id pass and its aggregate pass.
 */
function deleteBeforeAggregating(log: CheckpointLog, bound: string, ids: string[]): { ran: boolean } {
  const state = { ran: false };
  const reads = readsOf(log);
  const aggregates = reads.aggregates.bind(reads);
  reads.aggregates = async (filter) => {
    if (!state.ran && filter?.includes(`item_id <= '${bound}'`)) {
      state.ran = true;
      for (const id of ids) await log.deleteItem(id);
    }
    return aggregates(filter);
  };
  return state;
}

describe('paging: a page whose items are all deleted between its two passes', () => {
  // items({limit}) finds the page's ids (pass 1), then aggregates `item_id <= last` (pass 2).
  // Each pass is its own consistent read. If every item of the page is deleted in between, pass 2
  // lists nothing; the page was `{ items: [] }` with no `next`: a client paging the log stopped,
  // and every item after the page (never deleted) was skipped.
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

describe('paging over ids that are hard to order or quote', () => {
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

