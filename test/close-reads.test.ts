/**
 * close() with a read in flight (the read went on after close() had closed the tables,
 * and opened a Lance connection again that nobody closed). close() now waits for reads started
 * before it; reads after it fail.
 * Real Lance on a local root; the read is held in its meta listing by a gate, no sleeps.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { META_DIR } from '../lib/log/layout.ts';
import { holdFirstList, Pause, raceFixture, resolvesAfterRelease, settle } from './support/race-kit.ts';
import { readsOf } from '../lib/log/reads.ts';

const { setup } = raceFixture(60_000);

const batch = (itemId: string, i = 0, set: Record<string, unknown> = { v: itemId }) =>
  i === 0 ? { itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set } : { itemId, runId: 'r', step: { name: 's', index: i }, set };

type Conns = { tables: { baseConn: unknown; shardConn: unknown } };
const conns = (log: unknown) => {
  const t = (log as Conns).tables;
  return [t.baseConn, t.shardConn];
};

/** A log with item x merged into the base (and a blob field), closed; returns nothing. */
async function seeded(open: ReturnType<typeof setup>['open']) {
  const W = open({});
  await W.log.append([batch('x', 0, { v: 1, img: { $blob: Buffer.from('hello').toString('base64') } })]);
  await W.log.mergeOwnShard();
  await W.log.close();
}

describe('close() with a read in flight', () => {
  it('waits for the read, which then answers from open tables; no Lance connection is left open', async () => {
    const { open } = setup();
    const W = open({});
    await W.log.append([{ itemId: 'x', runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: 1 } }]);
    await W.log.mergeOwnShard();
    await W.log.close();

    const R = open({});
    const hold = holdFirstList(R);
    const folding = settle(R.log.fold('x'));
    await hold.reached.promise;
    expect(await resolvesAfterRelease(R.log.close(), hold), 'close() returned while a read was in flight').toBe(true);
    const folded = await folding;
    expect(folded.ok && folded.value.lastSeq, 'the read answered, with the three events').toBe(3);
    const tables = (R.log as unknown as { tables: { baseConn: unknown; shardConn: unknown } }).tables;
    expect([tables.baseConn, tables.shardConn], 'Lance connections after close() and the read').toEqual([null, null]);
    const after = await settle(R.log.fold('x'));
    expect(after.ok ? 'answered' : (after.error as { code?: string }).code, 'a read after close()').toBe('INTERNAL');
  });
});

// close() drains the log's public read calls (LanceCheckpointLog.track: refused once close()
// began, awaited whole by it), not the reader's single reads.
describe('close() with a public call of several reads in flight', () => {
  // close() drains reads, but a public call made of SEVERAL reads (blob = fold + loadBlob,
  // aggregates = projected + scan) started before close() is cut between its reads: its second
  // read either meets the closed reader (the call fails although it started before close()), or
  // starts in the microtask gap between drain() and reader.close() and runs on closed tables.
  it('blob() started before close() completes (its second read is not cut off by close)', async () => {
    const { open } = setup();
    await seeded(open);
    const R = open({});
    const hold = holdFirstList(R);
    const loading = settle(R.log.blob('x', 'img'));
    await hold.reached.promise;
    const closing = R.log.close();
    hold.release();
    await closing;
    const got = await loading;
    expect(got.ok ? Buffer.from(got.value).toString() : `failed: ${(got.error as Error).message}`, 'blob() started before close()').toBe('hello');
    expect(conns(R.log), 'Lance connections after close()').toEqual([null, null]);
  });

  // The worse half of the above: the second read of a call started before close() begins in the
  // microtask gap between drain() resolving and reader.close(): the reader was not closed yet, so
  // it ran, after tables.close(), and opens the base's Lance connection again, which nobody
  // closes (the leak close() draining reads had fixed, back). Two stats() in a row are enough.
  it('a read chained on a drained read does not slip between drain() and reader.close() to reopen a Lance connection', async () => {
    const { open } = setup();
    await seeded(open);
    const R = open({});
    const hold = holdFirstList(R);
    const chained = settle(R.log.stats().then(() => R.log.stats()));
    await hold.reached.promise;
    const closing = R.log.close();
    hold.release();
    await closing;
    await chained;
    expect(conns(R.log), 'Lance connections after close() and the reads').toEqual([null, null]);
  });

  // close() waited for every read in flight, also those started AFTER close() began (reads were
  // refused only once reader.close() ran, after the drain): reads that overlap kept close()
  // pending for as long as they came (api: "Later calls fail").
  it('a read started after close() began is refused, and does not hold close() up', async () => {
    const { open } = setup();
    await seeded(open);
    const R = open({});
    const first = holdFirstList(R);
    const a = settle(R.log.fold('x'));
    await first.reached.promise;
    const closing = R.log.close();
    // Another read, after close() was called: a second held listing.
    const second = new Pause();
    R.objects.tap.before = async (op, key) => {
      if (op === 'list' && key === META_DIR) await second.hit();
    };
    onTestFinished(() => second.release());
    const b = settle(R.log.fold('x'));
    first.release();
    await a;
    const closedFirst = await Promise.race([closing.then(() => 'close() returned'), second.reached.promise.then(() => 'the later read runs')]);
    second.release();
    await closing;
    const late = await b;
    expect([closedFirst, late.ok ? 'answered' : (late.error as { code?: string }).code]).toEqual(['close() returned', 'INTERNAL']);
  });

  it('aggregates() without a projection (two reads) started before close(): completes, no connection left open', async () => {
    const { open } = setup();
    await seeded(open);
    const R = open({});
    const hold = holdFirstList(R);
    const listing = settle(readsOf(R.log).aggregates());
    await hold.reached.promise;
    const closing = R.log.close();
    hold.release();
    await closing;
    const got = await listing;
    expect(got.ok ? got.value.map((a) => a.itemId) : `failed: ${(got.error as Error).message}`).toEqual(['x']);
    expect(conns(R.log), 'Lance connections after close()').toEqual([null, null]);
  });
});
