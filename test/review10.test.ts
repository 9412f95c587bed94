/**
 * Adversarial review 10 (56da89a..d9929fe: the reader's tail cache, lib/log/tail-cache.ts;
 * projection fragment documents via putIfAbsent). Real Lance datasets in temp folders, the real
 * local store and lease store; schedules forced with promises (test/support/race-kit.ts).
 *
 * The schedules below are the ones the review tried to break the cache with. None returned a row
 * a fresh read would not (or missed one); they stay as tests because each fails if the cache
 * stops cutting what it learned at the reading version's row count, or shares an entry across
 * column sets or after a forget.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import type * as arrow from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import { shardName } from '../lib/log/layout.ts';
import { SUMMARY_SCAN_COLUMNS, SummaryVisitor } from '../lib/log/summary.ts';
import { TailCache } from '../lib/log/tail-cache.ts';
import type { Table } from '../lib/log/tables.ts';
import { EVENT_SCHEMA, rowsFromArrow, rowsToArrow } from '../lib/schema.ts';
import { rowsOf } from '../bench/common.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { Pause, raceFixture, settle, tableTapper, type TableTap } from './support/race-kit.ts';

const TTL = 10_000;
const META = '_dgcl/meta';
const { setup } = raceFixture(TTL);

describe('review10: a zombie commit above the seal, learned by one read, while another reads the sealed version', () => {
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
    const scan = () => R.log.scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor());

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
    const fresh = await F.log.scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor());
    expect(fresh.map((a) => a.itemId).sort(), 'the fresh read: no zombie item').toEqual(['a1', 'b1']);
    expect(r2, 'R#2 (sealed version, through the shared entry) equals a fresh read').toEqual(fresh);
    expect(first.ok && first.value, 'R#1 equals a fresh read').toEqual(fresh);
  });
});
