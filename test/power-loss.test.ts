/**
 * Power loss on a local root (docs/design/invariants.md, "Power loss on a local root"): the
 * maintenance pass's compaction step keeps every merged row in a durable file at each base fsync,
 * also when a writer's merge commits between its two optimize calls; and a takeover fsyncs the
 * generation it seals before the seal names its version. Schedules are forced with promises
 * (tapped stores, sync wrappers, writer/merge hooks; no sleeps) on a local root with real Lance.
 */
import { describe, expect, it } from 'vitest';
import type { ManualClock } from '../lib/clock.ts';
import { DEFAULTS } from '../lib/index.ts';
import type { LeaseStore } from '../lib/lease/types.ts';
import type { LanceLogOptions } from '../lib/log/log.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logUri, parseRoot } from '../lib/storage/location.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch } from './support/batches.ts';
import { baseDataFiles, eventsOf, EXPERIMENT, Pause, PIPELINE, raceFixture, settle, TapObjectStore, withFreshReader } from './support/race-kit.ts';

/** Long enough that no lease lapses when a test moves the clock. */
const LONG_TTL = 10 * 3_600_000;
const { setup, rawLog: fixtureLog } = raceFixture(LONG_TTL);
const rawLog = (root: string, leases: LeaseStore, clock: ManualClock, extra: Partial<LanceLogOptions>) =>
  fixtureLog(root, leases, clock, { owner: 'compaction-test', leaseTtlMs: LONG_TTL, ...extra });

/** A ttl a takeover waits out by moving the clock. */
const TTL = 60_000;
const short = raceFixture(TTL);
const rawLogShort = (root: string, leases: LeaseStore, clock: ManualClock, extra: Partial<LanceLogOptions>) => short.rawLog(root, leases, clock, { owner: 'power-loss', ...extra });

describe('the compaction step with a merge between its two optimize calls (the second compacts too, and prunes)', () => {
  // maintain.ts runs optimize(no cleanup) -> sync -> optimize(cleanup) -> sync. But the second
  // optimize is a whole optimize: it compacts again, then prunes, then the sync comes. A writer's
  // merge that commits a fragment between the two calls (fsynced by the merge, its shard then
  // deleted) is compacted by the second call into a new, un-fsynced file, and the same call
  // prunes the merge's version (retention shorter than the time since it: versionRetentionMs 0,
  // or a maintainer clock ahead) and with it the fsynced file. A power cut before the final
  // sync: the merged rows are in no durable file (invariants.md, "Power loss on a local root").
  it('at every base fsync of the pass, no fsynced data file has been deleted while its rows are only in an unsynced one', async () => {
    const { root, clock, leases, open } = setup();
    const W = open({ slot: 0, slots: 2 });
    const acks: Ack[] = [];
    for (let i = 0; i < 3; i++) {
      acks.push(...(await W.log.append([createBatch(`m${i}`)])));
      await W.log.mergeOwnShard(); // one base fragment each, fsynced by the merge
    }

    // Their rows are rewritten by the first optimize into a fsynced file: pruning them is the design.
    const compactedAway = await baseDataFiles(root);
    const afterFirst = new Pause();
    let syncs = 0;
    let durable: Set<string> | null = null;
    let atSecond: { gone: string[]; fresh: string[] } | null = null;
    const M = rawLog(root, leases, clock, {
      owner: 'compaction-test-maintainer',
      versionRetentionMs: 0,
      wrapSync: async (name, run) => {
        if (name !== 'base') return run();
        const n = ++syncs;
        if (n === 2 && durable) {
          const now = await baseDataFiles(root);
          atSecond = { gone: [...durable].filter((f) => !now.has(f)), fresh: [...now].filter((f) => !durable!.has(f)) };
        }
        await run();
        // After the first optimize's fsync: the test lets a writer merge before the second one.
        if (n === 1) await afterFirst.hit();
      },
    });
    const pass = settle(M.maintain());
    await afterFirst.reached.promise;
    // W merges one more generation: its base commit lands between the two optimize calls.
    acks.push(...(await W.log.append([createBatch('late')])));
    await W.log.mergeOwnShard();
    // The files the latest version reads, every one fsynced (the first compaction's, the merge's):
    // the only copies of their rows until the file the second optimize writes is fsynced.
    durable = new Set([...(await baseDataFiles(root))].filter((f) => !compactedAway.has(f)));
    expect(durable.size, 'the first compaction\'s file and the late merge\'s').toBe(2);
    clock.advance(60_000); // the maintainer's now is after the merge (the manual clock does not tick; real time did)
    afterFirst.release();
    const report = await pass;
    expect(report.ok, 'the pass ran').toBe(true);
    expect(report.ok && report.value.failures, 'no step failed').toEqual([]);
    expect(atSecond, 'the base was fsynced after the second optimize').not.toBeNull();
    const seen = atSecond as unknown as { gone: string[]; fresh: string[] };
    expect(seen.fresh.length, 'the second optimize wrote a compacted file (not fsynced yet)').toBeGreaterThanOrEqual(1);
    expect(seen.gone, 'the only fsynced copies deleted before the file holding their rows was fsynced').toEqual([]);
    await withFreshReader(root, leases, clock, async (r) => {
      for (const a of acks) expect((await eventsOf(r, a.itemId)).size).toBe(a.eventIds.length);
    });
  });
});

describe('the compaction step prunes the fsynced files only after the compacted ones are fsynced', () => {
  // maintain()'s compaction step was ONE call, base.optimize({cleanupOlderThan}), which compacts
  // (new fragment files, written without fsync by Lance) AND removes versions older than the
  // retention together with the files only they reference: the merged fragments, fsynced when
  // their merges were acknowledged. The fsync of the new files (tables.sync('base')) came after.
  // A power cut in between left the unlinks (journaled metadata) without the new files' data:
  // acked, merged rows gone from a local root (invariants.md "Power loss on a local root").
  it('at the moment the base is fsynced after compaction, no fsynced data file has been deleted yet', async () => {
    const { root, clock, leases, open } = short.setup();
    const W = open({ slot: 0, slots: 2 });
    const acks: Ack[] = [];
    for (let i = 0; i < 4; i++) {
      acks.push(...(await W.log.append([createBatch(`m${i}`)])));
      await W.log.mergeOwnShard(); // one base fragment each, fsynced by the merge
    }
    await W.log.close();
    const durable = await baseDataFiles(root); // every one fsynced (merge: sync before retire)
    expect(durable.size, 'one fragment file per merge').toBe(4);
    // The merges' versions are older than the version retention from here on.
    clock.advance(DEFAULTS.versionRetentionMs + 60_000);
    let atSync: { gone: string[]; fresh: string[] } | null = null;
    const M = rawLogShort(root, leases, clock, {
      owner: 'power-loss-maintainer',
      wrapSync: async (name, run) => {
        if (name === 'base' && atSync === null) {
          const now = await baseDataFiles(root);
          atSync = { gone: [...durable].filter((f) => !now.has(f)), fresh: [...now].filter((f) => !durable.has(f)) };
        }
        return run();
      },
    });
    const report = await M.maintain();
    expect(report.compacted?.fragmentsRemoved, 'the compaction rewrote the merged fragments').toBe(4);
    expect(atSync, 'the base was fsynced after the compaction').not.toBeNull();
    const seen = atSync as unknown as { gone: string[]; fresh: string[] };
    expect(seen.fresh.length, 'compacted file(s) not fsynced yet').toBeGreaterThanOrEqual(1);
    // While the only copy of the rows is in files not yet fsynced, the fsynced copy must still exist.
    expect(seen.gone, 'fsynced data files deleted before the compacted file was fsynced').toEqual([]);
    await withFreshReader(root, leases, clock, async (r) => {
      for (const a of acks) expect((await eventsOf(r, a.itemId)).size).toBe(a.eventIds.length);
    });
  });
});

describe('a seal never names a shard version that was never fsynced', () => {
  // The writer fsyncs after table.add() and before its epoch check. A writer that dies in
  // between (process crash: its commit is in the page cache only) is sealed by the next owner of
  // the slot at the LATEST version, which includes that commit, and the seal itself is fsynced.
  // Until maintenance merges the generation (the merge fsyncs the base), a power cut can lose
  // that version's manifest/data while the durable seal still names it: readers then check out a
  // version that does not exist (every read of the log fails, the merge too), so the acked
  // commits below it are unreachable. So writeSeal() fsyncs each generation it seals before
  // the seal PUT (a no-op on object stores).
  it('the takeover fsyncs the generation it seals before writing the seal', async () => {
    const { root, clock, leases } = short.setup();
    const crash = new Pause();
    const hold = { on: false };
    const W = rawLogShort(root, leases, clock, {
      owner: 'power-loss-W',
      slot: 0,
      leaseTtlMs: TTL,
      wrapSync: async (name, run) => {
        if (hold.on && name !== 'base') {
          await crash.hit(); // the process dies here: its commit landed, nothing fsynced it
          throw new Error('W died before the fsync');
        }
        return run();
      },
    });
    const acked = await W.append([createBatch('a')]);
    hold.on = true;
    const dying = settle(W.append([createBatch('b')]));
    await crash.reached.promise;

    // W's lease lapses; W2 takes the slot and seals W's epoch.
    clock.advance(TTL + 1);
    const synced: string[] = [];
    let syncedAtSeal: string[] | null = null;
    const objects = new TapObjectStore(new LocalObjectStore(logUri(parseRoot(root), PIPELINE, EXPERIMENT)));
    objects.tap.before = (op, key) => {
      if (op === 'putIfAbsent' && /\/seal\.s00-e0+1\.json$/.test(key)) syncedAtSeal = [...synced];
    };
    const W2 = rawLogShort(root, leases, clock, {
      owner: 'power-loss-W2',
      slot: 0,
      leaseTtlMs: TTL,
      objects,
      wrapSync: async (name, run) => {
        synced.push(name);
        return run();
      },
    });
    await W2.append([createBatch('c')]);
    crash.release();
    expect((await dying).ok, 'W never acknowledged b').toBe(false);

    const gen = 's00-e000001-g000001';
    const seal = JSON.parse((await objects.get(`_dgcl/meta/seal.s00-e000001.json`))!) as { gens: Record<string, number> };
    // The seal includes the commit nobody fsynced (a reader sees b), so...
    const seen = await withFreshReader(root, leases, clock, (r) => eventsOf(r, 'b'));
    // (b is a creation batch like a: the same number of events.)
    expect(seen.size, 'b (never fsynced) is visible, whole, through the seal').toBe(acked[0]!.eventIds.length);
    expect(seal.gens['1'], 'sealed at the version with b').toBeGreaterThanOrEqual(2);
    // ...the sealer must have made that version durable before the seal named it.
    expect(syncedAtSeal, 'fsyncs done before the seal PUT').toContain(gen);
    await withFreshReader(root, leases, clock, async (r) => expect((await eventsOf(r, 'a')).size).toBe(acked[0]!.eventIds.length));
  });
});
