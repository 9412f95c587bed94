/**
 * Adversarial review 24 of 73cb80a..79fbd5b (purge grace records + sweep, log.idle(), close()
 * draining reads, review23's fixes). Findings first (each test FAILS at 79fbd5b), then what was
 * checked and found sound (passing). Real Lance on local roots, manual clocks, pauses/gates.
 * Fixed since: D1-D3 by counting the log's public read calls (LanceCheckpointLog.track: refused
 * once close() began, awaited whole by it) instead of the reader's single reads; S1 by sweeping
 * the record folders last and reporting a failed delete without stopping the purge.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { META_DIR, PURGED_DIR } from '../lib/log/layout.ts';
import { trajectoryOrNone } from './support/ack-checks.ts';
import { deleteMergedItem, holdFirstList, Pause, raceFixture, settle, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const RETENTION = 3_600_000; // DEFAULTS.deletionRetentionMs
const { setup } = raceFixture(TTL);

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


describe('review24 findings (fail at 79fbd5b, pass since)', () => {
  // close() drains reads, but a public call made of SEVERAL reads (blob = fold + loadBlob,
  // aggregates = projected + scan) started before close() is cut between its reads: its second
  // read either meets the closed reader (the call fails although it started before close()), or
  // starts in the microtask gap between drain() and reader.close() and runs on closed tables.
  it('D1: blob() started before close() completes (its second read is not cut off by close)', async () => {
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

  // The worse half of D1: the second read of a call started before close() begins in the
  // microtask gap between drain() resolving and reader.close(): the reader is not closed yet, so
  // it runs, after tables.close(), and opens the base's Lance connection again, which nobody
  // closes (review19's leak, back). Two stats() in a row are enough.
  it('D3: a read chained on a drained read slips between drain() and reader.close() and reopens a Lance connection', async () => {
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

  // close() waits for every read in flight, also those started AFTER close() began (reads are
  // refused only once reader.close() runs, after the drain): reads that overlap keep close()
  // pending for as long as they come (api: "Later calls fail").
  it('D2: a read started after close() began is refused, and does not hold close() up', async () => {
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
  // sweepRecords runs first in purgeDeleted (and is the whole deletions step when the listing
  // has no tombstone): a failure to delete one leftover record folder (garbage of a tombstone
  // that is gone) fails the step before any tombstone is looked at. A folder whose delete keeps
  // failing (a DeleteObjects that reports the key not deleted: object lock, a policy) stops every
  // purge of the log, pass after pass; review23 F2's class (one bad object blocks the others).
  it('S1: a leftover record folder that cannot be deleted blocks the purge of every tombstone', async () => {
    const s = setup();
    const { open, clock } = s;
    await deleteMergedItem(open({ slot: 0, slots: 2 }), batch('gone'));
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    const stale = `${PURGED_DIR}/tomb.${'0'.repeat(40)}.000000000001`;
    await M.objects.put(`${stale}/000000000000001`, '');
    M.objects.tap.before = (op, key) => {
      if (op === 'deletePrefix' && key === stale) throw new Error('DeleteObjects: 1 of 1 objects were not deleted (AccessDenied)');
    };
    clock.advance(RETENTION);
    const first = await M.log.maintain();
    expect(first.pendingDeletions, 'the rows were removed despite the leftover').toBe(1);
    clock.advance(RETENTION);
    const second = await M.log.maintain();
    expect(second.purgedItems, 'the tombstone was dropped despite the leftover').toBe(1);
    expect(await withFreshReader(s.root, s.leases, clock, async (log) => (await trajectoryOrNone(log, 'gone')).length)).toBe(0);
  });
});

describe('review24: checked and sound (pass at 79fbd5b)', () => {
  it('aggregates() without a projection (two reads) started before close(): completes, no connection left open', async () => {
    const { open } = setup();
    await seeded(open);
    const R = open({});
    const hold = holdFirstList(R);
    const listing = settle(R.log.aggregates());
    await hold.reached.promise;
    const closing = R.log.close();
    hold.release();
    await closing;
    const got = await listing;
    expect(got.ok ? got.value.map((a) => a.itemId) : `failed: ${(got.error as Error).message}`).toEqual(['x']);
    expect(conns(R.log), 'Lance connections after close()').toEqual([null, null]);
  });


  // sweepRecords with a stale listing: a zombie maintainer (lease lost while it stalled inside
  // its 'deletions' step, past its lease check, with a listing that had no tombstone) sweeps
  // every record folder, also the live maintainer's record of a removal it just made. Deleting
  // records only makes the tombstone wait longer. (The stall was in the 'zombies' step before a
  // pass checked its lease between steps; it stops there now: review26.)
  it("a zombie maintainer's stale sweep deletes a live tombstone's records: the tombstone waits longer, never less", async () => {
    const s = setup();
    const { open, clock } = s;
    const A = open({ slot: 0, slots: 2 });
    await A.log.append([batch('keep')]);
    await A.log.mergeOwnShard();
    const Z = open({ slot: 1, slots: 2, owner: 'zombie' });
    const stall = new Pause();
    let stalled = false;
    Z.objects.tap.before = async (op, key) => {
      if (op === 'list' && key === PURGED_DIR && !stalled) {
        stalled = true; // the deletions step's sweep of removal records
        await stall.hit();
      }
    };
    const zombie = settle(Z.log.maintain());
    await stall.reached.promise;
    await A.log.append([batch('gone')]);
    await A.log.mergeOwnShard();
    expect((await A.log.deleteItem('gone')).deleted).toBe(true);
    await A.log.close();
    clock.advance(TTL + RETENTION); // Z's maintainer lease is over: M takes it
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    const removal = await M.log.maintain();
    expect([removal.pendingDeletions, removal.failures]).toEqual([1, []]);
    expect(await M.objects.list(PURGED_DIR)).toHaveLength(1);
    stall.release();
    const z = await zombie;
    expect(z.ok && z.value.stoppedBy, 'the zombie stops after the step it was in').toBe('FENCED');
    expect(await M.objects.list(PURGED_DIR), "the zombie's stale sweep deleted the live record").toEqual([]);
    clock.advance(RETENTION);
    const r1 = await M.log.maintain();
    expect([r1.purgedItems, r1.pendingDeletions], 'no record: a new one, another whole grace').toEqual([0, 1]);
    clock.advance(RETENTION - 1);
    expect((await M.log.maintain()).purgedItems).toBe(0);
    clock.advance(1);
    expect((await M.log.maintain()).purgedItems).toBe(1);
    const shown = await withFreshReader(s.root, s.leases, clock, async (log) => (await trajectoryOrNone(log, 'gone')).length);
    expect(shown).toBe(0);
  });

  // F1 with a takeover between the base commit and the retry: the retry sees the seal and
  // leaves the generation to the maintainer; nothing is committed again.
  it('F1: a takeover between the writer\'s base commit and its retry: the retry stops at the seal, the purged rows stay gone', async () => {
    const s = setup();
    const { open, clock } = s;
    let failOnce = true;
    const A = open({
      slot: 0,
      slots: 2,
      hooks: {
        beforeMergeStep: (step) => {
          if (step === 'retire-marker' && failOnce) {
            failOnce = false;
            throw new Error('PUT of the retired marker failed');
          }
        },
      },
    });
    for (const id of ['doomed', 'bystander']) await A.log.append([batch(id)]);
    expect((await settle(A.log.mergeOwnShard())).ok, 'base commit done, retirement failed').toBe(false);
    expect((await A.log.deleteItem('doomed')).deleted).toBe(true);
    clock.advance(TTL + 1); // A's lease runs out (its keeper's timer does not run on this clock)
    const B = open({ slot: 0, slots: 2, owner: 'successor' });
    await B.log.append([batch('other')]); // takes slot 0: seals A's epoch with the generation
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    clock.advance(RETENTION);
    expect((await M.log.maintain()).failures).toEqual([]);
    clock.advance(RETENTION);
    expect((await M.log.maintain()).purgedItems).toBe(1);
    const retry = await A.log.mergeOwnShard();
    expect(retry).toEqual({ mergedRows: 0, shards: [] });
    const shown = await withFreshReader(s.root, s.leases, clock, async (log) => (await trajectoryOrNone(log, 'doomed')).length);
    expect(shown).toBe(0);
  });
});
