/**
 * The reader's tail cache (lib/log/read/tail-cache.ts): a process listing a live log again reads only
 * the rows committed since. On real Lance: a long-lived reader lists while two writers keep
 * appending, a generation is merged and retired, and a takeover seals one; each time its listing
 * equals a fresh reader's, and the rows it takes are only the new ones.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import type * as arrow from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import { summarize } from '../lib/fold.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { shardName } from '../lib/log/layout.ts';
import { SUMMARY_SCAN_COLUMNS, SummaryVisitor } from '../lib/log/read/summary.ts';
import { TailCache } from '../lib/log/read/tail-cache.ts';
import type { Table } from '../lib/log/tables.ts';
import { EVENT_SCHEMA, rowsFromArrow, rowsToArrow } from '../lib/schema.ts';
import { rowsOf } from '../bench/common.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { Pause, raceFixture, settle, tableTapper, type TableTap } from './support/race-kit.ts';
import { readsOf } from '../lib/log/reads.ts';

const TTL = 10_000;
const META = '_dgcl/meta';
const { setup } = raceFixture(TTL);

describe('the tail cache', () => {
  it('a long-lived reader lists what a fresh one lists, taking only rows committed since', async () => {
    const { open, clock } = setup();
    const A = open({ slot: 0, slots: 2, owner: 'a' });
    const B = open({ slot: 1, slots: 2, owner: 'b' });
    // The reader's shard takes, by offset count, to see what it reads again.
    const taken: number[] = [];
    const R = open({ slot: 0, slots: 2, owner: 'reader', tableTap: { take: (name, n) => name !== 'base' && taken.push(n) } });
    const sum = () => taken.splice(0).reduce((a, b) => a + b, 0);
    const fresh = async (label: string): Promise<void> => {
      const F = open({ slot: 0, slots: 2, owner: `fresh-${label}` });
      const want = (await F.log.allStates({ fields: false })).map(summarize);
      expect((await R.log.items()).items, label).toEqual(want);
      expect((await F.log.items()).items, `${label} (fresh reader)`).toEqual(want);
    };
    await A.log.append([createBatch('a1'), createBatch('a2')]);
    await B.log.append([createBatch('b1')]);
    await fresh('first');
    expect(sum(), 'the first listing takes both generations whole').toBe(await shardRows(A.log));
    await fresh('nothing new');
    expect(sum(), 'no shard row taken again').toBe(0);

    const before = await shardRows(A.log);
    await A.log.append([stepBatch('a1', 1)]);
    const added = (await shardRows(A.log)) - before;
    expect(added).toBeGreaterThan(1);
    await fresh('A appended');
    expect(sum(), 'only the rows committed since').toBe(added);

    // A merges (its generation retired and deleted), B keeps writing.
    await A.log.mergeOwnShard();
    await B.log.append([stepBatch('b1', 1), createBatch('b2')]);
    await fresh('A merged, B appended');

    // B dies; a takeover seals its epoch; the reader lists at the sealed version.
    clock.advance(TTL + 1);
    const B2 = open({ slot: 1, slots: 2, owner: 'b2' });
    await B2.log.append([stepBatch('b2', 1)]);
    await fresh('B taken over');
    await B2.log.mergeOwnShard();
    await fresh('all merged');
  });
});

/** Rows of every visible unmerged generation. */
async function shardRows(log: CheckpointLog): Promise<number> {
  return (await log.stats()).shards.filter((s) => !s.retired).reduce((n, s) => n + s.rows, 0);
}

// Schedules that try to break the cache. None returned a row a fresh read would not (or missed
// one); each fails if the cache stops cutting what it learned at the reading version's row count,
// or shares an entry across column sets or after a forget.
describe('the tail cache: a zombie commit above the seal, learned by one read, while another reads the sealed version', () => {
  it('the read of the sealed version uses the shared entry cut at the seal; both equal a fresh read, the zombie item shows in neither', async () => {
    const { open, clock } = setup();
    // A's next add is held (it becomes the zombie's commit, landing after the takeover's seal).
    let holdAdd = false;
    const add = new Pause();
    const A = open({
      slot: 0,
      slots: 1,
      owner: 'a',
      tableTap: {
        async add(_name, run) {
          if (holdAdd) {
            holdAdd = false;
            await add.hit();
          }
          return run();
        },
      },
    });
    await A.log.append([createBatch('a1')]);
    await A.log.append([stepBatch('a1', 1)]);
    const gen = shardName(A.log.writerEpoch!, 1);

    // The reader process R: takes on A's generation, by phase.
    let phase = 'r1';
    const takes: Record<string, number> = {};
    const R = open({ slots: 1, owner: 'r', tableTap: { take: (name) => name === gen && (takes[phase] = (takes[phase] ?? 0) + 1) } });
    const scan = () => readsOf(R.log).scanEvents({ columns: SUMMARY_SCAN_COLUMNS, keepTail: true }, () => new SummaryVisitor());

    // R#1 lists (A's generation is live, no fence) and stops; its re-list is held later.
    let lists = 0;
    const listed = new Pause();
    const relist = new Pause();
    R.objects.tap.after = async (op, key) => {
      if (op !== 'list' || key !== META) return;
      lists++;
      if (lists === 1) await listed.hit();
      if (lists === 2) await relist.hit();
    };
    const r1 = settle(scan());
    await listed.reached.promise;

    // A commits again (held before the commit); A's lease lapses; B takes the slot over: fence,
    // seal of A's epoch at A's two commits, B's own commit.
    holdAdd = true;
    const zombie = settle(A.log.append([createBatch('z')]));
    await add.reached.promise;
    clock.advance(TTL + 1);
    const B = open({ slot: 0, slots: 1, owner: 'b' });
    await B.log.append([createBatch('b1')]);
    // The zombie's commit lands above the seal; its confirmation fails.
    add.release();
    const z = await zombie;
    expect(z.ok, "the zombie's append is not acknowledged").toBe(false);

    // R#1 reads A's generation at its latest version (three commits: the zombie's too) and holds
    // before its re-list: the entry has learned the zombie's rows.
    listed.release();
    await relist.reached.promise;
    expect(takes.r1, 'R#1 took the generation').toBeGreaterThanOrEqual(1);

    // R#2, in the same process, lists after the seal: A's generation at the sealed version.
    phase = 'r2';
    const r2 = await scan();
    expect(takes.r2 ?? 0, 'R#2 read the sealed version from the entry R#1 filled (no take)').toBe(0);

    relist.release();
    const first = await r1;
    expect(first.ok, 'R#1 settles (it starts over: the epoch it read at latest was sealed)').toBe(true);

    const F = open({ slots: 1, owner: 'fresh' });
    const fresh = await readsOf(F.log).scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor());
    expect(fresh.map((a) => a.itemId).sort(), 'the fresh read: no zombie item').toEqual(['a1', 'b1']);
    expect(r2, 'R#2 (sealed version, through the shared entry) equals a fresh read').toEqual(fresh);
    expect(first.ok && first.value, 'R#1 equals a fresh read').toEqual(fresh);
  });
});

/** A generation of its own (a Lance dataset in a temp folder) and the connection to open it again. */
async function generation(): Promise<{ db: lancedb.Connection; raw: Table }> {
  const db = await lancedb.connect(mkdtempSync(path.join(tmpdir(), 'dgcl-tail-cache-')), { readConsistencyInterval: 0 });
  const raw = await db.createEmptyTable('g', EVENT_SCHEMA, { mode: 'create', storageOptions: { new_table_data_storage_version: '2.1' } } as never);
  return { db, raw };
}

/** event_id (and the batch's columns) of every row of `batches`, in order. */
function idsOf(batches: readonly arrow.RecordBatch[]): { ids: string[]; columns: string[] } {
  const ids: string[] = [];
  for (const b of batches) for (const r of rowsFromArrow({ numRows: b.numRows, getChild: (n: string) => b.getChild(n) } as unknown as arrow.Table)) ids.push(r.event_id);
  return { ids, columns: [...new Set(batches.flatMap((b) => b.schema.fields.map((f) => f.name)))].sort() };
}

describe('the tail cache: concurrent reads of one entry on a real generation', () => {
  const X = ['event_id', 'item_id', 'item_seq'];
  const Y = ['event_id', 'item_seq', 'event_type'];

  it.each(['lands', 'fails'] as const)(
    'a read paused mid-learning (its take then %s), a longer read chained on it, a forget, a read of an older version, a column switch: each equals a fresh read of its version',
    async (outcome) => {
      const { db, raw } = await generation();
      const pausedTake = new Pause();
      let pauseNext = false;
      const tap: TableTap = {
        async beforeRead() {
          if (!pauseNext) return;
          pauseNext = false;
          await pausedTake.hit();
          if (outcome === 'fails') throw new Error('simulated: the take failed');
        },
      };
      const wrap = tableTapper(tap);
      const latest = wrap(raw, 'g');
      const versions: number[] = [];
      const commit = async (c: number) => {
        await raw.add(rowsToArrow([...rowsOf(createBatch(`i${c}`), c), ...rowsOf(stepBatch(`i${c % 2}`, c), `s${c}`)]) as never);
        versions.push(await raw.version());
      };
      const at = async (v: number): Promise<Table> => {
        const t = await db.openTable('g');
        await t.checkout(v);
        return wrap(t, 'g');
      };
      /** What a fresh read of `t` (all rows, in offset order) returns. */
      const fresh = async (t: Table, cols: readonly string[]) => idsOf((await t.query().select([...cols]).toArrow()).batches);
      for (let c = 0; c < 4; c++) await commit(c);
      const v4 = versions[3]!;
      const cache = new TailCache();

      // r1: latest (4 commits), paused at its take.
      pauseNext = true;
      const r1 = settle(cache.rows(latest, 'g', X).then((r) => r.batches));
      await pausedTake.reached.promise;
      // Two more commits; r2 (latest: 6 commits, another handle) chains on r1's learning.
      await commit(4);
      await commit(5);
      const other = wrap(await db.openTable('g'), 'g');
      const r2 = settle(cache.rows(other, 'g', X).then((r) => r.batches));
      // A read elsewhere forgets the generation (its layout check failed); r3 reads an older
      // (sealed) version into a new entry, r4 switches the column set of the name's entry.
      cache.forget('g');
      const v2Handle = await at(versions[1]!);
      expect(idsOf((await cache.rows(v2Handle, 'g', X)).batches), 'r3 (version of 2 commits, new entry)').toEqual(await fresh(v2Handle, X));
      expect(idsOf((await cache.rows(latest, 'g', Y)).batches), 'r4 (other columns, latest)').toEqual(await fresh(latest, Y));
      const v3Handle = await at(versions[2]!);
      expect(idsOf((await cache.rows(v3Handle, 'g', Y)).batches), 'r4b (other columns, a version below what r4 learned)').toEqual(await fresh(v3Handle, Y));

      pausedTake.release();
      const [one, two] = [await r1, await r2];
      const v4Handle = await at(v4);
      if (outcome === 'lands') {
        expect(one.ok && idsOf(one.value), 'r1 (4 commits) after r2 extended its entry').toEqual(await fresh(v4Handle, X));
      } else {
        expect(one.ok, 'r1 fails with its take').toBe(false);
      }
      expect(two.ok && idsOf(two.value), 'r2 (6 commits), learned after r1').toEqual(await fresh(other, X));
      // The name's entry is r4's (columns Y); a read of X at 4 commits starts a new one.
      expect(idsOf((await cache.rows(v4Handle, 'g', X)).batches), 'r5 (X again, version of 4 commits)').toEqual(await fresh(v4Handle, X));
    },
  );
});
