/**
 * The fold projection (lib/log/projection/fold-rows.ts) across a log's history, with large items
 * and failing steps.
 *
 *  - A process kept rows-file directories (and parsed listing chunks, and the listing's index) by
 *    names made of fragment id and live rows, which a log deleted and made again at the same place
 *    reuses: its folds returned the deleted log's rows and missed acked ones, its listings listed
 *    the deleted log's items. Every document's name carries a nonce (see the restored log below)
 *    and every read takes the index as stored.
 *  - An item with large values made the projection step fail on every pass (one JSON string per
 *    item, queries sized by rows). An item too large for one file is left out (its folds query
 *    Lance) and the queries are sized by bytes.
 *  - A rows-file read that fails for a storage reason does not fail the fold: Lance answers.
 *  - Each count writes under a new nonce, so a step failing pass after pass left a set of a
 *    fragment's files per pass; a fragment's leftovers are deleted before it is counted again.
 *  - A pass of the old history still running after the log was deleted (or restored) wrote its
 *    index and documents into the new one, and the next pass took them for the new fragments
 *    (same ids, same live rows). A fragment's documents are taken only if its first item's events
 *    in them are those in the fragment.
 *  - The projection id lived in the log's folder, so a log restored from an archive kept it, and
 *    its merges reused the lost history's fragment ids: the same names again. Each fragment's
 *    documents get a new nonce whenever they are counted.
 *  - A process kept the base pinned by version number; a log made again at the same place reaches
 *    that number with other files, and the process's scans failed ("Not found") until the version
 *    moved. A read that fails opens the base's handles again.
 */
import { promises as fs } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { UnavailableError } from '../lib/errors.ts';
import { decodeRowsFile, MAX_ITEM_JSON } from '../lib/log/projection/fold-rows.ts';
import { PROJECTION_DIR } from '../lib/log/projection/stored.ts';
import { SUMMARY_SCAN_COLUMNS, SummaryVisitor } from '../lib/log/read/summary.ts';
import { createBatch } from './support/batches.ts';
import { raceFixture, type TableTap } from './support/race-kit.ts';
import { readsOf } from '../lib/log/reads.ts';

const { setup } = raceFixture(60_000);

/** One writer appends `batches`, merges them into the base and closes; with `maintain`, then a maintenance pass. */
async function merged(open: ReturnType<typeof setup>['open'], batches: unknown[], maintain: boolean): Promise<void> {
  const W = open({ mergeEveryCommits: 1000 });
  await W.log.append(batches);
  await W.log.mergeOwnShard();
  await W.log.close();
  if (maintain) expect((await open({}).log.maintain()).failures).toEqual([]);
}

describe('the fold projection: a log deleted and made again at the same place', () => {
  it('a process that folded and listed the old log folds and lists the new one', async () => {
    const { open } = setup();
    const R = open({}); // a long-lived reader
    await merged(open, [createBatch('old-a'), createBatch('old-b')], true);
    const oldFold = await R.log.fold('old-a'); // R now keeps the rows file's directory and end
    expect((await R.log.items()).items.map((i) => i.itemId)).toEqual(['old-a', 'old-b']);
    const v = (await R.log.stats()).base.version;

    await fs.rm(R.log.uri, { recursive: true, force: true });
    // The same shape: one fragment with the same live rows, the same base version.
    await merged(open, [createBatch('old-a', { set: { prompt: 'NEW LOG' } }), createBatch('new-x')], true);
    const F = open({});
    expect((await F.log.stats()).base.version, 'the new base is at the version R read').toBe(v);
    const want = await F.log.fold('old-a');
    expect(JSON.stringify(want)).toContain('NEW LOG');
    expect(JSON.stringify(oldFold)).not.toContain('NEW LOG');

    expect(await R.log.fold('old-a'), 'the new log\'s old-a').toEqual(want);
    expect(await R.log.fold('new-x'), 'an acked item of the new log').toEqual(await F.log.fold('new-x'));
    expect((await R.log.items()).items, 'the new log\'s items').toEqual((await F.log.items()).items);
    expect((await R.log.items()).items.map((i) => i.itemId)).toEqual(['new-x', 'old-a']);
  });
});

describe('the fold projection: a base version number the deleted log had', () => {
  it('a process that scanned the old log at that version scans the new one', async () => {
    const { open } = setup();
    const R = open({});
    const scan = (l: typeof R) => readsOf(l.log).scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor());
    await merged(open, [createBatch('old-a'), createBatch('old-b')], false);
    expect((await scan(R)).map((a) => a.itemId)).toEqual(['old-a', 'old-b']); // R pins the base at its version
    const v = (await R.log.stats()).base.version;

    await fs.rm(R.log.uri, { recursive: true, force: true });
    await merged(open, [createBatch('old-a', { set: { prompt: 'NEW LOG' } }), createBatch('new-x')], false);
    const F = open({});
    expect((await F.log.stats()).base.version, 'the new base is at the version R pinned').toBe(v);
    const want = await scan(F);
    expect(want.map((a) => a.itemId)).toEqual(['new-x', 'old-a']);
    expect(await scan(R)).toEqual(want);
  });
});

describe('the fold projection: a log restored from an archive at the same place', () => {
  it('a process that folded and listed the lost history folds and lists the restored log', async () => {
    const { open } = setup();
    const R = open({});
    const W1 = open({ mergeEveryCommits: 1000 });
    await W1.log.append([createBatch('a'), createBatch('b')]);
    await W1.log.mergeOwnShard();
    await W1.log.close();
    expect((await open({}).log.maintain()).failures).toEqual([]);
    const archive = `${R.log.uri}.archive`;
    await fs.cp(R.log.uri, archive, { recursive: true });
    const later = async (tag: string, ids: string[]) => {
      const W = open({ mergeEveryCommits: 1000 });
      await W.log.append(ids.map((id) => createBatch(id, { set: { prompt: tag } })));
      await W.log.mergeOwnShard();
      await W.log.close();
      expect((await open({}).log.maintain()).failures).toEqual([]);
    };
    await later('LOST HISTORY', ['c', 'd']);
    const lost = await R.log.fold('c'); // R keeps the rows file's directory (the whole small file)
    expect((await R.log.items()).items.map((i) => i.itemId)).toEqual(['a', 'b', 'c', 'd']);

    await fs.rm(R.log.uri, { recursive: true, force: true });
    await fs.cp(archive, R.log.uri, { recursive: true });
    await later('AFTER RESTORE', ['c', 'e']); // the lost history's fragment ids and row counts again
    const F = open({});
    const want = await F.log.fold('c');
    expect(JSON.stringify(want)).toContain('AFTER RESTORE');
    expect(JSON.stringify(lost)).toContain('LOST HISTORY');
    expect(await R.log.fold('c')).toEqual(want);
    expect(await R.log.fold('e'), 'an acked item of the restored log').toEqual(await F.log.fold('e'));
    expect((await R.log.items()).items).toEqual((await F.log.items()).items);
  });
});

describe('the fold projection: items too large for a file, and rows files that cannot be read', () => {
  it('leaves out an item larger than a file holds (its folds query Lance), and a storage error sends the fold to Lance', async () => {
    const { open } = setup();
    const W = open({ mergeEveryCommits: 1000 });
    const half = Math.ceil(MAX_ITEM_JSON / 2) + 1000;
    await W.log.append([createBatch('big', { set: { a: 'x'.repeat(half) } }), createBatch('small')]);
    await W.log.append([{ itemId: 'big', runId: 'r1', step: { name: 's1', index: 1 }, set: { b: 'y'.repeat(half) } }]);
    await W.log.mergeOwnShard();
    await W.log.close();
    const M = open({});
    const rep = await M.log.maintain();
    expect(rep.failures, 'the projection step succeeds').toEqual([]);
    const files = (await M.objects.inner.list(PROJECTION_DIR)).filter((n) => n.startsWith('rows-'));
    expect(files.length).toBe(1);
    const stored = decodeRowsFile((await M.objects.inner.getBytes(`${PROJECTION_DIR}/${files[0]!}`, { suffix: 2 ** 30 }))!.bytes);

    let baseQueries = 0;
    const tableTap: TableTap = { beforeRead: (name) => void (name === 'base' && baseQueries++) };
    const R = open({ owner: 'reader', tableTap });
    const small = await R.log.fold('small');
    expect(baseQueries, 'small: from the rows file').toBe(0);
    const big = await R.log.fold('big');
    expect(baseQueries, 'big: from Lance').toBe(1);
    expect((big.fields.a as string).length + (big.fields.b as string).length).toBe(2 * half);
    expect(stored.map(([id, rows]) => [id, rows.length]), 'big is listed without rows, small with all of them').toEqual([
      ['big', 0],
      ['small', (await R.log.trajectory('small')).length],
    ]);

    // A storage error on the rows file: Lance answers, the same.
    const S = open({ owner: 'reader2', tableTap });
    S.objects.tap.before = (op, key) => {
      if (op === 'get' && key.includes('/rows-')) throw new UnavailableError('injected: GET of a rows file failed');
    };
    expect(await S.log.fold('small')).toEqual(small);
    expect(baseQueries, 'the fold queried the base').toBe(2);
  });
});

describe('the fold projection: a projection step that keeps failing', () => {
  it('does not pile up a fragment\'s leftovers, one set per failed pass', async () => {
    const { open } = setup();
    const W = open({ mergeEveryCommits: 1000 });
    await W.log.append([createBatch('a'), createBatch('b')]);
    await W.log.mergeOwnShard();
    await W.log.close();
    const left: number[] = [];
    for (let pass = 0; pass < 3; pass++) {
      const M = open({ owner: `m${pass}` });
      // Any failure past the chunks and rows files: the head's create fails.
      M.objects.tap.before = (op, key) => {
        if (op === 'putIfAbsent' && /\/frag-v\d+-n[0-9a-f]+-\d+-\d+\.json$/.test(key)) throw new UnavailableError('injected: head PUT failed');
      };
      expect((await M.log.maintain()).failures.map((f) => f.step)).toContain('projection');
      left.push((await M.objects.inner.list(PROJECTION_DIR)).filter((n) => n.startsWith('frag-') || n.startsWith('rows-')).length);
    }
    expect(left[0], 'the failed pass left its chunk document and its rows file (two items: one chunk)').toBe(2);
    expect(left, 'one set, not one per pass').toEqual([left[0], left[0], left[0]]);
    const M = open({ owner: 'ok' });
    expect((await M.log.maintain()).failures).toEqual([]);
    const R = open({ owner: 'reader' });
    expect(await readsOf(R.log).projected()).toEqual(await readsOf(R.log).scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor()));
  });
});

describe('the fold projection: an old history\'s maintenance writing into the new one', () => {
  it('the next pass does not take its documents for the new fragments: folds and listings answer the new log', async () => {
    const { open } = setup();
    const W1 = open({ mergeEveryCommits: 1000 });
    await W1.log.append([createBatch('old-a', { set: { prompt: 'OLD LOG' } }), createBatch('old-b')]);
    await W1.log.mergeOwnShard();
    await W1.log.close();
    expect((await open({}).log.maintain()).failures).toEqual([]);
    const dir = `${W1.log.uri}/_dgcl/projection`;
    const late = `${W1.log.uri}.late-writes`;
    await fs.cp(dir, late, { recursive: true }); // what the old pass PUTs after the delete

    await fs.rm(W1.log.uri, { recursive: true, force: true });
    const W2 = open({ mergeEveryCommits: 1000 });
    // The same shape: fragment 0 with the same live rows at the same base version.
    // old-a the same checkpoint in both histories (a re-run of the same inputs): its events are
    // the same, the fragment's last item is not: checking only the first item's events took the old documents.
    await W2.log.append([createBatch('old-a', { set: { prompt: 'OLD LOG' } }), createBatch('new-x')]);
    await W2.log.mergeOwnShard();
    await W2.log.close();
    await fs.cp(late, dir, { recursive: true });
    const rep = await open({}).log.maintain();
    expect(rep.failures).toEqual([]);
    expect(rep.projection?.countedRows, 'fragment 0 counted again, not taken from the old index').toBe((await open({ owner: 'stats' }).log.stats()).base.rows);
    const F = open({ owner: 'fresh' });
    expect((await F.log.fold('new-x')).itemId).toBe('new-x');
    await expect(F.log.fold('old-b')).rejects.toThrow(/not found/);
    expect((await F.log.items()).items.map((i) => i.itemId)).toEqual(['new-x', 'old-a']);
    // And a pass after that finds its own documents whole: nothing counted again.
    expect((await open({}).log.maintain()).projection?.countedRows).toBe(0);
  });
});
