/**
 * A log deleted and made again at the same place, with a process that outlived it. Deleted
 * together with its lease records (a local root wiped, a new lease table), the new log numbers its
 * epochs from 1 again, so its shard generations have the old log's names, and a process that
 * outlived it kept what it learned of them by name (the tail, the shard item index, seals,
 * handles): it listed the old log's items and folded none of an acked new one. The id is the
 * log's (`_dgcl/meta/log.<nonce>`, put by its first writer before its first generation's marker),
 * and another id drops all of that. Also: a fault between the id and the base marker, two first
 * writers racing, a log of the previous release (no id) written by this one, and a base pinned at
 * a version number of the deleted log.
 */
import { promises as fs } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { summarize } from '../lib/fold.ts';
import { META_DIR } from '../lib/log/layout.ts';
import { SUMMARY_SCAN_COLUMNS, SummaryVisitor } from '../lib/log/read/summary.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch } from './support/batches.ts';
import { eventsOf, Pause, raceFixture, settle, sharedLeases, tempRoot, testLog, withFreshReader } from './support/race-kit.ts';
import { readsOf } from '../lib/log/reads.ts';

const { setup, keep } = raceFixture(60_000);
const names = async (log: { items(): Promise<{ items: { itemId: string }[] }> }) => (await log.items()).items.map((i) => i.itemId).sort();
const ids = async (uri: string) => (await fs.readdir(`${uri}/${META_DIR}`)).filter((n) => n.startsWith('log.'));
const noMerge = { beforeMergeStep: (step: string) => { if (step === 'read') throw new Error('merge held off (test)'); } };
function spyForgets(log: unknown): { n: number } {
  const t = (log as { tables: { forgetBase(): void } }).tables;
  const c = { n: 0 };
  const orig = t.forgetBase.bind(t);
  t.forgetBase = () => (c.n++, orig());
  return c;
}

describe('a log deleted with its lease records and made again (its generations have the old names)', () => {
  for (const withBase of [false, true]) {
    it(`a long-lived reader lists and folds the new log (old log ${withBase ? 'with' : 'without'} a base at R's last listing)`, async () => {
      const { open, root, leases, clock } = setup();
      const W = open({ slot: 0, slots: 1, mergeEveryCommits: 1000 });
      if (withBase) {
        await W.log.append([createBatch('a0')]);
        await W.log.mergeOwnShard(); // the base (id X); W's next generation is g000002
      }
      const acks = [];
      for (const id of ['a', 'b', 'c']) acks.push(...(await W.log.append([createBatch(id)])));
      const R = open({ slots: 1 });
      const before = await names(R.log);
      expect((await R.log.fold('a')).lastSeq, 'R folds the old log\'s a whole').toBe(acks[0]!.lastSeq);
      const gensOld = (await R.log.stats()).shards.map((s) => s.name);
      await fs.rm(W.log.uri, { recursive: true, force: true });
      await fs.rm(`${root}/.dgcl`, { recursive: true, force: true }); // the lease records too
      const leases2 = sharedLeases(tempRoot(), clock);
      const F = testLog({ root, leases: leases2, clock, slots: 1, slot: 0, mergeEveryCommits: 1000 });
      if (withBase) {
        await F.log.append([createBatch('x0')]);
        await F.log.mergeOwnShard(); // the new base (id Y)
      }
      const [ack] = await F.log.append([createBatch('x')]);
      const gensNew = (await withFreshReader(root, leases, clock, (r) => r.stats())).shards.map((s) => s.name);
      const fresh = await withFreshReader(root, leases, clock, (r) => names(r));
      const seen = await settle(names(R.log));
      const folded = await settle(eventsOf(R.log, 'x'));
      expect(gensNew, 'the new log reuses the old generation names').toEqual(expect.arrayContaining(gensOld.slice(-1)));
      expect(before).toEqual(withBase ? ['a', 'a0', 'b', 'c'] : ['a', 'b', 'c']);
      await F.log.close();
      await leases2.close();
      expect(seen.ok && seen.value, 'R lists what a fresh reader lists').toEqual(fresh);
      expect(folded.ok && [...folded.value].map(([e]) => e), 'R sees the acked batch of x').toEqual(ack!.eventIds);
    });
  }
});

describe('the log id marker', () => {
  it('two first writers race: one or two ids, every read right, one id counts', async () => {
    const { open } = setup();
    const R = open({});
    const A = open({ slot: 0, mergeEveryCommits: 1000 });
    const B = open({ slot: 1, mergeEveryCommits: 1000 });
    await Promise.all([A.log.append([createBatch('a')]), B.log.append([createBatch('b')])]);
    const put = await ids(A.log.uri);
    expect(put.length).toBeGreaterThanOrEqual(1);
    expect(put.length).toBeLessThanOrEqual(2);
    await Promise.all([A.log.mergeOwnShard(), B.log.mergeOwnShard()]);
    expect(await ids(A.log.uri), 'no id put by the merges').toEqual(put);
    for (let i = 0; i < 3; i++) expect(await names(R.log)).toEqual(['a', 'b']);
  });

  it('the base marker PUT fails after the id landed; the merge is retried', async () => {
    const { open } = setup();
    const W = open({ slot: 0, mergeEveryCommits: 1000 });
    await W.log.append([createBatch('a')]);
    const R = open({});
    expect(await names(R.log)).toEqual(['a']);
    let fail = 1;
    W.objects.tap.before = (op, key) => { if (op === 'putIfAbsent' && key === `${META_DIR}/base` && fail-- > 0) throw new Error('injected'); };
    const m1 = await settle(W.log.mergeOwnShard());
    const between = await ids(W.log.uri);
    const r1 = await names(R.log);
    const m2 = await settle(W.log.mergeOwnShard());
    expect([m1.ok, m2.ok]).toEqual([false, true]);
    expect(between, 'the id was put with the first generation, before any base').toHaveLength(1);
    expect(r1).toEqual(['a']);
    expect(await ids(W.log.uri), 'no second id').toEqual(between);
    expect(await names(R.log)).toEqual(['a']);
  });

  it('a log of the previous release (no id) written by this one', async () => {
    const { open } = setup();
    const W = open({ slot: 0, mergeEveryCommits: 1000 });
    await W.log.append([createBatch('a')]);
    await W.log.mergeOwnShard();
    await W.log.close();
    for (const n of await ids(W.log.uri)) await fs.rm(`${W.log.uri}/${META_DIR}/${n}`); // as the previous release made it
    const R = open({});
    expect(await names(R.log)).toEqual(['a']);
    const forgets = spyForgets(R.log);
    const W2 = open({ slot: 0, mergeEveryCommits: 1000 });
    const W3 = open({ slot: 1, mergeEveryCommits: 1000 });
    await W2.log.append([createBatch('b')]);
    await W3.log.append([createBatch('c')]);
    await Promise.all([W2.log.mergeOwnShard(), W3.log.mergeOwnShard()]);
    const got = [await names(R.log), await names(R.log)];
    expect((await ids(W.log.uri)).length, 'an id was put').toBeGreaterThanOrEqual(1);
    expect(forgets.n, 'the id that appeared dropped the base handles once').toBe(1);
    expect(got).toEqual([['a', 'b', 'c'], ['a', 'b', 'c']]);
  });
});

// A failed read opens the base's handles again, but the pinned base is dropped only when a read
// through it fails. A listing through the projection can succeed on a handle pinned at a version
// number of a deleted log: the fragment row count reads no file, and a recount of a
// deleted-then-recreated item through the old log's item_id index (cached in the process's Lance
// session) finds no rows without reading a file.
describe('a listing on a base pinned at a version number of a deleted log', () => {
  it('a process that listed the old log lists the new one (same shape, same version)', async () => {
    const { open } = setup();
    const R = open({}); // a long-lived reader
    const shape = async (a: string, b: string, tag: string) => {
      const W = open({ mergeEveryCommits: 1000 });
      await W.log.append([createBatch(a, { set: { prompt: tag } }), createBatch(b, { set: { prompt: tag } })]);
      await W.log.deleteItem(b); // a tombstone: listings recount b through the base
      await W.log.append([createBatch(b, { set: { prompt: `${tag} again` } })]);
      await W.log.mergeOwnShard();
      await W.log.close();
      expect((await open({}).log.maintain()).failures).toEqual([]);
    };
    await shape('a', 'b', 'OLD');
    // R pins the base, counts its fragments, and recounts b through the base's item_id index.
    expect((await R.log.items()).items.map((i) => i.itemId)).toEqual(['a', 'b']);
    const v = (await R.log.stats()).base.version;

    await fs.rm(R.log.uri, { recursive: true, force: true });
    await shape('x', 'y', 'NEW');
    const F = open({});
    expect((await F.log.stats()).base.version, 'the new base is at the version R pinned').toBe(v);
    const want = (await F.log.items()).items;
    expect(want.map((i) => i.itemId)).toEqual(['x', 'y']);
    const seen: string[][] = [];
    for (let i = 0; i < 3; i++) seen.push((await R.log.items()).items.map((a) => a.itemId));
    expect(seen, 'R lists the new log as a fresh process does, every time').toEqual([['x', 'y'], ['x', 'y'], ['x', 'y']]);
  });
});

// A read in flight across another read's clear (noteLogId changed) put back what it fetched of
// the OLD log into the caches the clear emptied (here the seal cache: readSeal sets it when its GET
// answers). Later reads of the new log (same id, no clear) took the old log's seal of a reused
// epoch name and read its generation at the old version: an acked batch of the new log was missing.
describe('a read in flight across a log-id change', () => {
  it('does not refill the seal cache with the old log\'s seal: later reads of the new log see every acked batch', async () => {
    const { open, root, clock } = setup();
    // The old log: epoch s00-e000001 sealed at one commit (its generation left unmerged).
    const W1 = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, hooks: noMerge });
    await W1.log.append([createBatch('a')]);
    await W1.log.close();
    const R = open({ slots: 1 }); // long-lived reader
    // R's first read (#1) lists the old log and GETs its seal: held after the GET answered.
    const hold = new Pause();
    let held = false;
    R.objects.tap.after = async (op, key) => {
      if (op === 'get' && key.includes('/seal.') && !held) { held = true; await hold.hit(); }
    };
    const read1 = settle(names(R.log));
    await hold.reached.promise;
    // The log is deleted with its lease records and made again: s00-e000001 again, two commits.
    await fs.rm(R.log.uri, { recursive: true, force: true });
    await fs.rm(`${root}/.dgcl`, { recursive: true, force: true });
    const leases2 = keep.store(sharedLeases(tempRoot(), clock));
    const F = keep.log(testLog({ root, leases: leases2, clock, slots: 1, slot: 0, mergeEveryCommits: 1000, hooks: noMerge }));
    await F.log.append([createBatch('x')]);
    const [ackY] = await F.log.append([createBatch('y')]);
    await F.log.close();
    expect(ackY!.duplicate, 'y is a new acked checkpoint of the new log').toBe(false);
    const fresh = await withFreshReader(root, leases2, clock, (r) => names(r));
    const read2 = await settle(names(R.log)); // lists the new id: clears the caches
    hold.release();
    await read1;
    const read3 = await settle(names(R.log));
    await settle(names(R.log));
    expect(fresh).toEqual(['x', 'y']);
    expect(read2.ok && read2.value).toEqual(['x', 'y']);
    expect(read3.ok && read3.value, 'read #3 starts after y was acked and after read #2 saw it').toEqual(['x', 'y']);
  });
});

// The count of live rows per base fragment was cached by the base version number alone. A process
// that listed a log which is then deleted and made again at the same place reused the old base's
// count once the new base reached that version number: the projection it held of the old log
// "covered" it, and `items()` / `failures()` answered with the deleted log's items (the new log's
// acked items missing) even though the base handle it pinned was a fresh one of the new dataset.
describe('the base count cache (ProjectionCache.fragmentRowsOf) of a log made again', () => {
  it('a process that listed a log deleted and made again lists the new log at the same base version', async () => {
    const { open } = setup();
    const R = open({}); // a long-lived reader (a report server, a dashboard)

    // The first log: two items, merged; maintenance builds the projection.
    const W1 = open({ mergeEveryCommits: 1000 });
    await W1.log.append([createBatch('old-a'), createBatch('old-b')]);
    await W1.log.mergeOwnShard();
    await W1.log.close();
    await open({}).log.maintain();
    expect((await R.log.items()).items.map((i) => i.itemId)).toEqual(['old-a', 'old-b']);
    const counted = (await R.log.stats()).base.version;
    // One more merge; R's next read pins the newer version (its pinned base handle moves on).
    const W2 = open({ mergeEveryCommits: 1000 });
    await W2.log.append([createBatch('old-c')]);
    await W2.log.mergeOwnShard();
    await W2.log.close();
    await readsOf(R.log).scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor());

    // The log is deleted and made again at the same place; its base reaches the same version.
    await fs.rm(R.log.uri, { recursive: true, force: true });
    const W3 = open({ mergeEveryCommits: 1000 });
    const acks: Ack[] = await W3.log.append([createBatch('new-x')]);
    await W3.log.mergeOwnShard();
    await W3.log.close();
    await open({}).log.maintain();
    const F = open({});
    expect((await F.log.stats()).base.version, 'the new base is at the version R counted').toBe(counted);
    const want = (await F.log.allStates({ fields: false })).map(summarize);
    expect(want.map((s) => s.itemId)).toEqual(['new-x']);

    // R lists through the projection: a fresh pinned handle of the new base, the old count.
    expect((await R.log.items()).items, 'items() of the process that listed the old log').toEqual(want);
    // And folds: the fold projection's index is the stored one, not one R held (its rows files
    // are named by fragment and rows, which the new log reuses).
    expect(await R.log.fold('new-x'), 'a fold in the process that listed the old log').toEqual(await F.log.fold('new-x'));
    expect(acks[0]!.itemId).toBe('new-x');
  });
});
