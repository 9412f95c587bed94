/**
 * Review 22: the base count cache (a82331e: `ProjectionCache.fragmentRowsOf`) and the generation
 * made ahead (0c3b5c0: `makeAhead`, `generationTable`, `retireUnused`), with review21's fixes.
 *
 *  - R1: the count of live rows per base fragment is cached by the base version number alone.
 *    A process that listed a log which is then deleted and made again at the same place (the
 *    case docs/design/performance.md names for the coordination record) reuses the old base's
 *    count once the new base reaches that version number: the projection it holds of the old
 *    log "covers" it, and `items()` / `failures()` answer with the deleted log's items (the new
 *    log's acked items missing) even though the base handle it pinned is a fresh one of the
 *    new dataset. Before a82331e the pass over the new handle's row ids found other fragments.
 *  - W1: a generation being made ahead when the slot is dropped (a failed commit ends the
 *    epoch; likewise a fenced or sealed background merge, or a lost lease) is forgotten with
 *    the slot: nobody awaits or retires it. `close()` may return while it is still being made
 *    (writes after close()), and its dataset and `gen.` marker stay after a clean close (an
 *    invisible generation of a sealed epoch, or listed empty in its seal, until a maintenance
 *    pass sweeps or merges it), with its handle and fsync state in LanceTables.
 *  - W2: `retireUnused` skips a made-ahead generation whose making rejected, claiming it left
 *    "at most a dataset folder without its marker". A making rejects after its marker landed
 *    too (the marker PUT's answer lost, or the fsync round failed): close() then seals the
 *    epoch with that empty generation listed, and it stays for readers and the maintainer.
 * Checked and sound (pass): a takeover racing a making in flight (its marker landing after the
 * seal): no reader waits or fails, every ack visible, the maintainer sweeps the generation; a
 * reader that listed the made-ahead generation while close() retires it.
 * Real Lance on a local root; pauses are gates in the tapped stores, no sleeps.
 */
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { summarize } from '../lib/fold.ts';
import { SUMMARY_SCAN_COLUMNS, SummaryVisitor } from '../lib/log/read/summary.ts';
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

describe('R1: the base count is cached by version number alone', () => {
  it('a process that listed a log deleted and made again lists the old log at the same base version', async () => {
    const { open } = setup();
    const R = open({}); // a long-lived reader (a report server, a dashboard)

    // The first log: two items, merged; maintenance builds the projection.
    const W1 = open({ mergeEveryCommits: 1000 });
    await W1.log.append([createBatch('old-a'), createBatch('old-b')]);
    await W1.log.mergeOwnShard();
    await W1.log.close();
    await open({}).log.maintain();
    expect((await R.log.items()).items.map((i) => i.itemId)).toEqual(['old-a', 'old-b']);
    const counted = (await R.log.stats()).base.version;
    // One more merge; R's next read pins the newer version (its pinned base handle moves on).
    const W2 = open({ mergeEveryCommits: 1000 });
    await W2.log.append([createBatch('old-c')]);
    await W2.log.mergeOwnShard();
    await W2.log.close();
    await R.log.scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor());

    // The log is deleted and made again at the same place; its base reaches the same version.
    await fs.rm(R.log.uri, { recursive: true, force: true });
    const W3 = open({ mergeEveryCommits: 1000 });
    const acks: Ack[] = await W3.log.append([createBatch('new-x')]);
    await W3.log.mergeOwnShard();
    await W3.log.close();
    await open({}).log.maintain();
    const F = open({});
    expect((await F.log.stats()).base.version, 'the new base is at the version R counted').toBe(counted);
    const want = (await F.log.allStates({ fields: false })).map(summarize);
    expect(want.map((s) => s.itemId)).toEqual(['new-x']);

    // R lists through the projection: a fresh pinned handle of the new base, the old count.
    expect((await R.log.items()).items, 'items() of the process that listed the old log').toEqual(want);
    // And folds: the fold projection's index is the stored one, not one R held (its rows files
    // are named by fragment and rows, which the new log reuses).
    expect(await R.log.fold('new-x'), 'a fold in the process that listed the old log').toEqual(await F.log.fold('new-x'));
    expect(acks[0]!.itemId).toBe('new-x');
  });
});

describe('W1: a generation being made when the slot is dropped outlives close()', () => {
  it('a failed commit ends the epoch during the making: close() neither waits for it nor retires it, its dataset and marker stay', async () => {
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

describe('W2: close() does not retire a made-ahead generation whose making rejected after its marker landed', () => {
  it('the marker PUT answer is lost: the empty generation is sealed into the epoch and stays after close()', async () => {
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

describe('checked: a made-ahead generation beside takeovers and readers', () => {
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
    const { acks, epoch, next } = await firstAck(W);
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
