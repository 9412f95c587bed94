/**
 * items()/failures() (one streaming pass over light columns, lib/log/read/stream.ts + summary.ts)
 * against the fold of every item (allStates), on real Lance: unmerged shards of two writers,
 * duplicate deliveries through both, a merge that copied rows to the base but stopped before
 * retiring the shard (every event then has two copies), and after maintenance.
 */
import { describe, expect, it } from 'vitest';
import type { ManualClock } from '../lib/clock.ts';
import { summarize } from '../lib/fold.ts';
import type { LeaseStore } from '../lib/lease/types.ts';
import type { LanceCheckpointLog, LanceLogOptions } from '../lib/log/log.ts';
import type { Table, TableWrapper } from '../lib/log/tables.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { Pause, raceFixture, settle, withFreshReader } from './support/race-kit.ts';
import { readsOf } from '../lib/log/reads.ts';

const { setup, rawLog: fixtureLog } = raceFixture(60_000);
const rawLog = (root: string, leases: LeaseStore, clock: ManualClock, extra: Partial<LanceLogOptions>) => fixtureLog(root, leases, clock, { owner: 'stream-test', ...extra });

async function expectListingsMatchFold(log: LanceCheckpointLog, label: string): Promise<void> {
  // Each event exactly once, at the seq fold shows it.
  const seen = await readsOf(log).scanEvents({ columns: ['event_id', 'item_seq'] }, () => {
    const ids: string[] = [];
    return {
      batch(b, keep) {
        const col = b.getChild('event_id')!;
        const seqs = b.getChild('item_seq')!;
        for (let r = 0; r < b.numRows; r++) if (keep(r)) ids.push(`${String(col.get(r))}@${String(seqs.get(r))}`);
      },
      done: () => ids,
    };
  });
  const want: string[] = [];
  for (const s of await log.allStates({ fields: false })) for (const t of await log.trajectory(s.itemId)) want.push(`${t.eventId}@${t.itemSeq}`);
  expect(seen.sort(), `${label}: scanEvents delivers each event once`).toEqual(want.sort());
  const states = await log.allStates({ fields: false });
  expect((await log.items()).items, `${label}: items()`).toEqual(states.map(summarize));
  const failed = states.filter((s) => s.status === 'failed').map((s) => ({ itemId: s.itemId, status: s.status, ...s.failures.at(-1)! }));
  expect(await log.failures(), `${label}: failures()`).toEqual(failed);
  for (const status of ['completed', 'failed', 'in_progress'] as const) {
    expect((await log.items({ status })).items.map((i) => i.itemId), `${label}: items(${status})`).toEqual(states.filter((s) => s.status === status).map((s) => s.itemId));
  }
}

function batches(writer: string, n: number) {
  const out: unknown[] = [];
  for (let i = 0; i < n; i++) {
    const itemId = `it-${String(i).padStart(3, '0')}`;
    out.push({ itemId, runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { x: i } });
    if (i % 3 === 0) out.push({ itemId, runId: 'r', step: { name: 'gen', index: 1 }, failed: { errorType: `Boom${i % 2}`, traceback: `tb ${writer}` } });
    else out.push({ itemId, runId: 'r', step: { name: 'gen', index: 1 }, set: { y: i }, ...(i % 3 === 1 ? { terminal: 'completed' } : {}) });
  }
  return out;
}

describe('items() and failures() from the streaming summary', () => {
  it('equal the folds with two writers, duplicate deliveries, copies in base and shard, and after maintenance', async () => {
    const { open } = setup();
    const failAfterCopy = { on: false };
    const A = open({
      slot: 0,
      slots: 2,
      hooks: {
        beforeMergeStep: (step: string) => {
          if (failAfterCopy.on && step === 'retire-marker') throw new Error('injected: stop after the base commit');
        },
      },
    });
    const B = open({ slot: 1, slots: 2 });
    const all = batches('A', 30);
    // The same batches through both writers (duplicate deliveries), interleaved.
    for (let i = 0; i < all.length; i += 6) {
      await Promise.all([A.log.append(all.slice(i, i + 6)), B.log.append(all.slice(i, i + 6))]);
    }
    await expectListingsMatchFold(A.log, 'unmerged, two writers');

    // A merges but stops after the base commit: its rows are in the base and in its shard.
    failAfterCopy.on = true;
    await expect(A.log.mergeOwnShard()).rejects.toThrow(/injected/);
    failAfterCopy.on = false;
    const stats = await A.log.stats();
    const aShard = stats.shards.filter((s) => s.slot === 0 && !s.retired);
    expect(aShard.length, 'A\'s generation is not retired').toBe(1);
    expect(stats.base.rows, 'the base holds a copy of every row of A\'s generation').toBe(aShard[0]!.rows);
    await expectListingsMatchFold(A.log, 'copies in base and shard');

    await A.log.append(batches('A2', 40).slice(60));
    await A.log.maintain();
    await expectListingsMatchFold(A.log, 'after maintenance');
    expect((await A.log.items()).items).toHaveLength(40);
  });
});

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
  return rawLog(root, leases, clock, { owner: 'stream-test-reader', wrapTable: wrap });
}


/** event_id -> how many times scanEvents handed it to the visitor as a kept row. */
async function keptCounts(log: LanceCheckpointLog): Promise<Map<string, number>> {
  return readsOf(log).scanEvents({ columns: ['event_id', 'item_seq'] }, () => {
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

describe('scanEvents queries the base twice (lookup, stream), possibly at two different versions', () => {
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
