/**
 * A generation made ahead (`makeAhead`, `generationTable`, `retireUnused`) and close(): close()
 * awaits and retires a made-ahead generation that no commit took, also when the slot was dropped
 * while it was being made or its making rejected after its marker landed.
 *
 *  - A generation being made ahead when the slot is dropped (a failed commit ends the epoch;
 *    likewise a fenced or sealed background merge, or a lost lease) was forgotten with the slot:
 *    nobody awaited or retired it. `close()` could return while it was still being made (writes
 *    after close()), and its dataset and `gen.` marker stayed after a clean close (an invisible
 *    generation of a sealed epoch, or listed empty in its seal, until a maintenance pass swept or
 *    merged it), with its handle and fsync state in LanceTables.
 *  - `retireUnused` skipped a made-ahead generation whose making rejected, claiming it left "at
 *    most a dataset folder without its marker". A making rejects after its marker landed too (the
 *    marker PUT's answer lost, or the fsync round failed): close() then sealed the epoch with that
 *    empty generation listed, and it stayed for readers and the maintainer.
 *  - A takeover racing a making in flight (its marker landing after the seal): no reader waits or
 *    fails, every ack visible, the maintainer sweeps the generation; a reader that listed the
 *    made-ahead generation while close() retires it starts over.
 * Real Lance on a local root; pauses are gates in the tapped stores, no sleeps.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { summarize } from '../lib/fold.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { expectDurable, Gate, Pause, raceFixture, settle, startRead, withFreshReader, type TestLog } from './support/race-kit.ts';

const TTL = 60_000;
const META = '_dgcl/meta';

const { setup } = raceFixture(TTL);

/** What of generation `gen` is on disk: its `gen.` marker, its dataset folder. */
/** W's first batch acked (generation 1 made): its epoch, the name of its next generation, the acks so far. */
async function firstAck(W: TestLog) {
  const acks: Ack[] = [...(await W.log.append([createBatch('a')]))];
  const epoch = W.log.writerEpoch!;
  return { acks, epoch, next: `${epoch}-g000002` };
}

function onDisk(t: TestLog, gen: string) {
  return {
    marker: existsSync(path.join(t.log.uri, META, `gen.${gen}`)),
    dataset: existsSync(path.join(t.log.uri, '_dgcl', 'shards', `${gen}.lance`)),
  };
}

describe('a generation being made ahead when the slot is dropped', () => {
  it('a failed commit ends the epoch during the making: close() waits for it and retires it, no dataset or marker stays', async () => {
    const { root, clock, leases, open } = setup();
    let loseNextAdd: string | null = null;
    const W = open({
      mergeEveryCommits: 6, // made ahead at the 2nd commit of a generation
      tableTap: {
        async add(name, run) {
          const r = await run();
          if (name === loseNextAdd) {
            loseNextAdd = null;
            throw new Error('connection reset (the commit landed)');
          }
          return r;
        },
      },
    });
    const { acks, epoch, next } = await firstAck(W);
    const making = new Pause();
    const landed = new Gate();
    W.objects.tap.before = async (op, key) => {
      if (op === 'putIfAbsent' && key === `${META}/gen.${next}`) await making.hit();
    };
    W.objects.tap.after = (op, key) => {
      if (op === 'putIfAbsent' && key === `${META}/gen.${next}`) landed.resolve();
    };
    acks.push(...(await W.log.append([createBatch('b')]))); // generation 2 is made ahead: held at its marker
    await making.reached.promise;

    // The next commit's answer is lost: the epoch ends (sealed by W itself) while the making is held.
    loseNextAdd = `${epoch}-g000001`;
    const failed = await settle(W.log.append([stepBatch('a', 1)]));
    expect(failed.ok).toBe(false);
    expect(W.log.writerEpoch).toBeNull();
    making.release();
    await W.log.close();
    await landed.promise; // the making's marker has landed (before or after close returned)

    expect(onDisk(W, next), `generation ${next} made ahead by W, never committed to, after W's clean close()`).toEqual({ marker: false, dataset: false });
    await expectDurable(root, leases, clock, acks, 'after W closed');
  });
});

describe('close() and a made-ahead generation whose making rejected after its marker landed', () => {
  it('the marker PUT answer is lost: close() retires the empty generation, none of the epoch stays', async () => {
    const { root, clock, leases, open } = setup();
    const W = open({ mergeEveryCommits: 6 });
    const { acks, epoch, next } = await firstAck(W);
    const landed = new Gate();
    W.objects.tap.after = (op, key) => {
      if (op === 'putIfAbsent' && key === `${META}/gen.${next}`) {
        landed.resolve();
        throw new Error('timeout (the marker landed)');
      }
    };
    acks.push(...(await W.log.append([createBatch('b')]))); // generation 2 made ahead: its making rejects
    await landed.promise;
    await W.log.close();

    const left = await withFreshReader(root, leases, clock, async (r) => (await r.stats()).shards.filter((s) => s.name.startsWith(epoch)));
    expect(left.map((s) => `${s.name} rows ${s.rows} sealed at ${s.sealedAtVersion}`), 'generations of W\'s epoch after its clean close()').toEqual([]);
    expect(onDisk(W, next)).toEqual({ marker: false, dataset: false });
    await expectDurable(root, leases, clock, acks, 'after W closed');
  });
});

describe('a made-ahead generation beside takeovers and readers', () => {
  it('a takeover seals the epoch while the making is in flight: its marker lands after the seal, nothing waits, the maintainer sweeps it', async () => {
    const { root, clock, leases, open } = setup();
    const W = open({ slots: 2, mergeEveryCommits: 6 });
    const { acks, epoch, next } = await firstAck(W);
    const slot = Number(/^s(\d+)-/.exec(epoch)![1]);
    const making = new Pause();
    W.objects.tap.before = async (op, key) => {
      if (op === 'putIfAbsent' && key === `${META}/gen.${next}`) await making.hit();
    };
    acks.push(...(await W.log.append([createBatch('b')])));
    await making.reached.promise;

    // W's lease lapses; B takes the slot and seals W's epoch (generation 1 only).
    clock.advance(TTL + 1);
    const B = open({ slots: 2, slot });
    acks.push(...(await B.log.append([stepBatch('a', 1)])));
    making.release();
    // W's next commit goes to generation 1 (fenced): refused, nothing acked.
    const late = await settle(W.log.append([stepBatch('b', 1)]));
    expect(late.ok).toBe(false);
    expect(onDisk(W, next).marker).toBe(true); // the zombie generation landed, after the seal

    const { result } = startRead(root, leases, clock, async (r) => {
      const states = await r.allStates({ fields: false });
      return { items: (await r.items()).items, states: states.map(summarize) };
    });
    const read = await result;
    expect(read.ok && read.value.items).toEqual(read.ok && read.value.states);
    await expectDurable(root, leases, clock, acks, 'after the takeover');
    expect(onDisk(W, next), 'swept by the maintainer').toEqual({ marker: false, dataset: false });
  });

  it('a reader that listed the made-ahead generation while close() retires it starts over and sees every ack', async () => {
    const { root, clock, leases, open } = setup();
    const W = open({ mergeEveryCommits: 6 });
    const { acks, next } = await firstAck(W);
    const made = new Gate();
    W.objects.tap.after = (op, key) => {
      if (op === 'putIfAbsent' && key === `${META}/gen.${next}`) made.resolve();
    };
    acks.push(...(await W.log.append([createBatch('b')]))); // generation 2 made ahead
    await made.promise;
    // close() merges generation 1, then is held before it retires generation 2.
    const retiring = new Pause();
    W.objects.tap.before = async (op, key) => {
      if (op === 'putIfAbsent' && key === `${META}/retired.${next}`) await retiring.hit();
    };

    const closing = W.log.close();
    await retiring.reached.promise;
    // R lists generation 2 (visible, empty), reads it, and is held before its check of the layout.
    const R = open({});
    const checking = new Pause();
    let lists = 0;
    R.objects.tap.before = async (op, key) => {
      if (op === 'list' && key === META && ++lists === 2) await checking.hit();
    };
    let listedNext = false;
    const reading = settle(
      R.log.allStates({ fields: false }).then((states) => states.map((s) => s.itemId)),
    );
    R.objects.tap.after = (op, key, result) => {
      if (op === 'list' && key === META && lists === 1) listedNext = (result as string[]).includes(`gen.${next}`);
    };
    await checking.reached.promise;
    expect(listedNext).toBe(true);
    retiring.release();
    await closing;
    checking.release();
    const got = await reading;
    expect(got.ok && got.value).toEqual(['a', 'b']);
    expect(lists, 'R started over').toBeGreaterThan(2);
    await expectDurable(root, leases, clock, acks, 'after close');
  });
});
