/**
 * A point read of one item checks the item's marker before its listing and after its read
 * (guard `point-read-marker-check`, lib/log/read/reader.ts `markerHeld`): an item that began with
 * another writer meanwhile may have batches the read took at different moments, in a generation
 * the listing did not show, or in the base, read at its latest version, through a merge. A
 * process that cannot read the log's coordination store reads without the check. Real Lance on a
 * local root; pauses in the reader's table calls give the same interleaving on every run.
 */
import { describe, expect, it } from 'vitest';
import type { Ack, ItemState } from '../lib/types.ts';
import { Pause, raceFixture } from './support/race-kit.ts';
const { setup } = raceFixture(60_000);
const step = (itemId: string, index: number) => ({ itemId, runId: 'r', ...(index === 0 ? { create: {} } : {}), step: { name: `s${index}`, index }, set: { [`f${index}`]: index } });
const done = { itemId: 'x', runId: 'r', terminal: 'completed' as const };
const view = (st: ItemState) => ({ status: st.status, fields: Object.keys(st.fields).sort(), lastSeq: st.lastSeq });
/** x's whole-batch states after its step 0, step 1 and completion. */
const states = (a0: Ack, a1: Ack, a2: Ack) => [
  { status: 'in_progress', fields: ['f0'], lastSeq: a0.lastSeq },
  { status: 'in_progress', fields: ['f0', 'f1'], lastSeq: a1.lastSeq },
  { status: 'completed', fields: ['f0', 'f1'], lastSeq: a2.lastSeq },
];

describe('a point read while the item moves to a writer whose generation its listing did not show', () => {
  it("shows the item after one of its batches, not the listed generation's later batch alone", async () => {
    const s = setup();
    const B = s.open({ slot: 1, slots: 2, owner: 'b', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const [a0] = await B.log.append([step('x', 0)]); // in B's live generation
    const held = new Pause();
    const R = s.open({ slot: 0, slots: 2, owner: 'r', tableTap: { beforeCount: async (name) => void (name === 's01-e000001-g000001' && !held.reached.settled && (await held.hit())) } });
    const read = R.log.fold('x');
    await held.reached.promise; // listed: B's generation only
    // x's step 1 goes through A (a generation made now), its completion through B.
    const A = s.open({ slot: 0, slots: 2, owner: 'a', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const [a1] = await A.log.append([step('x', 1)]);
    const [a2] = await B.log.append([done]);
    expect([a0!.duplicate, a1!.duplicate, a2!.duplicate]).toEqual([false, false, false]);
    held.release();
    const x = view(await read);
    expect(states(a0!, a1!, a2!), `the read answered ${JSON.stringify(x)}`).toContainEqual(x);
  });
});

describe('a point read of a merged log while the item moves and its later batch is merged into the base', () => {
  it('shows the item after one of its batches', async () => {
    const s = setup();
    const W0 = s.open({ slot: 0, slots: 3, owner: 'w0', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const [a0] = await W0.log.append([step('x', 0)]);
    await W0.log.close(); // merged into the base: the log has no generation
    const held = new Pause();
    const R = s.open({ slot: 2, slots: 3, owner: 'r', tableTap: { beforeRead: async (name) => void (name === 'base' && !held.reached.settled && (await held.hit())) } });
    const read = R.log.fold('x');
    await held.reached.promise; // listed: nothing live
    const A = s.open({ slot: 0, slots: 3, owner: 'a', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const B = s.open({ slot: 1, slots: 3, owner: 'b', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const [a1] = await A.log.append([step('x', 1)]);
    const [a2] = await B.log.append([done]);
    await B.log.close(); // B's generation merged into the base; A's stays live
    held.release();
    const x = view(await read);
    expect(states(a0!, a1!, a2!), `the read answered ${JSON.stringify(x)}`).toContainEqual(x);
  });
});
