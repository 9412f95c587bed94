/**
 * A zombie's commit after the maintainer merged and deleted its generation recreates dataset
 * files under `_dgcl/shards/` with no `gen.` marker: invisible to readers, and (before the
 * sweep) never deleted by anything.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FencedError } from '../lib/errors.ts';
import { logUri, parseRoot } from '../lib/storage/location.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { eventsOf, manualClock, Pause, PIPELINE, EXPERIMENT, settle, sharedLeases, tempRoot, testLog, withFreshReader, writerHeldAtFirstMarker } from './support/race-kit.ts';

describe('maintenance sweeps what zombies leave', () => {
  it('deletes dataset files a zombie commit recreated after its generation was merged and deleted', async () => {
    const root = tempRoot();
    const clock = manualClock();
    const leases = sharedLeases(root, clock);
    const TTL = 10_000;
    let pause: Pause | null = null;
    const A = testLog({
      root,
      leases,
      clock,
      slots: 1,
      leaseTtlMs: TTL,
      tableTap: {
        async add(_name, run) {
          if (pause) await pause.hit();
          return run();
        },
      },
    });
    const [ack] = await A.log.append([createBatch('x')]);
    const gen = `${A.log.writerEpoch}-g000001`;
    const dir = path.join(logUri(parseRoot(root), PIPELINE, EXPERIMENT).replace(/^file:\/\//, ''), '_dgcl', 'shards', `${gen}.lance`);
    expect(existsSync(dir), 'the generation exists').toBe(true);

    // A pauses inside its next commit; its lease lapses; the maintainer takes the slot, seals,
    // merges and deletes A's generation.
    pause = new Pause();
    const zombie = settle(A.log.append([stepBatch('x', 1)]));
    await pause.reached.promise;
    clock.advance(TTL + 1);
    const M = testLog({ root, leases, clock, slots: 1, leaseTtlMs: TTL, owner: 'maintainer' });
    const progress: Array<[string, number, number]> = [];
    const first = await M.log.maintain({ onProgress: (step, done, total) => progress.push([step, done, total]) });
    expect(first.failures).toEqual([]);
    // Every step is reported once, in order; the total grows by the one merge once it is listed.
    expect(progress).toEqual([
      ['orphans', 1, 10],
      ['retirements', 2, 10],
      ['merge', 3, 11],
      ['zombies', 4, 11],
      ['deletions', 5, 11],
      ['snapshots', 6, 11],
      ['compaction', 7, 11],
      ['indexes', 8, 11],
      ['projection', 9, 11],
      ['claims', 10, 11],
      ['meta', 11, 11],
    ]);
    expect(first.mergedShards).toContain(gen);
    expect(existsSync(dir), 'merged and deleted').toBe(false);

    // The zombie's commit lands now: files reappear, with no marker.
    pause.release();
    const out = await zombie;
    expect(out.ok).toBe(false);
    if (!out.ok) expect(out.error).toBeInstanceOf(FencedError);
    expect(existsSync(dir), 'the zombie recreated the dataset folder').toBe(true);

    const second = await M.log.maintain();
    expect(second.failures).toEqual([]);
    expect(second.sweptShards).toEqual([gen]);
    expect(existsSync(dir), 'swept').toBe(false);
    const state = await withFreshReader(root, leases, clock, (r) => r.fold('x'));
    expect(state.lastSeq).toBe(ack!.lastSeq);
    expect(state.violations).toEqual([]);
    await M.log.close();
  });
});

describe('the sweep and a takeover in progress', () => {
  it("does not delete a generation whose marker lands after the sweep's listing and which a seal then makes visible", async () => {
    const root = tempRoot();
    const clock = manualClock();
    const leases = sharedLeases(root, clock);
    const TTL = 10_000;
    // A creates its first generation: the dataset folder exists, its gen. marker is on the way.
    const { writer: A, marker, appended: aDone, writerEpoch: aEpoch } = await writerHeldAtFirstMarker({ root, leases, clock, leaseTtlMs: TTL, owner: 'a' }, createBatch('x'));

    // A's lease lapses; B takes the slot: it fences A's epoch, and pauses before it lists A's
    // generations for the seal.
    clock.advance(TTL + 1);
    const B = testLog({ root, leases, clock, slots: 1, leaseTtlMs: TTL, owner: 'b' });
    const bFenced = new Pause();
    B.objects.tap.after = async (op, key) => {
      if (op === 'putIfAbsent' && key.includes(`/fence.${aEpoch}`)) await bFenced.hit();
    };
    const bDone = settle(B.log.append([createBatch('y')]));
    await bFenced.reached.promise;

    // Maintenance runs now (A's epoch fenced, not sealed; A's folder has no marker). If it
    // decides to sweep the folder, its delete is held until after the seal below.
    const M = testLog({ root, leases, clock, slots: 1, leaseTtlMs: TTL, owner: 'maintainer' });
    const sweep = new Pause();
    M.objects.tap.before = async (op, key) => {
      if (op === 'deletePrefix' && key.includes(aEpoch)) await sweep.hit();
    };
    const mDone = settle(M.log.maintain());
    await Promise.race([sweep.reached.promise, mDone]);

    // A's marker lands and A commits (its epoch check fails). B goes on: it lists A's
    // generation (marked now), reads its latest version and seals it in.
    A.objects.tap.before = undefined;
    marker.release();
    const a = await aDone;
    expect(a.ok, 'A was fenced').toBe(false);
    bFenced.release();
    const b = await bDone;
    expect(b.ok, 'B appended').toBe(true);
    sweep.release();
    const m = await mDone;
    expect(m.ok && m.value.failures, 'maintenance ran without failures').toEqual([]);

    // Whatever the seal made visible is still there: reads work.
    const states = await withFreshReader(root, leases, clock, async (r) => [await r.fold('y'), (await r.stats()).shards.length]);
    expect((states[0] as { lastSeq: number }).lastSeq, "B's item").toBe(b.ok ? b.value[0]!.lastSeq : -1);
    await M.log.close();
    await B.log.close();
  });
});

// A seal written for an epoch whose seal cleanupMeta already deleted. An epoch below a sealed epoch
// of its slot and without a seal of its own is invisible to readers (listingOf), and the sweep
// treats its unmarked folders as over. But a later takeover's sealPredecessors seals every earlier
// epoch that has a `gen.` marker and no seal, and writeSeal lists that epoch's generations at
// their latest versions: a zombie generation whose marker landed late (after cleanupMeta deleted
// the epoch's seal) became visible, with the zombie's unconfirmed commit, and the sweep that had
// decided on the folder deleted it under the new seal: a visible generation without data, every
// read failing.
describe('an epoch whose seal was cleaned up is never sealed again with what a zombie wrote later', () => {
  it('a late marker of a cleaned-up epoch stays invisible; the sweep deleting its folder breaks no read', async () => {
    const root = tempRoot();
    const clock = manualClock();
    const leases = sharedLeases(root, clock);
    const TTL = 10_000;
    // A (epoch 1) creates its first generation: the dataset exists, the gen. marker is held.
    const { writer: A, marker, appended: aDone, writerEpoch: aEpoch } = await writerHeldAtFirstMarker({ root, leases, clock, leaseTtlMs: TTL, owner: 'a' }, createBatch('z'));

    // A's lease lapses; B takes the slot (seals A's epoch: no generation listed), writes, closes.
    clock.advance(TTL + 1);
    const B = testLog({ root, leases, clock, slots: 1, leaseTtlMs: TTL, owner: 'b' });
    const [bAck] = await B.log.append([createBatch('y')]);
    await B.log.close();

    // Maintenance pass 1: its sweep of A's folder fails (storage trouble), its meta cleanup
    // deletes A's seal (no generation of A's epoch is listed) and the fences.
    const M = testLog({ root, leases, clock, slots: 1, leaseTtlMs: TTL, owner: 'maintainer' });
    let failSweep = true;
    const sweep = new Pause();
    M.objects.tap.before = async (op, key) => {
      if (op !== 'deletePrefix' || !key.includes(aEpoch)) return;
      if (failSweep) throw new Error('simulated: the delete of the folder failed');
      await sweep.hit();
    };
    const m1 = await M.log.maintain();
    expect(m1.failures.map((f) => f.step), 'pass 1: only the sweep failed').toEqual(['zombies']);
    expect(await M.objects.get(`_dgcl/meta/seal.${aEpoch}.json`), "A's seal was cleaned up").toBeNull();

    // Pass 2 decides to sweep A's folder (no seal, no fence, a later epoch sealed); held.
    failSweep = false;
    const m2 = settle(M.log.maintain());
    await Promise.race([sweep.reached.promise, m2]);

    // A's marker lands, A commits (a zombie: its epoch check fails).
    A.objects.tap.before = undefined;
    marker.release();
    const a = await aDone;
    expect(a.ok, 'A was fenced').toBe(false);
    // C takes the slot: its takeover seals the earlier epochs that have generations.
    const C = testLog({ root, leases, clock, slots: 1, leaseTtlMs: TTL, owner: 'c' });
    const [cAck] = await C.log.append([createBatch('w')]);
    sweep.release();
    const done = await m2;
    expect(done.ok && done.value.failures, 'pass 2 ran without failures').toEqual([]);

    // Reads work, show B's and C's items, and nothing of A's failed append.
    const seen = await withFreshReader(root, leases, clock, async (r) => {
      const out: Record<string, unknown> = {};
      for (const id of ['y', 'w', 'z']) {
        const got = await settle(eventsOf(r, id));
        out[id] = got.ok ? got.value.size : `${(got.error as { code?: string }).code}: ${(got.error as Error).message}`;
      }
      return out;
    });
    expect(seen).toEqual({ y: bAck!.eventIds.length, w: cAck!.eventIds.length, z: 0 });
    await C.log.close();
    await M.log.close();
  });
});
