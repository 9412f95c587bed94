/**
 * The purge's grace after removal (a tombstone stays one deletion retention after the purge
 * removed its rows, with removal records under `_dgcl/purged/`), and what runs beside it: a
 * writer retrying a merge whose base commit had succeeded, malformed or late records, the direct
 * append handler's background merge, re-creation during the grace, and log.idle(). A maintainer
 * clock ahead by S shortens the grace by S: documented, not fixed (docs/design/invariants.md "D1
 * has a time window too", deletion.md "Stalled mergers").
 * Real Lance on local roots, manual clocks, gates/pauses (no sleeps as synchronization).
 */
import './functions/support/env.ts';
import { describe, expect, it, onTestFinished } from 'vitest';
import { handler as appendHandler } from '../functions/append.ts';
import { readConfig } from '../functions/shared/config.ts';
import { logCache } from '../functions/shared/logs.ts';
import { parseBatch } from '../lib/batch.ts';
import { claimKey, META_DIR, PURGED_DIR } from '../lib/log/layout.ts';
import { trajectoryOrNone } from './support/ack-checks.ts';
import { createBatch, ctx, freshFileRoot, stepBatch, uniq } from './functions/support/fixtures.ts';
import { deleteMergedItem, Gate, Pause, raceFixture, settle, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const RETENTION = 3_600_000; // DEFAULTS.deletionRetentionMs
const { setup } = raceFixture(TTL);

const batch = (itemId: string, i = 0) =>
  i === 0 ? { itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: itemId } } : { itemId, runId: 'r', step: { name: 's', index: i }, set: { v: i } };

type Setup = ReturnType<typeof setup>;
const shownRows = (s: Setup, itemId: string) => withFreshReader(s.root, s.leases, s.clock, async (log) => (await trajectoryOrNone(log, itemId)).length);
const tombNames = async (objects: { list(p: string): Promise<string[]> }) => (await objects.list(META_DIR)).filter((n) => n.startsWith('tomb.'));

describe('the purge grace', () => {
  // No stall, no takeover: writer A's merge commits its generation into the base,
  // then the DELETE of the generation's `gen.` marker fails (one transient error). The
  // generation is retired (marker + retired marker), so it is not visible; the maintainer
  // finishes the retirement and the purge removes the deleted item's rows and, a grace later,
  // drops the tombstone. A still holds the generation in `frozen` with its merge copy; its next
  // commit retried the merge (epoch still current, no seal) and re-inserted the purged rows from
  // memory: visible again. The grace only helps if that retry comes within the retention.
  it('a writer retrying a merge whose base commit had succeeded does not put purged rows back after the tombstone is gone (D1, no stall needed)', async () => {
    const s = setup();
    const { open, clock } = s;
    let failOnce = true;
    const A = open({
      slot: 0,
      slots: 2,
      leaseTtlMs: 100 * RETENTION, // A is alive the whole time (its keeper would renew it)
      hooks: {
        beforeMergeStep: (step) => {
          if (step === 'delete-marker' && failOnce) {
            failOnce = false;
            throw new Error('DELETE of the gen. marker failed (transient)');
          }
        },
      },
    });
    for (const id of ['doomed', 'bystander']) await A.log.append([batch(id)]);
    const merge = await settle(A.log.mergeOwnShard());
    expect(merge.ok, 'the merge failed after its base commit').toBe(false);
    expect((await A.log.deleteItem('doomed')).deleted).toBe(true);

    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    clock.advance(RETENTION);
    const removal = await M.log.maintain();
    expect([removal.pendingDeletions, removal.failures], 'rows removed, tombstone in its grace').toEqual([1, []]);
    clock.advance(RETENTION);
    const drop = await M.log.maintain();
    expect([drop.purgedItems, drop.failures], 'tombstone dropped').toEqual([1, []]);
    expect(await shownRows(s, 'doomed')).toBe(0);

    // A's next commit (any item) retries the merge of the generation in the background.
    await A.log.append([batch('bystander', 1)]);
    await A.log.idle();
    expect(await shownRows(s, 'doomed'), 'D1: the deleted item is visible again').toBe(0);
  });

  // One purge record whose name is not a 15-digit time (a stray object, a tool's marker, a
  // "folder" object) made latestRemoval throw CORRUPT out of purgeDeleted: every other tombstone
  // of the log was neither purged nor dropped, pass after pass. The old code
  // reported an unreadable tombstone and purged the others.
  it('a malformed purge record of one tombstone does not block the purge of the other tombstones', async () => {
    const s = setup();
    const { open, clock } = s;
    const A = open({ slot: 0, slots: 2 });
    for (const id of ['a', 'b']) await A.log.append([batch(id)]);
    await A.log.mergeOwnShard();
    for (const id of ['a', 'b']) expect((await A.log.deleteItem(id)).deleted).toBe(true);
    await A.log.close();
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    const tombs = await tombNames(M.objects);
    expect(tombs).toHaveLength(2);
    // A stray object under ONE of the two tombstones' record folders (either one: both orders fail).
    await M.objects.put(`${PURGED_DIR}/${tombs[1]}/.keep`, '');
    clock.advance(RETENTION);
    await M.log.maintain();
    clock.advance(RETENTION);
    const r = await M.log.maintain();
    expect(r.failures.map((f) => f.code), 'the bad record is reported').toEqual(['CORRUPT']);
    expect(await tombNames(M.objects), 'the other tombstone was purged and dropped').toEqual([tombs[1]]);
    expect(await shownRows(s, 'a')).toBe(0);
  });

  // appendDirect called settleMerges only on success. When the append fails after its
  // commit (a claim that fails: UNAVAILABLE or CORRUPT) on the commit that rotates the
  // generation, the merge it started in the background still ran when the handler returned the
  // error, and the frozen container held it (the hazard settleMerges exists for).
  it('the direct append handler does not return an error while the merge its commit started is running', async () => {
    freshFileRoot();
    onTestFinished(() => logCache.closeAll());
    const append = appendHandler as unknown as (event: unknown, context: ReturnType<typeof ctx>) => Promise<unknown>;
    const e = uniq('e');
    await append({ pipeline: 'p', experiment: e, batches: [createBatch('a')] }, ctx());
    const entry = await logCache.get(readConfig(), 'p', e, { leaseTtlMs: 60_000 });
    const writer = (entry.log as unknown as { writer: { merges: { merging: unknown }; opts: { hooks?: unknown } } }).writer;
    for (let i = 1; i < 63; i++) await append({ pipeline: 'p', experiment: e, batches: [stepBatch('a', i)] }, ctx());

    // The 64th commit (mergeEveryCommits) rotates its generation and starts the merge; its claim
    // fails: a claim under its checkpoint id that is not of its batch (CORRUPT).
    const last = stepBatch('a', 63);
    const coord = await (entry.log as unknown as { coordination: { get(): Promise<{ putIfAbsent(k: string, b: string): Promise<boolean> }> } }).coordination.get();
    const cp = parseBatch(last).checkpointId;
    await coord.putIfAbsent(claimKey(cp), JSON.stringify({ checkpointId: cp, events: 999, firstSeq: 1, lastSeq: 1, claimedBy: 'someone/else' }));

    const stall = new Pause();
    writer.opts.hooks = { beforeMergeStep: async (step: string) => step === 'base-commit' && (await stall.hit()) };
    onTestFinished(() => stall.release());
    // What the handler does next: wait for the merge (log.idle()), or finish (middy's trim runs).
    const idleCalled = new Gate();
    const idle = entry.log.idle.bind(entry.log);
    entry.log.idle = () => (idleCalled.resolve(), idle());
    const finished = new Gate<boolean>();
    const trim = logCache.trim.bind(logCache);
    logCache.trim = async () => {
      await stall.reached.promise;
      finished.resolve(writer.merges.merging !== null);
      return trim();
    };
    onTestFinished(() => {
      logCache.trim = trim;
    });

    const outcome = settle(append({ pipeline: 'p', experiment: e, batches: [last] }, ctx()));
    await stall.reached.promise;
    const first = await Promise.race([idleCalled.promise.then(() => 'waited for the merge'), finished.promise.then((running) => (running ? 'finished with the merge running' : 'finished idle'))]);
    stall.release();
    const r = await outcome;
    expect(r.ok, 'the claim failure is still reported').toBe(false);
    expect(first).toBe('waited for the merge');
  });

  // A record PUT that fails (answer lost) and lands after the tombstone and its
  // records were deleted leaves `_dgcl/purged/<tomb>/<ms>` that nothing ever deletes (no step
  // lists _dgcl/purged/ for folders without a tombstone). deletion.md: "never a record nothing
  // deletes". Mixed versions do the same (a maintainer from before the grace drops tombstones without
  // deleting their records).
  it('a record PUT landing late, after the tombstone is dropped, does not stay forever', async () => {
    const s = setup();
    const { open, clock } = s;
    await deleteMergedItem(open({ slot: 0, slots: 2 }), batch('gone'));
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    let late: (() => Promise<unknown>) | null = null;
    M.objects.tap.before = (op, key) => {
      if (op === 'putIfAbsent' && key.startsWith(`${PURGED_DIR}/`) && late === null) {
        late = () => M.objects.inner.putIfAbsent(key, ''); // sent, lands later
        throw new Error('PUT timed out');
      }
    };
    clock.advance(RETENTION);
    const failed = await M.log.maintain();
    expect(failed.failures.map((f) => f.step)).toEqual(['deletions']);
    clock.advance(1);
    await M.log.maintain(); // records a removal, removes the rows
    clock.advance(RETENTION);
    expect((await M.log.maintain()).purgedItems).toBe(1);
    await late!(); // the first PUT lands now
    clock.advance(RETENTION);
    await M.log.maintain();
    expect(await M.objects.list(PURGED_DIR), 'an orphan record').toEqual([]);
  });
});

describe('the purge grace: passes that stop, re-creation, idle()', () => {
  it('a pass that stops between deleting the records and the tombstone: the next pass records now and waits a whole grace', async () => {
    const s = setup();
    const { open, clock } = s;
    await deleteMergedItem(open({ slot: 0, slots: 2 }), batch('gone'));
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    clock.advance(RETENTION);
    await M.log.maintain(); // removal
    clock.advance(RETENTION);
    let failTomb = true;
    M.objects.tap.before = (op, key) => {
      if (op === 'delete' && key.startsWith(`${META_DIR}/tomb.`) && failTomb) {
        failTomb = false;
        throw new Error('DELETE failed');
      }
    };
    const stopped = await M.log.maintain();
    expect(stopped.failures.map((f) => f.step)).toEqual(['deletions']);
    expect(await tombNames(M.objects)).toHaveLength(1);
    expect(await M.objects.list(PURGED_DIR), 'records gone first').toEqual([]);
    const again = await M.log.maintain();
    expect([again.purgedItems, again.pendingDeletions]).toEqual([0, 1]);
    expect(await M.objects.list(PURGED_DIR), 'a new record').toHaveLength(1);
    clock.advance(RETENTION - 1);
    expect((await M.log.maintain()).purgedItems).toBe(0);
    clock.advance(1);
    expect((await M.log.maintain()).purgedItems).toBe(1);
    expect(await shownRows(s, 'gone')).toBe(0);
  });

  it('re-creation during the grace, then a second delete: sequencing continues above, each tombstone waits for its own removal, reads stay right', async () => {
    const s = setup();
    const { open, clock } = s;
    const A = open({ slot: 0, slots: 2, leaseTtlMs: 100 * RETENTION });
    const first = await A.log.append([batch('x')]);
    await A.log.mergeOwnShard();
    expect((await A.log.deleteItem('x', { throughSeq: first[0]!.lastSeq })).deleted).toBe(true);
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    clock.advance(RETENTION);
    expect((await M.log.maintain()).pendingDeletions, 'removed, in its grace').toBe(1);
    // Re-created while the first tombstone stands.
    const again = await A.log.append([batch('x')]);
    expect(again[0]!.firstSeq, 'continues above the tombstone').toBe(first[0]!.lastSeq + 1);
    await A.log.mergeOwnShard();
    expect(await shownRows(s, 'x')).toBe(again[0]!.eventIds.length);
    // A retry of the first guarded delete is answered as done, the new incarnation stays.
    expect(await A.log.deleteItem('x', { throughSeq: first[0]!.lastSeq })).toEqual({ itemId: 'x', deleted: false, throughSeq: first[0]!.lastSeq });
    clock.advance(RETENTION);
    const drop1 = await M.log.maintain();
    expect([drop1.purgedItems, drop1.failures]).toEqual([1, []]);
    expect(await shownRows(s, 'x'), 'the new incarnation untouched').toBe(again[0]!.eventIds.length);
    // Second delete, its own removal and grace.
    expect((await A.log.deleteItem('x')).deleted).toBe(true);
    clock.advance(RETENTION);
    expect((await M.log.maintain()).pendingDeletions).toBe(1);
    expect(await shownRows(s, 'x')).toBe(0);
    clock.advance(RETENTION);
    expect((await M.log.maintain()).purgedItems).toBe(1);
    expect(await tombNames(M.objects)).toEqual([]);
    expect(await M.objects.list(PURGED_DIR)).toEqual([]);
    expect(await shownRows(s, 'x')).toBe(0);
  });

  it('idle() resolves at once when nothing runs, and waits for a close() in progress without hanging', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 2 });
    await A.log.idle(); // no writer yet
    await A.log.append([batch('y')]);
    await A.log.idle();
    const closing = A.log.close();
    await A.log.idle();
    await closing;
    await A.log.idle();
  });
});
