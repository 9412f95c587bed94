/**
 * Adversarial review of the issue-8 fixes: interleavings that still break an invariant of
 * docs/design/invariants.md. Each test forces one schedule (pauses are promises in the tapped
 * stores and writer hooks; no sleeps) on a local root with real Lance, and asserts what a user
 * sees. Each one FAILS on the reviewed code (h-review at a6da3f1); the failure is the finding.
 */
import { describe, expect, it } from 'vitest';
import { FencedError, UnavailableError } from '../lib/errors.ts';
import { itemKey } from '../lib/log/layout.ts';
import { ManualClock } from '../lib/clock.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import {
  eventsOf,
  expectAcksVisible,
  Pause,
  settle,
  testLog,
  withFreshReader,
  raceFixture,
} from './support/race-kit.ts';

const TTL = 60_000;
const META = '_dgcl/meta';

const { setup } = raceFixture(TTL);

describe('review 1: a takeover lists the old epoch\'s generations BEFORE its fence', () => {
  // sealPredecessors() lists `_dgcl/meta/` and only then (in writeSeal) PUTs the fence. A zombie
  // that creates a new generation in between gets a generation the seal does not list (invisible
  // forever), yet a reader that reads it before the fence re-lists, sees no fence, and trusts it.
  it('a duplicate answered from a zombie generation created between the listing and the fence stays visible', async () => {
    const { root, clock, leases, open } = setup();
    let armed: Pause | null = null;
    const A = open({
      slot: 0,
      slots: 2,
      hooks: {
        async beforeCommit(ids) {
          if (armed && ids.includes('x')) {
            const p = armed;
            armed = null;
            await p.hit();
          }
        },
      },
    });
    const C = open({ slot: 1, slots: 2 });
    const acks: Ack[] = await C.log.append([createBatch('x')]);

    // A (slot 0, first commit: its generation does not exist yet) is about to commit step 1 of x.
    const b = stepBatch('x', 1);
    const aPause = (armed = new Pause());
    const aAppend = settle(A.log.append([b]));
    await aPause.reached.promise;

    // A's lease lapses (or B's clock runs ahead: no bound on skew). B takes slot 0, lists the meta
    // folder (no generation of A's epoch yet) and stops right before the fence PUT.
    clock.advance(TTL + 1);
    const B = open({ slot: 0, slots: 2 });
    const fencePause = new Pause();
    B.objects.tap.before = async (op, key) => {
      if (op === 'putIfAbsent' && key.startsWith(`${META}/fence.`) && !fencePause.reached.settled) await fencePause.hit();
    };
    const bAppend = settle(B.log.append([createBatch('y')]));
    await fencePause.reached.promise;

    // The zombie creates its generation (gen. marker) and commits b into it; it is told FENCED.
    aPause.release();
    const aOut = await aAppend;
    expect(aOut.ok ? aOut.value : aOut.error).toBeInstanceOf(FencedError);

    // b is redelivered to C. C reads x: A's generation is listed, unfenced, so read at latest;
    // the re-listing shows no fence yet; C answers duplicate: true from the zombie's rows.
    const cAcks = await C.log.append([b]);
    expect(cAcks[0]!.duplicate, 'C answered from the zombie generation').toBe(true);
    const during = await withFreshReader(root, leases, clock, (r) => eventsOf(r, 'x'));

    // B fences and seals A's epoch with the generations of ITS listing: none.
    fencePause.release();
    const bOut = await bAppend;
    expect(bOut.ok, `B: ${bOut.ok ? '' : String(bOut.error)}`).toBe(true);
    if (bOut.ok) acks.push(...bOut.value);

    const after = await withFreshReader(root, leases, clock, (r) => eventsOf(r, 'x'));
    // I3: every event a read returned is returned by every later read.
    for (const [id, seq] of during) expect(after.get(id), `event ${id} (seq ${seq}) was returned by an earlier read`).toBe(seq);
    // I1/I4: C's duplicate ack names events every later read sees.
    await withFreshReader(root, leases, clock, (r) => expectAcksVisible(r, [...acks, ...cAcks], 'after the seal'));
  });
});

describe('review 2: cleanupMeta lists twice and deletes a seal its first listing did not protect', () => {
  // cleanupMeta() takes `live` epochs (epochs with generations) from one listing and the seals
  // to delete from a second. A generation created after the first listing, whose epoch is then
  // sealed (with it) below a higher seal of the slot before the second listing, loses its seal:
  // its epoch is then "unsealed and below a sealed one" = a zombie's, invisible; the next
  // maintenance pass deletes it.
  it('an acknowledged batch survives a maintenance pass that overlaps a takeover and a close', async () => {
    const { root, clock, leases, open } = setup();
    // The log exists before the pass (maintenance refuses a log that does not): a writer of the
    // other slot wrote and closed (its generation merged, its epoch sealed).
    const W = open({ slot: 1, slots: 2 });
    await W.log.append([createBatch('w')]);
    await W.log.close();
    const M = open({ slot: 1, slots: 2 });
    const mPause = new Pause();
    let claimsSwept = false;
    M.objects.tap.before = (op) => {
      if (op === 'deleteOlderThan') claimsSwept = true; // the 'claims' step runs right before 'meta'
    };
    M.objects.tap.after = async (op, key) => {
      if (claimsSwept && op === 'list' && key === META && !mPause.reached.settled) await mPause.hit();
    };
    const maint = settle(M.log.maintain());
    await mPause.reached.promise; // cleanupMeta has made its first listing: no generation of slot 0

    // Writer A (slot 0, epoch 1) acks x and dies; B takes slot 0 over (seals epoch 1 with A's
    // generation), writes y and closes cleanly (merges its own generation, seals epoch 2).
    const A = open({ slot: 0, slots: 2 });
    const acks: Ack[] = await A.log.append([createBatch('x')]);
    clock.advance(TTL + 1);
    const B = testLog({ root, leases, clock, leaseTtlMs: TTL, slot: 0, slots: 2 });
    acks.push(...(await B.log.append([createBatch('y')])));
    await B.log.close();

    mPause.release();
    const report = await maint;
    expect(report.ok ? report.value.failures : report.error).toEqual([]);

    await withFreshReader(root, leases, clock, (r) => expectAcksVisible(r, acks, 'after the overlapping pass'));
    await withFreshReader(root, leases, clock, async (r) => {
      await r.maintain();
      await expectAcksVisible(r, acks, 'after one more maintenance pass');
    });
  });
});

describe("review 3: claims are deleted by the maintainer's clock", () => {
  // Claims older than claimRetentionMs (by the maintainer's clock against the object's
  // mtime) are deleted. A maintainer whose clock ran 2 h ahead deleted a claim while a duplicate
  // of its batch was in flight: two first acks. I4's uniqueness is therefore documented as
  // holding within the claim retention (docs/design/invariants.md, "Assumptions"): a duplicate
  // that takes less than the retention from read to claim, a maintainer clock ahead by less
  // than the rest. Data safety (I1-I3, I5) needs no clock bound. This pins the documented bound.
  it('at most one ack per checkpoint says duplicate: false while skew + stall stay within the claim retention', async () => {
    const { root, clock, leases, open } = setup();
    let armed: Pause | null = null;
    const W1 = open({ slot: 0, slots: 2 });
    const W2 = open({
      slot: 1,
      slots: 2,
      hooks: {
        async beforeCommit(ids) {
          if (armed && ids.includes('x')) {
            const p = armed;
            armed = null;
            await p.hit();
          }
        },
      },
    });
    await W1.log.append([createBatch('x')]);
    const b = stepBatch('x', 1);

    // A redelivery of b reaches W2, which reads x (no b yet) and stops before its commit.
    const w2Pause = (armed = new Pause());
    const w2Append = settle(W2.log.append([b]));
    await w2Pause.reached.promise;

    // W1 commits b and claims it: the first ack.
    const [first] = await W1.log.append([b]);
    expect(first!.duplicate).toBe(false);

    // A maintainer whose clock is 50 min ahead (retention: 1 h) runs a pass.
    const skewed = new ManualClock(clock.nowMs() + 50 * 60_000);
    const M = testLog({ root, leases, clock: skewed, leaseTtlMs: TTL, slots: 2 });
    const report = await M.log.maintain();
    await M.log.close();
    expect(report.failures).toEqual([]);

    // W2 commits its copy (same seqs, deduplicated) and claims.
    w2Pause.release();
    const out = await w2Append;
    expect(out.ok, out.ok ? '' : String(out.error)).toBe(true);
    const second = out.ok ? out.value[0]! : null;
    // I4: at most one ack per checkpoint says duplicate: false.
    expect([first!.duplicate, second?.duplicate], 'duplicate flags of the two acks of b').toContain(true);
  });
});

describe('review 4: an item marker PUT that times out and lands later', () => {
  // plan() trusts a cached track while the marker names this writer's epoch. A marker PUT that
  // failed (timeout) may land later, after another writer's marker: the marker then names us
  // again although the other writer wrote the item since our copy was made.
  it('one writer at a time per item (W2, W, W2, W): no seq_conflict, every ack visible', async () => {
    const { root, clock, leases, open } = setup();
    const W = open({ slot: 0, slots: 2 });
    const W2 = open({ slot: 1, slots: 2 });
    const xKey = itemKey('x');
    const acks: Ack[] = await W2.log.append([createBatch('x')]);

    // W's first attempt at step 1: the marker PUT times out (it will land later), and so do the
    // writer's own retries of it (3 tries, a new body each), so the attempt fails.
    let failed = 0;
    W.objects.tap.before = (op, key) => {
      if (op === 'put' && key === xKey && failed < 3) {
        failed++;
        throw new UnavailableError('marker PUT timed out');
      }
    };
    const first = await settle(W.log.append([stepBatch('x', 1)]));
    expect(first.ok).toBe(false);
    const wEpoch = W.log.writerEpoch!;
    expect(wEpoch).not.toBeNull();
    // The retry succeeds (W now caches x), then x moves to W2 for step 2.
    acks.push(...(await W.log.append([stepBatch('x', 1)])));
    acks.push(...(await W2.log.append([stepBatch('x', 2)])));

    // The first, timed-out marker PUT lands now.
    await W.objects.inner.put(xKey, wEpoch);

    // x moves back to W for step 3.
    acks.push(...(await W.log.append([stepBatch('x', 3)])));
    await withFreshReader(root, leases, clock, (r) => expectAcksVisible(r, acks, 'after W, W2, W'));
  });
});
