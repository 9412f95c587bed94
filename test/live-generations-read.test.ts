/**
 * Reads of live generations while an item's batches go into two of them: a point read as the
 * item's writer rotates to the generation it made ahead (guard `read-newest-first`), a point read
 * as the item moves to another writer (`point-read-marker-check`), listings as the item moves to
 * another writer, or goes through a writer that began after the listing and closed before it
 * ended (`recount-live-generations`). A read that took the first generation
 * before the item's batch went into it, and the second after the item's next batch, would show
 * the later batch without the earlier one. Real Lance on a local root; pauses in the reader's
 * table calls (and a held merge) give the same interleaving on every run.
 */
import { describe, expect, it, vi } from 'vitest';
import { META_DIR } from '../lib/log/layout.ts';
import type { ItemSummary } from '../lib/api.ts';
import type { Ack, ItemState } from '../lib/types.ts';
import { Pause, raceFixture, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const { setup } = raceFixture(TTL);
const G2 = 's00-e000001-g000002';

const step = (itemId: string, index: number) => ({ itemId, runId: 'r', ...(index === 0 ? { create: {} } : {}), step: { name: `s${index}`, index }, set: { [`f${index}`]: index } });
const summary = (s: ItemSummary) => ({ status: s.status, lastSeq: s.lastSeq, stepIndex: s.cursor?.stepIndex ?? null });

/**
 * A listing held at its take of `gen` (after it counted its rows) while `meanwhile` acks x's step 1
 * and then its completion: it must list x after its first batch (the read began then) or after its
 * last, the whole-batch states a fresh read confirms.
 */
async function listingWhile(s: ReturnType<typeof setup>, gen: string, meanwhile: () => Promise<[Ack, Ack]>): Promise<void> {
  const held = new Pause();
  const R = s.open({ slot: 0, slots: 3, owner: 'r', tableTap: { beforeRead: async (name) => void (name === gen && !held.reached.settled && (await held.hit())) } });
  const page = R.log.items();
  await held.reached.promise;
  const [a1, a2] = await meanwhile();
  expect([a1.duplicate, a2.duplicate]).toEqual([false, false]);
  held.release();
  const x = (await page).items.find((i) => i.itemId === 'x');
  expect(x, 'x is listed').toBeDefined();
  const after = await withFreshReader(s.root, s.leases, s.clock, async (r) => summary((await r.items()).items.find((i) => i.itemId === 'x')!));
  expect(after).toEqual({ status: 'completed', lastSeq: a2.lastSeq, stepIndex: 1 });
  const first = { status: 'in_progress', lastSeq: a1.firstSeq - 1, stepIndex: 0 };
  expect([first, after], `the read answered ${JSON.stringify(summary(x!))}`).toContainEqual(summary(x!));
}
const done = { itemId: 'x', runId: 'r', terminal: 'completed' as const };

describe('a point read of a writer rotating to its made-ahead generation', () => {
  it("shows the item's fields after one of its batches, never a later batch's without an earlier one's", async () => {
    const s = setup();
    // The rotated generation's merge is held: it stays live (a retirement would make the read start over).
    const merge = new Pause();
    const W = s.open({ slot: 0, slots: 3, owner: 'w', mergeEveryCommits: 5, mergeIdleMs: 0, cachedItems: 0, hooks: { beforeMergeStep: () => merge.hit() } });
    await W.log.append([step('x', 0)]); // commit 1 of 5 to g1; g2 is made ahead after it
    await vi.waitFor(async () => expect(await W.objects.inner.get(`${META_DIR}/gen.${G2}`)).not.toBeNull(), { timeout: 10_000, interval: 5 });
    for (let i = 0; i < 3; i++) await W.log.append([step(`y${i}`, 0)]); // commits 2-4 to g1

    // The read of x's fields stops before it counts g2's rows.
    const held = new Pause();
    const R = s.open({ slot: 0, slots: 3, owner: 'r', tableTap: { beforeCount: async (name) => void (name === G2 && !held.reached.settled && (await held.hit())) } });
    const read = R.log.fields('x');
    await held.reached.promise;
    // Meanwhile x's step 1 is acked (commit 5 to g1, which rotates), then its step 2 (the first commit to g2).
    const [a1] = await W.log.append([step('x', 1)]);
    const [a2] = await W.log.append([step('x', 2)]);
    expect([a1!.duplicate, a2!.duplicate]).toEqual([false, false]);
    held.release();
    const names = Object.keys((await read).fields).sort();
    expect([['f0'], ['f0', 'f1'], ['f0', 'f1', 'f2']], `the read answered the fields ${JSON.stringify(names)}`).toContainEqual(names);
    merge.release();
  });
});

describe('a point read while an item moves between writers', () => {
  it("shows the item after one of its batches, never its next writer's batch without the previous writer's", async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const B = s.open({ slot: 1, slots: 2, owner: 'b', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const AG = 's00-e000001-g000001';
    const BG = 's01-e000001-g000001';
    await A.log.append([step('x', 0)]);
    await B.log.append([step('y', 0)]);

    // The fold of x takes its rows of A's generation (counted) and stops there; it stops before
    // it counts B's generation too. Meanwhile x's step 1 goes through A, its completion through B.
    const inA = new Pause();
    const beforeB = new Pause();
    const R = s.open({
      slot: 0,
      slots: 2,
      owner: 'r',
      tableTap: {
        beforeRead: async (name) => void (name === AG && !inA.reached.settled && (await inA.hit())),
        beforeCount: async (name) => void (name === BG && !beforeB.reached.settled && (await beforeB.hit())),
      },
    });
    const read = R.log.fold('x');
    await Promise.all([inA.reached.promise, beforeB.reached.promise]);
    const [a1] = await A.log.append([step('x', 1)]);
    const [a2] = await B.log.append([done]);
    expect([a1!.duplicate, a2!.duplicate]).toEqual([false, false]);
    inA.release();
    beforeB.release();
    const view = (st: ItemState) => ({ status: st.status, fields: Object.keys(st.fields).sort(), lastSeq: st.lastSeq });
    const x = view(await read);
    const states = [
      { status: 'in_progress', fields: ['f0'], lastSeq: a1!.firstSeq - 1 },
      { status: 'in_progress', fields: ['f0', 'f1'], lastSeq: a1!.lastSeq },
      { status: 'completed', fields: ['f0', 'f1'], lastSeq: a2!.lastSeq },
    ];
    expect(states, `the read answered ${JSON.stringify(x)}`).toContainEqual(x);
  });
});

describe('a listing while an item moves between writers', () => {
  it("shows the item's batches up to one of its acks, never its next writer's batch without the previous writer's", async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const B = s.open({ slot: 1, slots: 2, owner: 'b', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const AG = 's00-e000001-g000001';
    await A.log.append([step('x', 0)]);
    await B.log.append([step('y', 0)]); // B's generation is live, read after A's

    // The listing stops at its take of A's generation. Meanwhile x's step 1 goes through A, and
    // its completion through B.
    await listingWhile(s, AG, async () => [(await A.log.append([step('x', 1)]))[0]!, (await B.log.append([done]))[0]!]);
  });
});

describe('a listing while a writer that began after it writes an item and closes', () => {
  it('shows none of the item or all of it, not its other writer\'s batch alone', async () => {
    const s = setup();
    const D = s.open({ slot: 0, slots: 3, owner: 'd', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    const B = s.open({ slot: 1, slots: 3, owner: 'b', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    await D.log.append([step('z', 0)]);
    await B.log.append([step('y', 0)]);
    const held = new Pause();
    const R = s.open({ slot: 0, slots: 3, owner: 'r', tableTap: { beforeRead: async (name) => void (name === 's00-e000001-g000001' && !held.reached.settled && (await held.hit())) } });
    const states = R.log.allStates();
    await held.reached.promise;

    // A writer the read's listing did not know writes x's first batch into a new generation; x's
    // next batch goes through B; A closes (its generation merged into the base and retired).
    const A = s.open({ slot: 2, slots: 3, owner: 'a', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    await A.log.append([step('x', 0)]);
    await B.log.append([step('x', 1)]);
    await A.log.close();
    held.release();
    const view = (st: ItemState | undefined) => (st ? { fields: Object.keys(st.fields).sort(), lastSeq: st.lastSeq, violations: st.violations.map((v) => v.kind) } : null);
    const x = view((await states).find((i) => i.itemId === 'x'));
    const after = await withFreshReader(s.root, s.leases, s.clock, async (r) => view((await r.allStates()).find((i) => i.itemId === 'x')));
    expect(after).toEqual({ fields: ['f0', 'f1'], lastSeq: after!.lastSeq, violations: [] });
    expect([null, after], `the read answered ${JSON.stringify(x)}`).toContainEqual(x);
  });
});

describe('a listing while a new writer writes an item of its own', () => {
  it('lists what its listing showed, without starting over', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 3, owner: 'a', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    await A.log.append([step('x', 0)]);
    const held = new Pause();
    const R = s.open({ slot: 0, slots: 3, owner: 'r', tableTap: { beforeRead: async (name) => void (name === 's00-e000001-g000001' && !held.reached.settled && (await held.hit())) } });
    const page = R.log.items();
    await held.reached.promise;
    // A generation the listing did not know appears (its round counts it), holding one item of one writer.
    const C = s.open({ slot: 2, slots: 3, owner: 'c', mergeEveryCommits: 1000, mergeIdleMs: 0 });
    await C.log.append([step('z', 0)]);
    held.release();
    expect((await page).items.map((i) => i.itemId)).toEqual(['x']);
  });
});
