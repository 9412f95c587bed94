/**
 * A writer's point reads (fold, trajectory, fields, latestEvents) of its own unmerged
 * generations take the rows it keeps of its confirmed commits instead of reading the generation
 * (lib/log/read/reader.ts `ownRows`): each such read cost a Lance take per column and fragment. Only
 * for a generation made in the log listed, without blob bytes, and not for the items of a commit
 * landing; else storage.
 * Real Lance datasets and the local lease store throughout.
 */
import { promises as fs } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { CheckpointLog } from '../lib/api.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { landUnconfirmed, Pause, raceFixture, settle, sharedLeases, tempRoot, testLog, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const { setup } = raceFixture(TTL);
const blob = (s: string) => ({ $blob: Buffer.from(s).toString('base64') });
const outcome = (p: Promise<unknown>) => p.catch((e: { code?: string; message?: string }) => `${e.code}: ${e.message}`);

/** Every point read of `id`: without blob bytes first, then those that inline blobs. */
function pointReads(log: CheckpointLog, id: string): { plain: Array<() => Promise<unknown>>; inline: Array<() => Promise<unknown>> } {
  return {
    plain: [
      () => log.fold(id),
      () => log.trajectory(id),
      () => log.fields(id),
      () => log.fields(id, { names: ['a.x', 'missing'] }),
      () => log.fields(id, { prefix: 'a.' }),
      () => log.latestEvents(id, { limit: 1000 }),
      () => log.latestEvents(id, { limit: 3, eventTypes: ['STEP_COMPLETED', 'FIELD_APPEND'] }),
      () => log.latestEvents(id, { limit: 4, beforeSeq: 5 }),
    ],
    inline: [() => log.fields(id, { names: ['ab', 'log'], inlineBytes: 64 }), () => log.latestEvents(id, { limit: 5, eventTypes: ['FIELD_APPEND'], inlineBytes: 64 })],
  };
}

async function readAll(log: CheckpointLog, ids: readonly string[], which: 'plain' | 'inline'): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const id of ids) for (const q of pointReads(log, id)[which]) out.push(await outcome(q()));
  return out;
}

describe("a writer's point reads of its own generations", () => {
  it('come from its memory, read none of its generations, and equal a fresh reader\'s', async () => {
    const { open, root, leases, clock } = setup();
    const read: Record<string, string[]> = { w0: [], w1: [] };
    const tap = (who: string) => ({ beforeRead: (name: string) => void read[who]!.push(name) });
    const W = [open({ slot: 0, slots: 2, mergeEveryCommits: 1000, tableTap: tap('w0') }), open({ slot: 1, slots: 2, mergeEveryCommits: 1000, tableTap: tap('w1') })];
    const items = ['i-0', 'i-1', 'i-2'];
    // Items change hands (each step on the other writer), so an item's rows lie in both
    // writers' generations: each writer reads its own from memory and the other's from storage.
    for (const [k, id] of items.entries()) await W[k % 2]!.log.append([createBatch(id, { set: { 'a.x': `x of ${id}`, ab: blob(`bytes of ${id}`) } })]);
    for (let step = 1; step <= 3; step++) {
      for (const [k, id] of items.entries()) {
        await W[(k + step) % 2]!.log.append([stepBatch(id, step, { append: { log: [`s${step}`, blob(`part ${step}`)] }, set: { 'a.x': `x${step}` } })]);
      }
    }
    const own = await Promise.all(W.map(async (w) => (await w.log.stats()).shards.map((s) => s.name).filter((n) => n.startsWith(`s0${W.indexOf(w)}-`))));
    expect(own.map((g) => g.length), 'one live generation each').toEqual([1, 1]);
    const ids = [...items, 'never-written'];
    const fresh = await withFreshReader(root, leases, clock, async (r) => ({ plain: await readAll(r, ids, 'plain'), inline: await readAll(r, ids, 'inline') }));
    read.w0 = [];
    read.w1 = [];
    for (const [k, w] of W.entries()) expect(await readAll(w.log, ids, 'plain'), `w${k}'s reads`).toEqual(fresh.plain);
    expect(read.w0.filter((n) => own[0]!.includes(n)), "w0 read nothing of its own generation").toEqual([]);
    expect(read.w1.filter((n) => own[1]!.includes(n)), "w1 read nothing of its own generation").toEqual([]);
    expect(read.w0, "w0 read w1's generation from storage").toContain(own[1]![0]);
    // Blob bytes are not kept: reads that inline them read the writer's own generation too.
    for (const [k, w] of W.entries()) expect(await readAll(w.log, ids, 'inline'), `w${k}'s inlined reads`).toEqual(fresh.inline);
    expect(read.w0, 'inlined blobs came from storage').toContain(own[0]![0]);
    expect(fresh.plain.filter((x) => typeof x === 'string'), 'only the unwritten item is missing').toHaveLength(pointReads(W[0]!.log, 'x').plain.length);
  });

  // The commit is still landing, so its item is read from storage (the landing mark), where the
  // seal shows it; the writer's memory of the sealed generation answers for the other items.
  it('read a generation sealed by a takeover at its seal, which holds a commit the writer never confirmed', async () => {
    const { open, root, leases, clock } = setup();
    const W = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, owner: 'w' });
    await W.log.append([createBatch('x')]);
    // W's next commit lands; its epoch check waits. Meanwhile W's lease runs out, B takes the
    // slot and seals W's epoch at what landed: the commit is in the seal, not in W's memory.
    const held = await landUnconfirmed(W, stepBatch('x', 1));
    clock.advance(2 * TTL);
    const B = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, owner: 'b' });
    await B.log.append([createBatch('y')]);
    const fresh = await withFreshReader(root, leases, clock, (r) => r.trajectory('x'));
    expect(fresh.map((e) => e.stepName), 'the sealed commit is visible').toContain('step1');
    expect(await W.log.trajectory('x'), "W reads what every reader reads, not what it confirmed").toEqual(fresh);
    held.release();
    const answer = await held.answer;
    expect(answer.ok ? 'acked' : (answer.error as { code?: string }).code).toBe('FENCED');
    expect(await W.log.trajectory('x')).toEqual(fresh);
  });

  it('of an item whose commit is landing come from storage; of other items, from memory still', async () => {
    const { open, root, leases, clock } = setup();
    const names: string[] = [];
    const W = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, owner: 'w', tableTap: { beforeRead: (n) => void names.push(n) } });
    await W.log.append([createBatch('x'), createBatch('y')]);
    const [gen] = (await W.log.stats()).shards.map((s) => s.name);
    const held = await landUnconfirmed(W, stepBatch('x', 1));
    names.length = 0;
    const y = await W.log.fold('y');
    expect(names.filter((n) => n === gen), 'y (not landing) from memory').toEqual([]);
    const x = await W.log.trajectory('x');
    expect(names.filter((n) => n === gen).length, 'x (landing) from storage: the generation\'s item ids learned, then x\'s rows taken').toBe(2);
    const fresh = await withFreshReader(root, leases, clock, async (r) => ({ x: await r.trajectory('x'), y: await r.fold('y') }));
    expect(x).toEqual(fresh.x);
    expect(y).toEqual(fresh.y);
    held.release();
    expect((await held.answer).ok).toBe(true);
    names.length = 0;
    expect(await W.log.trajectory('x'), 'confirmed: from memory again').toEqual(await withFreshReader(root, leases, clock, (r) => r.trajectory('x')));
    expect(names.filter((n) => n === gen)).toEqual([]);
  });

  it('of a generation whose name a log made again reuses come from storage (the log id differs)', async () => {
    const { open, root, clock } = setup();
    const W = open({ slot: 0, slots: 1, mergeEveryCommits: 1000 });
    await W.log.append([createBatch('x')]);
    const [gen] = (await W.log.stats()).shards.map((s) => s.name);
    await fs.rm(W.log.uri, { recursive: true, force: true });
    await fs.rm(`${root}/.dgcl`, { recursive: true, force: true }); // the lease records too
    const leases2 = sharedLeases(tempRoot(), clock);
    const F = testLog({ root, leases: leases2, clock, slots: 1, slot: 0, mergeEveryCommits: 1000 });
    const [ack] = await F.log.append([createBatch('y')]);
    try {
      expect((await F.log.stats()).shards.map((s) => s.name), 'the new log reuses the name').toEqual([gen]);
      // W's writer has not noticed (no commit since): it still keeps x's rows under that name.
      expect((await W.log.trajectory('y')).map((e) => e.eventId), "W reads the new log's y").toEqual(ack!.eventIds);
      expect(await outcome(W.log.fold('x')), 'and no x (it went with the old log)').toMatch(/^NOT_FOUND/);
    } finally {
      await F.log.close();
      await leases2.close();
    }
  });
});

// Between a commit's add and its confirmation the commit is visible to every storage read at the
// latest version, in any process, but was not yet in the writer's memory, so a point read of the
// item in the writer's process that started after such a read ended showed less (I3); within the
// process too (its whole-log reads read the generation from storage). Fixed: the writer marks the
// commit's items as landing from just before its add until their rows are kept (or the epoch
// ends), and reads of those items in that generation go to storage meanwhile.
const steps = (t: Array<{ stepName?: string | null }>) => t.map((e) => e.stepName);

describe("a writer's point reads of a commit landed but not yet confirmed (I3 across processes)", () => {
  it("W's own read that starts after a fresh reader showed W's landed commit shows it too", async () => {
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

describe("a writer's point reads of a commit landed but not yet confirmed, within one process (a whole-log read, then a point read)", () => {
  it("W's fold that starts after W's allStates() showed its landed commit shows it too", async () => {
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

// The paths where a writer's commit lands but is never kept in memory (the landing mark above).
// Each compares the writer's point reads with a fresh reader's, during and after, and checks the
// fast path is back once a new epoch commits (the mark is not left set).
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(cond()).toBe(true);
}

describe("a writer's point reads of commits that land and are never kept", () => {
  it('a group of two items whose add lands, then throws: reads equal a fresh reader during and after; the next epoch reads from memory', async () => {
    const { open, root, leases, clock } = setup();
    const names: string[] = [];
    const landed = new Pause();
    let fail = false;
    const W = open({
      slot: 0,
      slots: 1,
      mergeEveryCommits: 1000,
      owner: 'w',
      tableTap: {
        beforeRead: (n) => void names.push(n),
        add: async (_name, run) => {
          const r = await run();
          if (fail) {
            await landed.hit();
            throw new Error('answer lost');
          }
          return r;
        },
      },
    });
    await W.log.append([createBatch('x'), createBatch('y'), createBatch('z')]);
    fail = true;
    const late = settle(W.log.append([stepBatch('x', 1), stepBatch('y', 1)]));
    await landed.reached.promise;
    fail = false;
    const fresh = await withFreshReader(root, leases, clock, async (r) => ({ x: await r.trajectory('x'), y: await r.trajectory('y'), z: await r.fold('z') }));
    expect(steps(fresh.x)).toContain('step1');
    expect(await W.log.trajectory('x')).toEqual(fresh.x);
    expect(await W.log.trajectory('y')).toEqual(fresh.y);
    expect(await W.log.fold('z')).toEqual(fresh.z);
    landed.release();
    expect((await late).ok).toBe(false);
    const after = await withFreshReader(root, leases, clock, async (r) => ({ x: await r.trajectory('x'), y: await r.trajectory('y') }));
    expect(await W.log.trajectory('x')).toEqual(after.x);
    expect(await W.log.trajectory('y')).toEqual(after.y);
    expect(steps(after.x), 'the landed commit stays (sealed in)').toEqual(steps(fresh.x));
    // A new epoch: its generation's reads come from memory again (no landing mark left behind).
    const acks = await W.log.append([stepBatch('x', 2)]);
    const epoch = W.log.writerEpoch!;
    const gen = (await W.log.stats()).shards.map((s) => s.name).find((n) => n.startsWith(`${epoch}-g`));
    names.length = 0;
    const x = await W.log.trajectory('x');
    expect(x.at(-1)!.itemSeq).toBe(acks[0]!.lastSeq);
    expect(x).toEqual(await withFreshReader(root, leases, clock, (r) => r.trajectory('x')));
    expect(gen, 'the new epoch\'s first generation is live').toBe(`${epoch}-g000001`);
    expect(names.filter((n) => n === gen), 'read from memory').toEqual([]);
  });

  it('a background merge drops the slot (fenced, not yet sealed) while a commit is landing: reads equal a fresh reader', async () => {
    const { open, root, leases, clock } = setup();
    const W = open({ slot: 0, slots: 1, mergeEveryCommits: 2, owner: 'w' });
    await W.log.append([createBatch('x')]);
    // The second commit freezes generation 1; its merge reads the seal first: held there.
    const mergeSeal = new Pause();
    let holdSeal = true;
    W.objects.tap.before = async (op, key) => {
      if (op === 'get' && key.includes('/seal.') && holdSeal) {
        holdSeal = false;
        await mergeSeal.hit();
      }
    };
    await W.log.append([stepBatch('x', 1)]);
    await mergeSeal.reached.promise;
    // The next commit (into the made-ahead generation) lands; its epoch check is held.
    const checking = new Pause();
    let checks = 0;
    W.leases.tap.before = async (op) => {
      if (op === 'assertCurrent' && ++checks === 1) await checking.hit();
    };
    const late = settle(W.log.append([stepBatch('x', 2)]));
    await checking.reached.promise;
    // B takes the slot; its fence is held (W's epoch still reads as live at latest).
    clock.advance(2 * TTL);
    const B = open({ slot: 0, slots: 1, mergeEveryCommits: 1000, owner: 'b' });
    const fencing = new Pause();
    B.objects.tap.before = async (op, key) => {
      if (key.includes('/fence.') && (op === 'put' || op === 'putIfAbsent')) await fencing.hit();
    };
    const bAppend = settle(B.log.append([createBatch('y')]));
    await fencing.reached.promise;
    // W's merge goes on: no seal, its epoch check fails (fenced): it drops the slot.
    mergeSeal.release();
    await until(() => W.log.writerEpoch === null);
    const fresh = await withFreshReader(root, leases, clock, (r) => r.trajectory('x'));
    expect(steps(fresh)).toContain('step2');
    expect(await W.log.trajectory('x')).toEqual(fresh);
    expect((await W.log.fold('x')).lastSeq).toBe(fresh.at(-1)!.itemSeq);
    fencing.release();
    expect((await bAppend).ok).toBe(true);
    W.leases.tap.before = undefined;
    checking.release();
    const answer = await late;
    expect(answer.ok ? 'acked' : (answer.error as { code?: string }).code).toBe('FENCED');
    const after = await withFreshReader(root, leases, clock, (r) => r.trajectory('x'));
    expect(steps(after)).toEqual(steps(fresh));
    expect(await W.log.trajectory('x')).toEqual(after);
  });
});
