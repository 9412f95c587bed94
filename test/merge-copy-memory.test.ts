/**
 * What a writer keeps in memory for its merges (merge copies: `mergeCopies`, `keepCopy`, `copyOf`;
 * and its own rows) is released when it is no longer needed, and stays bounded.
 *
 *  - A background merge that finds the epoch fenced drops the slot (`dropSlot`: ownRows, merge
 *    copies, tracks, state) while a commit to the current generation is between its (passed) epoch
 *    check and its fsync. That commit was confirmed afterwards and put its rows into `ownRows` and
 *    `mergeCopies` under its generation again: a partial entry (only this commit) that no later
 *    dropSlot of the slot it belonged to would clear. The next epoch's sequencing trusted
 *    `ownRows` for that generation (skipped it in storage) and missed the generation's earlier
 *    commits: an item written there got their seqs again (seq_conflict, an acked batch no longer
 *    alone at its seqs). The copy of it was never merged nor dropped.
 *  - The cap is per writer, not per generation: while merges fail (one failing merge stops the
 *    round, later generations queue behind it), every frozen generation kept its copy, blobs
 *    included: memory grew by up to 32 MiB per `mergeEveryCommits` commits, unbounded.
 *  - `mergeFrozen` returning early because the epoch is sealed (a takeover) dropped the frozen
 *    generation from the queue but kept its copy (and own rows) until the slot was dropped: a
 *    writer that stayed idle after the takeover held up to 32 MiB per such generation.
 *  - A merge from the copy leaves the base exactly as a merge that reads the generation back
 *    (every column of every row, the schema), for edge values.
 * Real Lance on a local root; pauses are gates in the tapped stores and hooks, no sleeps.
 * White-box where the concern is memory: the writer's private maps are read (and its dropSlot
 * observed) through casts.
 */
import { execSync } from 'node:child_process';
import * as lancedb from '@lancedb/lancedb';
import { describe, expect, it } from 'vitest';
import { mergeGeneration } from '../lib/log/maintain/merge.ts';
import { LanceTables } from '../lib/log/tables.ts';
import { rowsFromArrow } from '../lib/schema.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logUri, parseRoot } from '../lib/storage/location.ts';
import type { ShardWriter } from '../lib/log/write/writer.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { EXPERIMENT, expectAcksVisible, Pause, PIPELINE, raceFixture, settle, tempRoot, withFreshReader, type OpenTestLog, type TestLog } from './support/race-kit.ts';
import type { ManualClock } from '../lib/clock.ts';

const TTL = 60_000;
const META = '_dgcl/meta';

const { setup } = raceFixture(TTL);

interface WriterInternals {
  state: unknown;
  /** lib/log/write/own-memory.ts `OwnMemory` */
  memory: {
    ownRows: Map<string, Map<string, Array<{ event_id: string }>>>;
    mergeCopies: Map<string, { commits: unknown[]; rows: number; bytes: number } | null>;
  };
  /** lib/log/write/own-merges.ts `OwnMerges` */
  merges: { frozen: unknown[]; merging: Promise<unknown> | null };
  dropSlot(): void;
}
const writerOf = (t: TestLog): WriterInternals => (t.log as unknown as { writer: ShardWriter }).writer as unknown as WriterInternals;
const copyBytes = (w: WriterInternals) => [...w.memory.mergeCopies.values()].reduce((s, c) => s + (c?.bytes ?? 0), 0);

/**
 * W (mergeEveryCommits 2) commits x's creation and b (generation 1, frozen: its background merge
 * starts and is held before its epoch check), then x's step 1 (generation 2), then starts y's
 * creation (generation 2) and is held after y's epoch check passed. B takes W's slot over.
 * Then W's merge runs its epoch check (fenced: dropSlot), and y's commit goes on (confirmed).
 */
async function fencedMergeDuringCommit(open: OpenTestLog, clock: ManualClock) {
  const W = open({ slots: 2, mergeEveryCommits: 2 });
  const acks: Ack[] = [];
  acks.push(...(await W.log.append([createBatch('x')])));
  const epoch = W.log.writerEpoch!;
  const slot = Number(/^s(\d+)-/.exec(epoch)![1]);
  const w = writerOf(W);

  // The merge of generation 1 reads its seal (none), then checks the epoch: held there.
  let mergeCheckNext = false;
  const mergePause = new Pause();
  W.objects.tap.before = (op, key) => {
    if (op === 'get' && key === `${META}/seal.${epoch}.json` && !mergePause.reached.settled) mergeCheckNext = true;
  };
  const commitPause = new Pause();
  let holdNextCommitCheck = false;
  W.leases.tap.before = async (op) => {
    if (op === 'assertCurrent' && mergeCheckNext) {
      mergeCheckNext = false;
      await mergePause.hit();
    }
  };
  W.leases.tap.after = async (op) => {
    if (op === 'assertCurrent' && holdNextCommitCheck) {
      holdNextCommitCheck = false;
      await commitPause.hit();
    }
  };
  acks.push(...(await W.log.append([createBatch('b')]))); // generation 1 frozen, merge starts
  await mergePause.reached.promise;
  acks.push(...(await W.log.append([stepBatch('x', 1)]))); // generation 2, first commit
  // The scenario's precondition: that commit, and only it, is what W remembers of generation 2.
  const gen2 = `${epoch}-g000002`;
  expect([...(w.memory.ownRows.get(gen2)?.values() ?? [])].flat().map((r) => r.event_id), `own rows of ${gen2}`).toEqual(acks.at(-1)!.eventIds);

  // y's commit: its epoch check passed, held before the group goes on.
  holdNextCommitCheck = true;
  const yAppend = settle(W.log.append([createBatch('y')]));
  await commitPause.reached.promise;

  // W's lease lapses, B takes the slot (and seals W's epoch: generation 2 with both commits).
  clock.advance(TTL + 1);
  const B = open({ slots: 2, slot });
  acks.push(...(await B.log.append([createBatch('z')])));

  // The merge's epoch check: fenced, the slot is dropped. Then y's commit goes on.
  const dropped = new Pause();
  const orig = w.dropSlot.bind(w);
  w.dropSlot = () => {
    orig();
    dropped.reached.resolve();
  };
  mergePause.release();
  await dropped.reached.promise;
  commitPause.release();
  const y = await yAppend;
  expect(y.ok, `y: ${y.ok ? '' : String(y.error)}`).toBe(true); // checked before the takeover: a true ack
  if (y.ok) acks.push(...y.value);
  return { W, B, w, gen2, acks };
}

describe('a fenced background merge that drops the slot under a commit being confirmed', () => {
  it('the next epoch does not sequence an item of that generation at seqs already acked (no seq_conflict)', async () => {
    const { root, clock, leases, open } = setup();
    const { W, acks } = await fencedMergeDuringCommit(open, clock);
    // W writes x again, under a new epoch (the other slot).
    acks.push(...(await W.log.append([stepBatch('x', 2)])));
    await withFreshReader(root, leases, clock, (r) => expectAcksVisible(r, acks, 'after the new epoch'));
  });

  it('the generation copy put back by that commit is released while the writer goes on', async () => {
    const { clock, open } = setup();
    const { W, w, gen2 } = await fencedMergeDuringCommit(open, clock);
    await W.log.append([createBatch('v')]); // a new epoch
    expect(W.log.writerEpoch).not.toBe(gen2.slice(0, gen2.lastIndexOf('-')));
    expect(w.memory.mergeCopies.has(gen2), `copy of ${gen2}, a generation of an ended epoch this writer will never merge`).toBe(false);
    expect(w.memory.ownRows.has(gen2), `own rows of ${gen2}`).toBe(false);
  });
});

describe('merge copies are capped per writer, not per generation', () => {
  it('while merges fail, the copies of the queued generations stay within the cap, blobs included', async () => {
    const { open } = setup();
    const failing = { on: true };
    const W = open({
      mergeEveryCommits: 1,
      mergeEveryBytes: 4 * 1024 * 1024, // copies capped at twice that
      hooks: {
        beforeMergeStep(step) {
          // The base cannot take the merge (unavailable, a conflict that keeps coming back, ...).
          if (failing.on && step === 'base-commit') throw new Error('base unavailable');
        },
      },
    });
    const blob = Buffer.alloc(4 * 1024 * 1024, 7).toString('base64');
    for (let i = 0; i < 9; i++) await W.log.append([createBatch(`big${i}`, { set: { image: { $blob: blob } } })]);
    const w = writerOf(W);
    await w.merges.merging;
    expect(w.merges.frozen.length).toBe(9); // every generation queued behind the first failing merge
    // 9 x 4 MiB of blobs held: the cap meant to bound this is 8 MiB here (32 MiB when found).
    expect(copyBytes(w), 'bytes of merge copies the writer holds').toBeLessThanOrEqual(8 * 1024 * 1024);
  });
});

describe('a merge that finds its epoch sealed drops the generation copy', () => {
  it('an idle writer taken over does not hold the copy of the generation it no longer merges', async () => {
    const { clock, open } = setup();
    const W = open({ slots: 2, mergeEveryCommits: 1 });
    await W.log.append([createBatch('x', { set: { image: { $blob: Buffer.alloc(1024 * 1024, 1).toString('base64') } } })]);
    const w = writerOf(W);
    await w.merges.merging; // generation 1 merged
    const epoch = W.log.writerEpoch!;
    const slot = Number(/^s(\d+)-/.exec(epoch)![1]);

    // Generation 2's background merge is held before it reads its seal.
    const sealRead = new Pause();
    W.objects.tap.before = async (op, key) => {
      if (op === 'get' && key === `${META}/seal.${epoch}.json` && !sealRead.reached.settled) await sealRead.hit();
    };
    await W.log.append([createBatch('y', { set: { image: { $blob: Buffer.alloc(1024 * 1024, 2).toString('base64') } } })]);
    await sealRead.reached.promise;
    const gen2 = `${epoch}-g000002`;
    expect(w.memory.mergeCopies.has(gen2)).toBe(true);

    // B takes the slot over and seals W's epoch; W's merge finds the seal and gives up.
    clock.advance(TTL + 1);
    const B = open({ slots: 2, slot });
    await B.log.append([createBatch('z')]);
    sealRead.release();
    await w.merges.merging;
    expect(w.merges.frozen.length).toBe(0); // no longer queued: this writer never merges it
    expect(w.memory.mergeCopies.has(gen2), `copy of ${gen2} (sealed by a takeover, merged by the maintainer)`).toBe(false);
  });
});

/** The base's rows (all columns, by event_id) and its schema. */
async function baseRows(uri: string) {
  const i = uri.lastIndexOf('/');
  const db = await lancedb.connect(uri.slice(0, i));
  const t = await db.openTable(uri.slice(i + 1).replace(/\.lance$/, ''));
  const a = await t.query().toArrow();
  const schema = a.schema.fields.map((f) => `${f.name}:${String(f.type)}:${f.nullable}:${JSON.stringify([...(f.metadata ?? new Map())])}`);
  return { rows: rowsFromArrow(a as never).sort((x, y) => (x.event_id < y.event_id ? -1 : 1)), schema };
}

describe('a merge from the copy equals a merge that reads the generation back', () => {
  it('same base rows and schema for edge values (U+FEFF, empty strings, int64 bounds, -0, json, empty blob)', async () => {
    const { root, open } = setup();
    const { log } = open({ mergeEveryCommits: 1000 });
    const set: Record<string, unknown> = {
      bom: '\uFEFFbom', empty: '', max: { $int: '9223372036854775807' }, min: { $int: '-9223372036854775808' }, neg0: -0, tiny: 1.5e-300,
      t: true, f: false, json: { a: ['\uFEFF', '', null, 1e21], b: { '': 0 } }, arr: [], blob0: { $blob: '' },
      blob: { $blob: Buffer.from([0, 255, 1]).toString('base64') }, uni: '\u00e9\u0000\u2028\u{1F600}',
    };
    await log.append([{ itemId: '\uFEFFitem', runId: '\uFEFFr', create: {}, step: { name: '\uFEFFs', index: 0 }, set }]);
    for (let i = 0; i < 5; i++) await log.append([{ itemId: `i${i}`, runId: 'r', create: {}, set: { k: i % 2 ? `\uFEFF${i}` : i } }]);
    // The same root before the merge, merged there by reading the generation back.
    const root2 = tempRoot();
    execSync(`cp -a '${root}/.' '${root2}/'`);
    await log.mergeOwnShard();
    const uri2 = logUri(parseRoot(root2), PIPELINE, EXPERIMENT);
    const objects2 = new LocalObjectStore(uri2);
    const tables2 = new LanceTables(uri2, undefined, objects2);
    const gens = (await objects2.list(META)).filter((n) => n.startsWith('gen.')).map((n) => n.slice(4));
    expect(gens.length).toBe(1);
    await mergeGeneration({ tables: tables2, objects: objects2 }, gens[0]!, await (await tables2.shard(gens[0]!)).version());
    tables2.close();
    const a = await baseRows(logUri(parseRoot(root), PIPELINE, EXPERIMENT));
    const b = await baseRows(uri2);
    expect(a.schema).toEqual(b.schema);
    expect(a.rows.length).toBe(25);
    expect(a.rows).toEqual(b.rows);
  });
});
