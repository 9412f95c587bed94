/**
 * Review 39 (of f10c00c, a writer's point reads of its own generations from memory), #1
 * (Medium): between a commit's add and its confirmation the commit is visible to every storage
 * read at the latest version, in any process, but was not yet in the writer's memory, so a point
 * read of the item in the writer's process that started after such a read ended showed less (I3);
 * within the process too (its whole-log reads read the generation from storage). Fixed: the
 * writer marks the commit's items as landing from just before its add until their rows are kept
 * (or the epoch ends), and reads of those items in that generation go to storage meanwhile.
 */
import { describe, expect, it } from 'vitest';
import { createBatch, stepBatch } from './support/batches.ts';
import { landUnconfirmed, raceFixture, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const { setup } = raceFixture(TTL);
const steps = (t: Array<{ stepName?: string | null }>) => t.map((e) => e.stepName);

describe('review39 #1: a commit landed but not yet confirmed (I3 across processes)', () => {
  it("a fresh reader shows W's landed commit; W's own read that starts after it ended does not", async () => {
    const { open, root, leases, clock } = setup();
    const W = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, owner: 'w' });
    await W.log.append([createBatch('x')]); // the generation's first confirmed commit: W keeps its rows
    // W's next commit to the same generation lands; its fsync + epoch check are held.
    const held = await landUnconfirmed(W, stepBatch('x', 1));
    // Another process reads x (the generation live, at its latest version): it shows step1.
    const fresh = await withFreshReader(root, leases, clock, (r) => r.trajectory('x'));
    expect(steps(fresh), 'a reader of any other process shows the landed commit').toContain('step1');
    // A read in W's process that starts after that read ended (I3: shows at least what it showed).
    const own = await W.log.trajectory('x');
    const ownFold = await W.log.fold('x');
    held.release();
    expect((await held.answer).ok, 'the commit is then acked').toBe(true);
    expect(steps(own), "W's later read shows what the earlier read showed (I3)").toEqual(steps(fresh));
    expect(ownFold.lastSeq, "W's fold too").toBe(fresh[fresh.length - 1]!.itemSeq);
  });
});

describe('review39 #1b: the same, within one process (a whole-log read, then a point read)', () => {
  it("W's allStates() shows its landed commit; W's fold that starts after it ended does not", async () => {
    const { open } = setup();
    const W = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, owner: 'w' });
    await W.log.append([createBatch('x')]);
    const held = await landUnconfirmed(W, stepBatch('x', 1));
    const all = await W.log.allStates(); // reads W's generation from storage, at its latest version
    const before = all.find((s) => s.itemId === 'x')!;
    const after = await W.log.fold('x'); // from W's memory of confirmed commits
    held.release();
    const acked = await held.answer;
    expect(acked.ok, 'the commit is then acked').toBe(true);
    const lastSeq = acked.ok ? acked.value[0]!.lastSeq : -1;
    expect(before.lastSeq, 'allStates showed step1 (landed, not yet confirmed)').toBe(lastSeq);
    expect(after.lastSeq, "W's later fold shows at least what its earlier read showed (I3)").toBe(lastSeq);
  });
});
