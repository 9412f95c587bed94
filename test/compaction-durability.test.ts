/**
 * The maintenance pass's compaction step on a local root keeps every merged row in a durable file
 * at each base fsync (docs/design/invariants.md, "Power loss on a local root"), also when a
 * writer's merge commits between its two optimize calls. The schedule is forced with promises
 * (tapped stores, sync wrappers, writer/merge hooks; no sleeps) on a local root with real Lance.
 */
import { describe, expect, it } from 'vitest';
import type { ManualClock } from '../lib/clock.ts';
import type { LeaseStore } from '../lib/lease/types.ts';
import type { LanceLogOptions } from '../lib/log/log.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch } from './support/batches.ts';
import { baseDataFiles, eventsOf, EXPERIMENT, Pause, PIPELINE, raceFixture, settle, withFreshReader } from './support/race-kit.ts';

/** Long enough that no lease lapses when a test moves the clock. */
const LONG_TTL = 10 * 3_600_000;
const { setup, rawLog: fixtureLog } = raceFixture(LONG_TTL);
const rawLog = (root: string, leases: LeaseStore, clock: ManualClock, extra: Partial<LanceLogOptions>) =>
  fixtureLog(root, leases, clock, { owner: 'compaction-test', leaseTtlMs: LONG_TTL, ...extra });

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
