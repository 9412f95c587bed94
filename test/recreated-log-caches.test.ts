/**
 * A log deleted and made again at the same place, read by a long-lived reader: the caches a
 * log-id change clears stay cleared. A read in flight across another read's clear (noteLogId changed) put back
 * what it fetched of the OLD log into the caches the clear emptied (here the seal cache: readSeal
 * sets it when its GET answers). Later reads of the new log (same id, no clear) took the old
 * log's seal of a reused epoch name and read its generation at the old version: an acked batch
 * of the new log was missing.
 */
import { promises as fs } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createBatch } from './support/batches.ts';
import { Pause, raceFixture, settle, sharedLeases, tempRoot, testLog, withFreshReader } from './support/race-kit.ts';

const { setup, keep } = raceFixture(60_000);
const names = async (log: { items(): Promise<{ items: { itemId: string }[] }> }) => (await log.items()).items.map((i) => i.itemId).sort();
const noMerge = { beforeMergeStep: (step: string) => { if (step === 'read') throw new Error('merge held off (test)'); } };

describe('a read in flight across a log-id change', () => {
  it('does not refill the seal cache with the old log\'s seal: later reads of the new log see every acked batch', async () => {
    const { open, root, leases, clock } = setup();
    // The old log: epoch s00-e000001 sealed at one commit (its generation left unmerged).
    const W1 = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, hooks: noMerge });
    await W1.log.append([createBatch('a')]);
    await W1.log.close();
    const R = open({ slots: 1 }); // long-lived reader
    // R's first read (#1) lists the old log and GETs its seal: held after the GET answered.
    const hold = new Pause();
    let held = false;
    R.objects.tap.after = async (op, key) => {
      if (op === 'get' && key.includes('/seal.') && !held) { held = true; await hold.hit(); }
    };
    const read1 = settle(names(R.log));
    await hold.reached.promise;
    // The log is deleted with its lease records and made again: s00-e000001 again, two commits.
    await fs.rm(R.log.uri, { recursive: true, force: true });
    await fs.rm(`${root}/.dgcl`, { recursive: true, force: true });
    const leases2 = keep.store(sharedLeases(tempRoot(), clock));
    const F = keep.log(testLog({ root, leases: leases2, clock, slots: 1, slot: 0, mergeEveryCommits: 1000, hooks: noMerge }));
    await F.log.append([createBatch('x')]);
    const [ackY] = await F.log.append([createBatch('y')]);
    await F.log.close();
    expect(ackY!.duplicate, 'y is a new acked checkpoint of the new log').toBe(false);
    const fresh = await withFreshReader(root, leases2, clock, (r) => names(r));
    const read2 = await settle(names(R.log)); // lists the new id: clears the caches
    hold.release();
    const r1 = await read1;
    const read3 = await settle(names(R.log));
    const read4 = await settle(names(R.log));
    expect(fresh).toEqual(['x', 'y']);
    expect(read2.ok && read2.value).toEqual(['x', 'y']);
    expect(read3.ok && read3.value, 'read #3 starts after y was acked and after read #2 saw it').toEqual(['x', 'y']);
  });
});
