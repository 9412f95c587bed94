/**
 * Adversarial review 2 (stream.ts, deletion/purge, durability): interleavings that break a
 * promise of docs/design/invariants.md (or deletion.md) on main at 267a6c1. Each test forces one
 * schedule with promises (tapped stores, writer/merge hooks, a Lance query wrapper; no sleeps)
 * on a local root with real Lance, and asserts what a user sees. Each one FAILS on main; the
 * failure is the finding (see the review report). F1 and F2 fail on h-libapi (f736d40) too; F3
 * is fixed there (4819e41, not on main). The fix proposed for each was checked against its
 * test in a scratch copy of the tree (not committed: this branch changes no lib/ code).
 */
import { describe, expect, it } from 'vitest';
import type { ManualClock } from '../lib/clock.ts';
import { DEFAULTS } from '../lib/index.ts';
import type { LeaseStore } from '../lib/lease/types.ts';
import type { LanceCheckpointLog, LanceLogOptions } from '../lib/log/log.ts';
import type { Table, TableWrapper } from '../lib/log/tables.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logUri, parseRoot } from '../lib/storage/location.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { baseDataFiles, eventsOf, EXPERIMENT, Pause, PIPELINE, raceFixture, settle, TapObjectStore, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
/** Long enough that no lease lapses when the clock jumps past the deletion retention. */
const LONG_TTL = 10 * 3_600_000;
const { setup, rawLog: fixtureLog } = raceFixture(TTL);
const rawLog = (root: string, leases: LeaseStore, clock: ManualClock, extra: Partial<LanceLogOptions>) => fixtureLog(root, leases, clock, { owner: 'review2', ...extra });

/**
 * A reader process whose base-table queries (Lance `execute`, what scanEvents streams with) call
 * `beforeBaseExecute(n)` first, n counting from 1: the test can pause between two queries.
 */
function readerWithBaseTap(root: string, leases: LeaseStore, clock: ManualClock, beforeBaseExecute: (n: number) => Promise<void>): LanceCheckpointLog {
  let n = 0;
  const wrap: TableWrapper = (t: Table, name: string) =>
    name !== 'base'
      ? t
      : new Proxy(t, {
          get(target, prop, receiver) {
            const v = Reflect.get(target, prop, receiver) as unknown;
            if (typeof v !== 'function') return v;
            if (prop !== 'query') return (v as (...a: unknown[]) => unknown).bind(target);
            return () => {
              const q = (v as () => { execute: (...a: unknown[]) => unknown }).apply(target, []);
              const orig = q.execute.bind(q);
              // select()/where() return the same builder, so patching it here covers the query.
              q.execute = async (...a: unknown[]) => {
                await beforeBaseExecute(++n);
                return orig(...a);
              };
              return q;
            };
          },
        });
  return rawLog(root, leases, clock, { owner: 'review2-reader', wrapTable: wrap });
}


/** event_id -> how many times scanEvents handed it to the visitor as a kept row. */
async function keptCounts(log: LanceCheckpointLog): Promise<Map<string, number>> {
  return log.scanEvents({ columns: ['event_id', 'item_seq'] }, () => {
    const counts = new Map<string, number>();
    return {
      batch(b, keepRow) {
        const ids = b.getChild('event_id')!;
        for (let r = 0; r < b.numRows; r++) if (keepRow(r)) counts.set(String(ids.get(r)), (counts.get(String(ids.get(r))) ?? 0) + 1);
      },
      done: () => counts,
    };
  });
}

describe('review2 F1: scanEvents queries the base twice, at two different versions', () => {
  // stream.ts looks the tail's event ids up in the base (query 1), then streams the base (query
  // 2). The base handle reads the latest version on every query (readConsistencyInterval 0), so a
  // merge whose base commit lands between the two puts the tail's events into the stream while
  // their shard copies are still "chosen". The re-listing only catches the merge once its
  // retired marker exists, which comes after the base commit.
  it('each event is delivered once, also when a merge commits to the base between the lookup and the stream', async () => {
    const { root, clock, leases, open } = setup();
    const hooks: { beforeMergeStep?: (s: string) => Promise<void> } = {};
    const W = open({ slot: 0, slots: 2, mergeEveryCommits: 1000, hooks });
    // A base to look up in (its marker exists), then an unmerged tail holding item a.
    await W.log.append([createBatch('z')]);
    await W.log.mergeOwnShard();
    const acks: Ack[] = await W.log.append([createBatch('a'), stepBatch('a', 1)]);

    // The reader pauses before its 2nd base query: the stream (the 1st is the id lookup).
    const readerPause = new Pause();
    const R = readerWithBaseTap(root, leases, clock, async (n) => {
      if (n === 2) await readerPause.hit();
    });
    const counting = settle(keptCounts(R));
    await readerPause.reached.promise;

    // W merges its generation: the base commit lands, the retired marker is not written yet.
    const mergePause = new Pause();
    hooks.beforeMergeStep = async (s) => {
      if (s === 'retire-marker') await mergePause.hit();
    };
    const merging = settle(W.log.mergeOwnShard());
    await mergePause.reached.promise;

    readerPause.release();
    const out = await counting;
    mergePause.release();
    expect((await merging).ok, 'the merge finished').toBe(true);
    expect(out.ok, 'the scan returned').toBe(true);
    const counts = out.ok ? out.value : new Map<string, number>();
    const aIds = acks.flatMap((a) => a.eventIds);
    expect(
      aIds.map((id) => [id, counts.get(id) ?? 0]),
      'each acknowledged event of a is delivered exactly once',
    ).toEqual(aIds.map((id) => [id, 1]));
    await withFreshReader(root, leases, clock, async (r) => expect((await keptCounts(r)).size).toBe(counts.size));
  });
});

describe('review2 F2: a writer\'s in-memory rows of a generation being retired outlive the purge', () => {
  // mergeFrozen() drops ownRows only after mergeGeneration() returns, i.e. after the retired
  // marker AND the deletion of the generation's files. Meanwhile a maintenance pass sees the
  // generation retired (or gone), purges the deleted item from the base and drops its tombstone.
  // plan() then reads storage (nothing left of the item, no tombstone) and adds its own rows of
  // that generation back, filtered by the (now empty) tombstones: the purged incarnation lives
  // again in the writer's sequencing.
  async function purgedWhileRetiring() {
    const { root, clock, leases, open } = setup();
    const holdRetirement = { on: false };
    const mergePause = new Pause();
    const W = open({
      slot: 0,
      slots: 2,
      leaseTtlMs: LONG_TTL,
      mergeEveryCommits: 2,
      hooks: {
        async beforeMergeStep(step) {
          if (holdRetirement.on && step === 'delete-data') await mergePause.hit();
        },
      },
    });
    const M = open({ slot: 1, slots: 2, leaseTtlMs: LONG_TTL });
    const created = await W.log.append([createBatch('x')]); // commit 1 of W's generation g1
    expect((await W.log.deleteItem('x')).deleted).toBe(true);
    clock.advance(DEFAULTS.deletionRetentionMs + 1);
    // g1 is W's live generation and holds x's rows: the purge waits for it (as designed).
    const first = await M.log.maintain();
    expect(first.pendingDeletions, 'the purge waits for the live generation').toBe(1);

    // Commit 2 rotates g1; the background merge copies it into the base, writes the retired
    // marker, and is paused before deleting its files (a large generation on S3 takes a while).
    holdRetirement.on = true;
    await W.log.append([createBatch('y')]);
    await mergePause.reached.promise;
    holdRetirement.on = false;
    // A maintenance pass: g1 is retired, so no visible shard holds x; x is purged, tombstone dropped.
    const second = await M.log.maintain();
    expect(second.pendingDeletions, 'x is gone from the base; its tombstone stays one retention more').toBe(1);
    clock.advance(DEFAULTS.deletionRetentionMs);
    expect((await M.log.maintain()).purgedItems, 'x was purged').toBe(1);
    return { root, clock, leases, W, mergePause, created };
  }

  it('creating the deleted, purged item again creates it (not a duplicate naming events no reader sees, I4)', async () => {
    const { root, clock, leases, W, mergePause, created } = await purgedWhileRetiring();
    // The pipeline creates x again (the same first batch): x does not exist any more.
    const again = await W.log.append([createBatch('x')]);
    mergePause.release();
    await W.log.close();
    // A new incarnation after the deleted seqs (docs/design/deletion.md: floors): ids of its own.
    expect(again[0]!.eventIds.filter((id) => created[0]!.eventIds.includes(id)), 'no id of the deleted incarnation').toEqual([]);
    expect(again[0]!.duplicate).toBe(false);
    const seen = await withFreshReader(root, leases, clock, (r) => eventsOf(r, 'x'));
    // I4: a duplicate: true ack names events visible to later reads; a fresh creation would be
    // written and acked duplicate: false. Either way, the acked events must be visible.
    expect(
      again[0]!.eventIds.map((id, i) => [id, seen.get(id) ?? 'missing', again[0]!.firstSeq + i]),
      `ack of x (duplicate ${again[0]!.duplicate}) names events at seqs ${again[0]!.firstSeq}-${again[0]!.lastSeq}`,
    ).toEqual(again[0]!.eventIds.map((id, i) => [id, again[0]!.firstSeq + i, again[0]!.firstSeq + i]));
  });

  it('a step for the deleted, purged item fails with ItemNotFoundError (not acknowledged as a headless item)', async () => {
    const { root, clock, leases, W, mergePause } = await purgedWhileRetiring();
    const step = await settle(W.log.append([stepBatch('x', 1)]));
    mergePause.release();
    await W.log.close();
    const state = await withFreshReader(root, leases, clock, async (r) => {
      const f = await settle(r.fold('x'));
      return f.ok ? f.value.violations.map((v) => v.kind) : [(f.error as { code?: string }).code];
    });
    expect(step.ok ? `acked at seq ${step.value[0]!.firstSeq}` : (step.error as { code?: string }).code, 'the step of a purged item').toBe('ITEM_NOT_FOUND');
    expect(state, 'x reads as absent').toEqual(['NOT_FOUND']);
  });
});

describe('review2 F3: items()/failures() on main do not hide deleted items', () => {
  // main has the tombstones (a04ee9e) but not h-libapi's 4819e41 (scanEvents applying them), so
  // the streaming listings, the report and the export still show a deleted item.
  it('a deleted item is not listed by items() nor failures() after the delete returned (D1)', async () => {
    const { open } = setup();
    const W = open({ slot: 0, slots: 2 });
    await W.log.append([createBatch('gone'), { itemId: 'gone', runId: 'r1', step: { name: 'gen', index: 1 }, failed: { errorType: 'Boom', traceback: 'tb' } }]);
    await W.log.append([createBatch('kept')]);
    expect((await W.log.deleteItem('gone')).deleted).toBe(true);
    expect((await W.log.items()).items.map((i) => i.itemId)).toEqual(['kept']);
    expect((await W.log.failures()).map((f) => f.itemId)).toEqual([]);
  });
});


describe('review2 F4: compaction prunes the fsynced files before the compacted ones are fsynced', () => {
  // maintain()'s compaction step is ONE call, base.optimize({cleanupOlderThan}), which compacts
  // (new fragment files, written without fsync by Lance) AND removes versions older than the
  // retention together with the files only they reference: the merged fragments, fsynced when
  // their merges were acknowledged. The fsync of the new files (tables.sync('base')) comes after.
  // A power cut in between leaves the unlinks (journaled metadata) without the new files' data:
  // acked, merged rows gone from a local root (invariants.md "Power loss on a local root").
  it('at the moment the base is fsynced after compaction, no fsynced data file has been deleted yet', async () => {
    const { root, clock, leases, open } = setup();
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
    const M = rawLog(root, leases, clock, {
      owner: 'review2-maintainer',
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

describe('review2 F5: a seal can name a shard version that was never fsynced', () => {
  // The writer fsyncs after table.add() and before its epoch check. A writer that dies in
  // between (process crash: its commit is in the page cache only) is sealed by the next owner of
  // the slot at the LATEST version, which includes that commit, and the seal itself is fsynced.
  // Until maintenance merges the generation (the merge fsyncs the base), a power cut can lose
  // that version's manifest/data while the durable seal still names it: readers then check out a
  // version that does not exist (every read of the log fails, the merge too), so the acked
  // commits below it are unreachable. writeSeal() should fsync each generation it seals before
  // the seal PUT (a no-op on object stores).
  it('the takeover fsyncs the generation it seals before writing the seal', async () => {
    const { root, clock, leases } = setup();
    const crash = new Pause();
    const hold = { on: false };
    const W = rawLog(root, leases, clock, {
      owner: 'review2-W',
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
    const W2 = rawLog(root, leases, clock, {
      owner: 'review2-W2',
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
    expect(seen.size, 'b (never fsynced) is visible through the seal').toBeGreaterThan(0);
    expect(seal.gens['1'], 'sealed at the version with b').toBeGreaterThanOrEqual(2);
    // ...the sealer must have made that version durable before the seal named it.
    expect(syncedAtSeal, 'fsyncs done before the seal PUT').toContain(gen);
    await withFreshReader(root, leases, clock, async (r) => expect((await eventsOf(r, 'a')).size).toBe(acked[0]!.eventIds.length));
  });
});
