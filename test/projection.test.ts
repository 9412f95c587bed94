/**
 * The item listing projection (lib/log/projection/projection.ts) against the plain streaming scan it stands
 * in for, on real Lance: after maintenance built it; with merges added to the base since and an
 * unmerged tail; a deleted item; a base copy of an event that loses to a tail copy (a lower seq);
 * counting only the added rows against counting all; and the cases where it must not be used
 * (compaction or a purge behind it, an unreadable or foreign object), where listings still equal
 * the folds.
 */
import { describe, expect, it } from 'vitest';
import type { ItemSummary } from '../lib/api.ts';
import { summarize } from '../lib/fold.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { refreshProjection } from '../lib/log/projection/build.ts';
import { ProjectionCache } from '../lib/log/projection/projection.ts';
import { CHUNK_ITEMS, chunkKey, fragmentRows, PROJECTION_DIR, PROJECTION_KEY } from '../lib/log/projection/stored.ts';
import { decodeRowsFile } from '../lib/log/projection/fold-rows.ts';
import { decodeAggregate } from '../lib/log/projection/projection-codec.ts';
import { mergeAggregates, SUMMARY_SCAN_COLUMNS, SummaryVisitor, type ItemAggregate } from '../lib/log/read/summary.ts';
import { LanceTables } from '../lib/log/tables.ts';
import { rowsFromArrow, rowsToArrow } from '../lib/schema.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { raceFixture } from './support/race-kit.ts';
import { createBatch } from './support/batches.ts';
import { readsOf } from '../lib/log/reads.ts';

const { setup } = raceFixture(60_000);

function scanned(log: CheckpointLog): Promise<ItemAggregate[]> {
  return readsOf(log).scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor());
}

/** The projection answers, and exactly as the scan does; listings equal the folds. */
async function expectProjected(log: CheckpointLog, label: string): Promise<void> {
  const want = await scanned(log);
  expect(await readsOf(log).projected(), `${label}: the projection answers as the scan`).toEqual(want);
  await expectListingsMatchFold(log, label);
}

async function expectListingsMatchFold(log: CheckpointLog, label: string): Promise<void> {
  const states = await log.allStates({ fields: false });
  expect((await log.items()).items, `${label}: items()`).toEqual(states.map(summarize));
  for (const status of ['completed', 'failed', 'in_progress'] as const) {
    expect((await log.items({ status, limit: 4 })).items.map((i) => i.itemId), `${label}: items(${status})`).toEqual(
      states.filter((s) => s.status === status).map((s) => s.itemId).slice(0, 4),
    );
  }
  // Pages of 7 from the cursor cover every item once, in order.
  const paged: string[] = [];
  let after: string | undefined;
  do {
    const page = await log.items({ limit: 7, ...(after ? { after } : {}) });
    paged.push(...page.items.map((i) => i.itemId));
    after = page.next;
  } while (after);
  expect(paged, `${label}: pages`).toEqual(states.map((s) => s.itemId));
  const failed = states.filter((s) => s.status === 'failed').map((s) => ({ itemId: s.itemId, status: s.status, ...s.failures.at(-1)! }));
  expect(await log.failures(), `${label}: failures()`).toEqual(failed);
}

function batches(n: number, round: number, from = 0) {
  const out: unknown[] = [];
  for (let i = from; i < from + n; i++) {
    const itemId = `it-${String(i).padStart(3, '0')}`;
    if (round === 0) out.push({ itemId, runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { x: i } });
    else if ((i + round) % 4 === 0) out.push({ itemId, runId: 'r', step: { name: `s${round}`, index: round }, failed: { errorType: `Boom${round}`, traceback: `tb ${i}` } });
    else out.push({ itemId, runId: 'r', step: { name: `s${round}`, index: round }, set: { y: i * round }, ...(round === 3 && i % 5 === 0 ? { terminal: 'completed' } : {}) });
  }
  return out;
}

function whiteBox(log: CheckpointLog) {
  const objects = new LocalObjectStore(log.uri);
  return { objects, tables: new LanceTables(log.uri, undefined, objects) };
}

/**
 * The stored projection as a fresh process finds it, for the base's current version (null: it
 * does not cover it), with every item's aggregate over its chunks (merged across fragments).
 */
async function stored(log: CheckpointLog) {
  const { objects, tables } = whiteBox(log);
  const latest = (await tables.base(true))!;
  const counts = await fragmentRows(await tables.baseAt(await latest.version()));
  const index = await new ProjectionCache(objects).covering(Promise.resolve(counts));
  if (!index) return { counts, projection: null };
  const byId = new Map<string, ItemAggregate>();
  for (const [f, rows] of index.fragments) {
    for (let k = 0; k < index.chunks.get(f)!.length; k++) {
      const doc = JSON.parse((await objects.get(chunkKey(index.nonces.get(f)!, f, rows, k)))!) as { items: unknown[] };
      for (const a of doc.items.map(decodeAggregate)) byId.set(a.itemId, byId.has(a.itemId) ? mergeAggregates(byId.get(a.itemId)!, a) : a);
    }
  }
  return { counts, projection: { fragments: index.fragments, byId } };
}

/** Names of the projection folder's files whose text holds `needle`. */
async function projectionFilesHolding(objects: LocalObjectStore, needle: string): Promise<string[]> {
  const hits: string[] = [];
  for (const name of await objects.list(PROJECTION_DIR)) {
    const key = `${PROJECTION_DIR}/${name}`;
    // Rows files are gzip: their items and rows decoded, as text.
    const text = name.endsWith('.bin') ? JSON.stringify(decodeRowsFile((await objects.getBytes(key, { suffix: 2 ** 30 }))!.bytes), (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)) : await objects.get(key);
    if (text?.includes(needle)) hits.push(name);
  }
  return hits;
}

const baseRows = async (log: CheckpointLog) => (await log.stats()).base.rows;

describe('the item listing projection', () => {
  it('answers as the scan with merges since it was built, an unmerged tail, deletions and a losing base copy', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 2 });
    const B = open({ slot: 1, slots: 2 });
    await A.log.append(batches(20, 0));
    await B.log.append(batches(10, 0, 20));
    await A.log.append(batches(20, 1));
    await A.log.mergeOwnShard();
    await B.log.mergeOwnShard();
    expect(await readsOf(A.log).projected(), 'no projection before maintenance').toBeNull();

    const M = open({ slot: 0, slots: 2, owner: 'maintainer' });
    const rep = await M.log.maintain();
    expect(rep.failures).toEqual([]);
    expect(rep.projection, 'every row counted').toMatchObject({ countedRows: await baseRows(A.log) });
    await expectProjected(A.log, 'right after maintenance');
    expect((await M.log.maintain()).projection, 'a second pass finds it current').toMatchObject({ countedRows: 0 });

    // Merges since (new base fragments) and a live tail in both writers, new items included.
    // New items first: the first row of the merged fragment is an ITEM_CREATED.
    await A.log.append(batches(3, 0, 40));
    await A.log.append(batches(20, 2));
    await A.log.mergeOwnShard();
    await B.log.append([...batches(10, 1, 20), ...batches(5, 0, 30)]);
    await A.log.append(batches(20, 3));
    await expectProjected(A.log, 'merges since and an unmerged tail');
    await expectProjected(B.log, 'the same through the other writer');

    // Counting only the fragments written since gives what counting all of them gives.
    const { objects, tables } = whiteBox(A.log);
    const before = await stored(A.log);
    expect(before.projection, 'the merge since added a fragment it did not count').not.toBeNull();
    const newRows = [...before.counts].filter(([f]) => !before.projection!.fragments.has(f)).reduce((n, [, r]) => n + r, 0);
    expect(newRows).toBeGreaterThan(0);
    expect(await refreshProjection({ tables, objects }, true), 'only the new fragment counted').toMatchObject({ countedRows: newRows });
    const byAdding = (await stored(A.log)).projection!;
    await objects.deletePrefix(PROJECTION_DIR);
    expect(await refreshProjection({ tables, objects }, true), 'all counted again').toMatchObject({ countedRows: await baseRows(A.log) });
    const byCounting = (await stored(A.log)).projection!;
    const sorted = (p: typeof byAdding) => [...p.byId.values()].sort((a, b) => (a.itemId < b.itemId ? -1 : 1));
    expect(sorted(byAdding)).toEqual(sorted(byCounting));
    expect(byAdding.fragments.size, 'more than one fragment: aggregates merged across them').toBeGreaterThan(1);
    await expectProjected(A.log, 'after the refresh by adding');

    // A deleted item: its counted aggregate includes hidden rows and must be recounted.
    await A.log.deleteItem('it-003');
    await expectProjected(A.log, 'after a delete');
    expect((await readsOf(A.log).projected())!.map((a) => a.itemId)).not.toContain('it-003');

    // A base copy of a tail event at a higher seq (as two writers' deliveries can leave it): the
    // scan keeps the tail's lower-seq copy; the projection counted the base's and must recount.
    const shard = (await B.log.stats()).shards.find((s) => s.slot === 1 && !s.retired)!;
    const tail = rowsFromArrow(await (await tables.shard(shard.name)).query().where(`item_id = 'it-021'`).toArrow());
    expect(tail.length).toBeGreaterThanOrEqual(2);
    const base = (await tables.base(true))!;
    await base.add(rowsToArrow(tail.map((r) => ({ ...r, item_seq: r.item_seq + 1000 }))) as never);
    await refreshProjection({ tables, objects }, true);
    expect((await stored(A.log)).projection!.byId.get('it-021')!.lastSeq, 'the projection counted the losing copy').toBeGreaterThan(1000);
    // A fresh reader: A's copy of the projection did not count the copy (the range read skips it).
    const R = open({ slot: 0, slots: 2, owner: 'reader' });
    await expectProjected(R.log, 'a losing base copy');
    expect((await readsOf(R.log).projected())!.find((a) => a.itemId === 'it-021')!.lastSeq).toBeLessThan(1000);
    await expectProjected(A.log, 'a losing base copy, the older projection');
  });

  it('a page reads a chunk or two per fragment, not the whole projection; pages across chunk boundaries equal the scan', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 2 });
    const B = open({ slot: 1, slots: 2 });
    await A.log.append(batches(1300, 0));
    await B.log.append(batches(1000, 0, 1300));
    await A.log.append(batches(1300, 1));
    await A.log.mergeOwnShard();
    await B.log.mergeOwnShard();
    const M = open({ slot: 0, slots: 2, owner: 'maintainer' });
    expect((await M.log.maintain()).failures).toEqual([]);
    // A second counted fragment whose items overlap the first's (aggregates merged across
    // fragments, chunk boundaries at other items), then merges since (a fragment it did not
    // count) and an unmerged tail with new items.
    await B.log.append(batches(1200, 1, 1100));
    await B.log.mergeOwnShard();
    const { objects, tables } = whiteBox(A.log);
    await refreshProjection({ tables, objects }, true);
    await B.log.append(batches(300, 2, 1300));
    await B.log.mergeOwnShard();
    await A.log.append([...batches(40, 2), ...batches(5, 0, 2300)]);
    await A.log.deleteItem('it-1500');
    const states = await A.log.allStates({ fields: false });
    const want = states.map(summarize);
    expect(want.length).toBe(2304);
    const index = (await stored(A.log)).projection!;
    expect(index.fragments.size, 'two counted fragments').toBe(2);
    const firstIds = JSON.parse((await A.objects.inner.get(PROJECTION_KEY))!).fragments.flatMap((e: [number, number, string, string[]]) => e[3]) as string[];
    expect(firstIds.length, `chunks of ${CHUNK_ITEMS}: more than one per fragment`).toBeGreaterThan(index.fragments.size);

    // Pages of 400 cover every item once, in order, as the scan lists them.
    const paged: typeof want = [];
    let after: string | undefined;
    do {
      const page = await A.log.items({ limit: 400, ...(after ? { after } : {}) });
      paged.push(...page.items);
      after = page.next;
    } while (after);
    expect(paged).toEqual(want);
    // Pages starting at a chunk's first item and just before it.
    const ids = want.map((w) => w.itemId);
    for (const first of firstIds.filter((id) => ids.indexOf(id) > 0)) {
      const at = ids.indexOf(first);
      for (const from of [at - 1, at]) {
        expect((await A.log.items({ after: ids[from]!, limit: 3 })).items.map((i) => i.itemId), `after ${ids[from]}`).toEqual(ids.slice(from + 1, from + 4));
      }
    }
    expect((await A.log.items({ status: 'failed', limit: 30 })).items).toEqual(want.filter((w) => w.status === 'failed').slice(0, 30));
    expect(await readsOf(A.log).projected(), 'the projection answers').toEqual(await scanned(A.log));

    // In a fresh process a page of 10 from the middle reads at most two chunks per counted
    // fragment; the same page again reads none (parsed chunks are kept, up to a bound).
    const R = open({ slot: 0, slots: 2, owner: 'fresh-reader' });
    let chunkGets = 0;
    R.objects.tap.before = (op, key) => void (op === 'get' && /\/frag-v\d+-n[0-9a-f]+-\d+-\d+-\d+\.json$/.test(key) && chunkGets++);
    const page = await R.log.items({ after: ids[1150]!, limit: 10 });
    expect(page.items.map((i) => i.itemId)).toEqual(ids.slice(1151, 1161));
    expect(chunkGets).toBeGreaterThanOrEqual(1);
    expect(chunkGets, 'at most the chunk of the cursor and the next, per fragment').toBeLessThanOrEqual(2 * index.fragments.size);
    expect(chunkGets, 'fewer than all').toBeLessThan(firstIds.length);
    const first = chunkGets;
    expect(await R.log.items({ after: ids[1150]!, limit: 10 })).toEqual(page);
    expect(chunkGets, 'kept').toBe(first);
  });

  it('counts a pinned base handle once: the next page reuses the count, a new version is counted again', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 1 });
    await A.log.append(batches(12, 0));
    await A.log.mergeOwnShard();
    const { objects, tables } = whiteBox(A.log);
    const cache = new ProjectionCache(objects);
    const latest = (await tables.base(true))!;
    const v1 = await latest.version();
    const first = await cache.fragmentRowsOf(await tables.baseAt(v1));
    expect(first).toEqual(await fragmentRows(await tables.baseAt(v1)));
    // The next page pins the same handle: the same count, not a second pass over the row ids.
    expect(await cache.fragmentRowsOf(await tables.baseAt(v1))).toBe(first);
    // Another handle (of what may be another dataset at the same place: test/recreated-log.test.ts) is counted.
    const other = await cache.fragmentRowsOf(await new LanceTables(A.log.uri, undefined, objects).baseAt(v1));
    expect(other).not.toBe(first);
    expect(other).toEqual(first);

    await A.log.append(batches(12, 1));
    await A.log.mergeOwnShard();
    const v2 = await latest.version();
    expect(v2).toBeGreaterThan(v1);
    const second = await cache.fragmentRowsOf(await tables.baseAt(v2));
    expect(second).not.toBe(first);
    expect(second).toEqual(await fragmentRows(await tables.baseAt(v2)));
    expect([...second.values()].reduce((a, b) => a + b, 0)).toBe(await baseRows(A.log));
    await expectListingsMatchFold(A.log, 'listed across a merge in one process');
  });

  it('is not used when it does not describe the base, and listings still equal the folds', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 1 });
    await A.log.append(batches(12, 0));
    await A.log.mergeOwnShard();
    await A.log.append(batches(12, 1));
    await A.log.mergeOwnShard();
    const M = open({ slot: 0, slots: 1, owner: 'maintainer' });
    expect((await M.log.maintain()).projection).toMatchObject({ countedRows: await baseRows(A.log) });
    await expectProjected(A.log, 'built');
    const { objects, tables } = whiteBox(A.log);

    // A counted fragment gone (as compaction or a purge leaves it: its rows rewritten elsewhere).
    await A.log.append(batches(12, 3));
    await A.log.mergeOwnShard();
    const base = (await whiteBox(A.log).tables.base(true))!; // opened after the merge
    const counted = (await stored(A.log)).projection;
    const [gone] = [...counted!.fragments.keys()];
    const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);
    const total = sum(await fragmentRows(await tables.baseAt(await base.version())));
    const rows = await base.query().where(`_rowid >= ${BigInt(gone!) << 32n} AND _rowid < ${BigInt(gone! + 1) << 32n}`).toArrow();
    await base.mergeInsert('event_id').whenMatchedUpdateAll().execute(rows as never);
    const now = await fragmentRows(await tables.baseAt(await base.version()));
    expect(now.has(gone!), 'the counted fragment is gone').toBe(false);
    expect(sum(now), 'no row lost').toBe(total);
    expect(await readsOf(A.log).projected()).toBeNull();
    await expectListingsMatchFold(A.log, 'a counted fragment rewritten');

    // Rows deleted from a counted fragment (as a purge does): the count no longer matches.
    expect((await M.log.maintain()).projection?.countedRows).toBeGreaterThan(0);
    await expectProjected(A.log, 'rebuilt');
    await base.delete(`item_id = 'it-004'`);
    expect(await readsOf(A.log).projected()).toBeNull();
    await expectListingsMatchFold(A.log, 'rows deleted behind the projection');

    // Unreadable or foreign objects are ignored, never an error.
    expect((await M.log.maintain()).projection?.countedRows).toBeGreaterThan(0);
    await expectProjected(A.log, 'rebuilt again');
    const index = (await objects.get(PROJECTION_KEY))!;
    const parsed = JSON.parse(index) as { fragments: [number, number, string, string[], string][] };
    const [f, fRows, nonce] = parsed.fragments[0]!;
    const fragKey = chunkKey(nonce, f, fRows, 0);
    const doc = (await objects.get(fragKey))!;
    const item = (JSON.parse(doc) as { items: unknown[][] }).items[0]!;
    const bads: [string, string][] = [
      [PROJECTION_KEY, '{"format":2,'],
      [PROJECTION_KEY, JSON.stringify({ ...JSON.parse(index), format: 99 })],
      // another nonce for a fragment (another history of the log): its documents are not these
      [PROJECTION_KEY, JSON.stringify({ ...parsed, fragments: parsed.fragments.map((e) => [e[0], e[1], '0123456789ab', e[3], e[4]]) })],
      // the format before chunks: [fragment, rows] without the chunks' first ids
      [PROJECTION_KEY, JSON.stringify({ ...JSON.parse(index), format: 3, fragments: [[f, fRows]] })],
      [fragKey, JSON.stringify({ ...JSON.parse(doc), chunk: 1 })],
      // not starting at the first id the index gives for it
      [fragKey, JSON.stringify({ ...JSON.parse(doc), items: (JSON.parse(doc) as { items: unknown[] }).items.slice(1) })],
      [fragKey, JSON.stringify({ ...JSON.parse(doc), rows: fRows + 1 })],
      [fragKey, JSON.stringify({ ...JSON.parse(doc), items: [item.slice(0, 16)] })],
      [fragKey, JSON.stringify({ ...JSON.parse(doc), items: [[...item.slice(0, 1), '7', ...item.slice(2)]] })],
    ];
    for (const [key, bad] of bads) {
      await objects.put(key, bad);
      const fresh = open({ slot: 0, slots: 1, owner: 'reader' });
      expect(await readsOf(fresh.log).projected(), `${key}: ${bad.slice(0, 40)}`).toBeNull();
      await expectListingsMatchFold(fresh.log, `stored ${bad.slice(0, 20)}`);
      await objects.put(PROJECTION_KEY, index);
      await objects.put(fragKey, doc);
    }
    const fresh = open({ slot: 0, slots: 1, owner: 'reader2' });
    await expectProjected(fresh.log, 'restored');

    // A head left without a chunk (a stale maintainer's cleanup cut short): the next pass counts
    // that fragment again instead of trusting the head.
    await objects.delete(fragKey);
    expect((await M.log.maintain()).projection?.countedRows, 'counted again').toBe(fRows);
    await expectProjected(open({ slot: 0, slots: 1, owner: 'reader3' }).log, 'after a chunk went missing');
  });
  it('no projection file keeps a purged item, also when deleting the index failed once', async () => {
    const { open, clock } = setup();
    const A = open({ slot: 0, slots: 2 });
    await A.log.append(batches(5, 0));
    await A.log.mergeOwnShard();
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    expect((await M.log.maintain()).failures).toEqual([]);
    const { objects } = whiteBox(A.log);
    const mentioning = (needle: string) => projectionFilesHolding(objects, needle);
    expect(await mentioning('"it-004"'), 'the last item: named by the index too, its rows in a rows file').toEqual(expect.arrayContaining(['items.json', expect.stringMatching(/^rows-v1-/)]));
    await A.log.deleteItem('it-004');
    await A.log.close();
    clock.advance(2 * 3_600_000);
    const refused = (op: string, key: string) => {
      if ((op === 'put' || op === 'putIfAbsent') && key.startsWith(PROJECTION_DIR)) throw new Error('projection writes refused by the test');
    };
    let failedOnce = false;
    M.objects.tap.before = (op, key) => {
      refused(op, key);
      if (op === 'delete' && key === PROJECTION_KEY && !failedOnce) {
        failedOnce = true;
        throw new Error('injected: DELETE of the index failed');
      }
    };
    let purged = 0;
    for (let pass = 0; pass < 4 && purged === 0; pass++) {
      purged = (await M.log.maintain()).purgedItems;
      clock.advance(3_600_000);
    }
    expect(failedOnce, 'the injected failure happened').toBe(true);
    expect(purged, 'the tombstone was dropped').toBe(1);
    expect(await mentioning('"it-004"'), 'no projection file names it').toEqual([]);
    M.objects.tap = {};
    expect((await M.log.maintain()).failures).toEqual([]);
    await expectProjected(M.log, 'rebuilt after the purge');
  });

  it("a purge drops the documents of the fragments it rewrote, even when the pass's projection step fails", async () => {
    const { open, clock } = setup();
    const A = open({ slot: 0, slots: 2 });
    await A.log.append(batches(20, 0));
    await A.log.append([{ itemId: 'it-019', runId: 'r', step: { name: 'gen', index: 1 }, failed: { errorType: 'Secret', traceback: 'the doomed item says hi' } }]);
    await A.log.mergeOwnShard();
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    expect((await M.log.maintain()).failures).toEqual([]);
    const { objects } = whiteBox(A.log);
    const docsMentioning = (needle: string) => projectionFilesHolding(objects, needle);
    // The fragment's last item: the index names it too.
    expect(await docsMentioning('it-019'), 'the check below can fail: the documents hold the item').toEqual(expect.arrayContaining(['items.json']));
    expect(await docsMentioning('the doomed item says hi'), 'its traceback is in a rows file too').toEqual(expect.arrayContaining([expect.stringMatching(/^rows-v1-/)]));

    await A.log.deleteItem('it-019');
    await A.log.close();
    clock.advance(2 * 3_600_000); // past the deletion retention (1 h)
    // The pass's projection step fails (its writes refused); the purge before it succeeds.
    M.objects.tap.before = (op, key) => {
      if ((op === 'put' || op === 'putIfAbsent') && key.startsWith(PROJECTION_DIR)) throw new Error('refused by the test');
    };
    // The first pass removes the rows; the tombstone stays one retention more (stalled mergers).
    const removal = await M.log.maintain();
    expect([removal.purgedItems, removal.pendingDeletions]).toEqual([0, 1]);
    expect(removal.failures.map((f) => f.step)).toEqual(['projection']);
    clock.advance(3_600_000);
    const rep = await M.log.maintain();
    expect(rep.purgedItems).toBe(1);
    expect(rep.failures.map((f) => f.step)).toEqual(['projection']);
    expect(await docsMentioning('it-019'), 'no projection document keeps the purged item').toEqual([]);
    expect(await docsMentioning('the doomed item says hi')).toEqual([]);
    await expectListingsMatchFold(M.log, 'after the purge, projection not rebuilt');

    M.objects.tap = {};
    expect((await M.log.maintain()).failures).toEqual([]);
    expect(await docsMentioning('it-019')).toEqual([]);
    expect(await readsOf(M.log).projected(), 'rebuilt by the next pass').not.toBeNull();
    await expectProjected(M.log, 'rebuilt after the purge');
  });
});

/** A step `name` (index `index`) of `itemId` that sets the field `name`. */
function namedStepBatch(itemId: string, name: string, index: number): unknown {
  return { itemId, runId: 'r', step: { name, index }, set: { [name]: index } };
}

// Maintenance decided which fragments needed a document from the names in the projection folder
// alone, while readers ignore a document of another format. A document stored under the name this
// release looks up but written by another release (the next FORMAT bump: the name did not carry
// the format) was taken as written: never counted again, named by every index, and every listing
// scanned the log from then on (a full-size fragment never changes, so nothing ever replaced it).
// The single document before this version was rebuilt whole when unusable.
describe('the item listing projection: a fragment document of another format', () => {
  it('under the looked-up name is counted again by the next pass', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 1 });
    await A.log.append([createBatch('a'), createBatch('b')]);
    await A.log.append([namedStepBatch('a', 'load', 0), namedStepBatch('b', 'load', 0)]);
    await A.log.mergeOwnShard();
    const rows = (await A.log.stats()).base.rows;
    // What the release before the next FORMAT bump leaves: its index and, per fragment, a
    // document under `frag-<id>-<rows>.json` in its own format. Fragment and row count as this
    // base has them (one merge: one fragment, id 0).
    const oldIndex = { format: 1, baseVersion: 1, fragments: [[0, rows]] };
    const oldDoc = { format: 1, fragment: 0, rows, items: [] };
    await A.objects.inner.put(PROJECTION_KEY, JSON.stringify(oldIndex));
    await A.objects.inner.put(`${PROJECTION_DIR}/frag-0-${rows}.json`, JSON.stringify(oldDoc));

    const M = open({ slot: 0, slots: 1, owner: 'maintainer' });
    const rep = await M.log.maintain();
    expect(rep.failures).toEqual([]);
    expect(rep.projection, 'every row counted in this format').toMatchObject({ fragments: 1, countedRows: rows });
    const R = open({ slot: 0, slots: 1, owner: 'reader' });
    expect(await readsOf(R.log).projected(), 'a fresh reader uses the projection').toEqual(await scanned(R.log));
    expect(await A.objects.inner.list(PROJECTION_DIR), 'the other release\'s document is gone').not.toContain(`frag-0-${rows}.json`);
  });
});

// The projection a process keeps was handed out by reference: `items()` returned the cached
// aggregate's cursor object itself, so a caller changing a page it was given changed every later
// listing of that process (the scan answers from fresh objects every time).
describe('the item listing projection: listings handed out', () => {
  it('a caller changing a listing it was given does not change later listings', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 1 });
    await A.log.append([createBatch('a'), createBatch('b')]);
    await A.log.append([namedStepBatch('a', 'load', 0), namedStepBatch('b', 'load', 0)]);
    await A.log.mergeOwnShard();
    const M = open({ slot: 0, slots: 1, owner: 'maintainer' });
    expect((await M.log.maintain()).projection?.countedRows).toBe((await A.log.stats()).base.rows);
    expect(await readsOf(A.log).projected(), 'the listing is served from the projection').not.toBeNull();

    const first = (await A.log.items()).items;
    const want: ItemSummary[] = structuredClone(first);
    expect(want[0]!.cursor).toMatchObject({ stepName: 'load', stepIndex: 0 });
    // What a caller may do with its own page.
    first[0]!.cursor!.stepName = 'changed by the caller';
    first[0]!.cursor!.stepIndex = 99;
    expect((await A.log.items()).items, 'a later listing').toEqual(want);
    expect((await A.log.items({ status: 'in_progress' })).items, 'a later filtered listing').toEqual(want);
  });
});
