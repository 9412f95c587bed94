/**
 * Faults of the writer, merge, maintenance and read paths traced in issue 8 ("Also traced in the
 * code"), each forced deterministically on a local root with real Lance: hooks and tapped
 * stores fail or pause exactly one request. Assertions are on what a user observes.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { CorruptError, FencedError, isDgclError, LeaseHeldError, UnavailableError } from '../lib/errors.ts';
import { parseBatches } from '../lib/batch.ts';
import type { LocalLeaseStore } from '../lib/lease/local.ts';
import type { MergeStep } from '../lib/log/maintain/merge.ts';
import { TEXT_COLUMNS, textIndexName } from '../lib/log/text-index.ts';
import { resumePoint } from '../lib/resume.ts';
import type { Ack, ItemState } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import {
  EXPERIMENT,
  expectAcksVisible,
  expectDurable,
  Gate,
  Pause,
  PIPELINE,
  settle,
  sharedLeases,
  tempRoot,
  testLog,
  withFreshReader,
  raceFixture,
  type TestLog,
} from './support/race-kit.ts';

import path from 'node:path';
import { slotKey as leaseSlotKey } from '../lib/lease/slots.ts';
import { leaseLogIdAt } from './support/coord.ts';
const TTL = 60_000;
const META = '_dgcl/meta';

const { setup, keep } = raceFixture(TTL);

/** A slot's lease key in the log under `root` (scoped by the log's id, lib/lease/slots.ts). */
const slotKey = (root: string, slot: number) => leaseSlotKey(PIPELINE, EXPERIMENT, slot, leaseLogIdAt(path.join(root, 'datagen_checkpoints', PIPELINE, EXPERIMENT, 'log.lance')));
const checkpointOf = (batch: Record<string, unknown>) => parseBatches([batch])[0]!.checkpointId;

describe('background merge', () => {
  it('a failed background merge is retried: no unmerged generation after close, all acked data readable', async () => {
    const failed = new Gate();
    const { root, clock, leases, open } = setup();
    const W = open({
      slot: 0,
      mergeEveryCommits: 2,
      hooks: {
        beforeMergeStep(step: MergeStep) {
          if (step === 'base-commit' && !failed.settled) {
            failed.resolve();
            throw new Error('simulated: base commit failed');
          }
        },
      },
    });
    const acks: Ack[] = [];
    for (let i = 0; i < 2; i++) acks.push(...(await W.log.append([createBatch(`a${i}`)])));
    await failed.promise; // the first generation's merge failed in the background
    for (let i = 2; i < 7; i++) acks.push(...(await W.log.append([createBatch(`a${i}`)])));
    await W.log.close();

    const stats = await withFreshReader(root, leases, clock, (r) => r.stats());
    expect(stats.shards.filter((s) => !s.retired).map((s) => s.name), 'unmerged generations after close').toEqual([]);
    await expectDurable(root, leases, clock, acks, 'after a failed background merge');
  });
});

describe('close', () => {
  it('an append queued while close() runs leaves no slot held (or is refused clearly)', async () => {
    const { root, clock, leases, open } = setup();
    const inClose = new Pause();
    let closing = false;
    const W = open({
      slot: 0,
      hooks: {
        async beforeMergeStep(step: MergeStep) {
          if (closing && step === 'read' && !inClose.reached.settled) await inClose.hit();
        },
      },
    });
    const acks = await W.log.append([createBatch('a')]);
    closing = true;
    const close = settle(W.log.close());
    await Promise.race([inClose.reached.promise, close]); // (a close that merges nothing just ends)
    const late = settle(W.log.append([createBatch('late')]));
    inClose.release();
    const closed = await close;
    expect(closed.ok, `close: ${closed.ok ? '' : String(closed.error)}`).toBe(true);
    const lateOut = await late;
    if (lateOut.ok) acks.push(...lateOut.value);
    else expect(isDgclError(lateOut.error), `the late append failed with ${String(lateOut.error)}`).toBe(true);

    // Whatever happened to it, no slot is left held by the closed log.
    for (const slot of [0, 1]) {
      const rec = await leases.read(slotKey(root, slot));
      const held = rec !== null && rec.owner !== '' && rec.expiresAtMs > clock.nowMs();
      expect(held ? `slot ${slot} held by ${rec!.owner} at epoch ${rec!.epoch}` : 'free').toBe('free');
    }
    await expectDurable(root, leases, clock, acks, 'acks around close');
  });
});

describe('slots', () => {
  it('a writer beyond the slots waits for a free slot instead of failing at once', async () => {
    // Real time here: the wait is bounded by real time, and nothing expires meanwhile (60 s ttl).
    const root = tempRoot();
    const { systemClock } = await import('../lib/clock.ts');
    const leases = sharedLeases(root, systemClock);
    keep.store(leases);
    const W1 = testLog({ root, leases, clock: systemClock, slots: 1, leaseTtlMs: TTL });
    const W2 = testLog({ root, leases, clock: systemClock, slots: 1, leaseTtlMs: TTL });
    keep.log(W1);
    keep.log(W2);
    const acks = await W1.log.append([createBatch('a')]);

    const refused = new Gate();
    W2.leases.tap.failed = (op, _key, e) => {
      if (op === 'acquire' && e instanceof LeaseHeldError) refused.resolve();
    };
    // (a writer that looks before it tries has found the slot held too)
    W2.leases.tap.after = (op, key, rec) => {
      const r = rec as { owner?: string } | null;
      if (op === 'read' && key === slotKey(root, 0) && r && r.owner) refused.resolve();
    };
    const second = settle(W2.log.append([createBatch('b')]));
    await refused.promise; // W2 found the only slot held
    await W1.log.close(); // ...and it frees now
    const out = await second;
    expect(out.ok ? 'acked' : String(out.error), 'the waiting writer').toBe('acked');
    if (out.ok) acks.push(...out.value);
    await expectDurable(root, leases, systemClock, acks, 'after waiting for a slot');
  });
});

describe('claims', () => {
  it('one failed claim PUT does not reject the other requests of its group', async () => {
    const { root, clock, leases, open } = setup();
    const commits: string[][] = [];
    const W = open({ slot: 0, hooks: { beforeCommit: (ids) => void commits.push([...ids]) } });
    const y = createBatch('y');
    const yClaim = `_dgcl/claims/${checkpointOf(y)}.json`;
    let fail = true;
    W.objects.tap.before = (op, key) => {
      if (op === 'putIfAbsent' && key === yClaim && fail) {
        fail = false;
        throw new UnavailableError('simulated: claim PUT failed');
      }
    };
    // The first request commits alone; the two queued behind it form one group.
    const pa = settle(W.log.append([createBatch('a')]));
    const py = settle(W.log.append([y]));
    const pz = settle(W.log.append([createBatch('z')]));
    const [a, yOut, z] = await Promise.all([pa, py, pz]);
    expect(commits, 'y and z were committed together').toContainEqual(['y', 'z']);
    expect(fail, 'the claim fault was injected').toBe(false);

    expect(z.ok ? 'acked' : String(z.error), 'the request whose claim did not fail').toBe('acked');
    const acks: Ack[] = [];
    for (const o of [a, z]) if (o.ok) acks.push(...o.value);
    if (yOut.ok) acks.push(...yOut.value);
    else {
      expect(isDgclError(yOut.error) && yOut.error.retryable, `y failed with ${String(yOut.error)}`).toBe(true);
      acks.push(...(await W.log.append([y])));
    }
    await expectDurable(root, leases, clock, acks, 'group with one failed claim');
  });
});

describe('scan retries', () => {
  it('a CorruptError from storage surfaces as CorruptError without being asked again', async () => {
    const { open } = setup();
    const W = open({ slot: 0 });
    await W.log.append([createBatch('x')]);
    let reads = 0;
    const R = open({
      tableTap: {
        beforeRead(name) {
          if (name === 'base') return;
          reads++;
          throw new CorruptError(`simulated: a data file of ${name} fails its checksum`);
        },
      },
    });
    const out = await settle(R.log.fold('x'));
    expect(out.ok ? out.value : out.error).toBeInstanceOf(CorruptError);
    expect(reads, 'reads of the corrupt generation').toBe(1);
  });

  it('a retryable read failure is retried after a backoff through the clock', async () => {
    class CountingClock extends ManualClock {
      sleeps = 0;
      override sleep(ms: number): Promise<void> {
        this.sleeps++;
        return super.sleep(ms);
      }
    }
    const clock = new CountingClock(Date.now());
    const { open } = setup(clock);
    const W = open({ slot: 0 });
    await W.log.append([createBatch('x')]);
    let fail = 1;
    const R = open({
      tableTap: {
        beforeRead(name) {
          if (name !== 'base' && fail > 0) {
            fail--;
            throw new UnavailableError('simulated: storage did not answer');
          }
        },
      },
    });
    const sleepsBefore = clock.sleeps;
    const state = await R.log.fold('x');
    expect(state.lastSeq).toBe(3);
    expect(clock.sleeps - sleepsBefore, 'backoffs before the retry').toBeGreaterThanOrEqual(1);
  });
});

describe('maintenance', () => {
  it('one failing merge does not skip compaction and indexes, and the failure is reported', async () => {
    const { root, clock, leases, open } = setup();
    const W1 = open({ slot: 0 });
    const W2 = open({ slot: 1 });
    const acks: Ack[] = [];
    acks.push(...(await W1.log.append([createBatch('a1')])));
    await W1.log.mergeOwnShard();
    acks.push(...(await W1.log.append([createBatch('a2')])));
    acks.push(...(await W2.log.append([createBatch('b1')])));
    await W2.log.mergeOwnShard();
    acks.push(...(await W2.log.append([createBatch('b2')])));
    // Both writers die; their generations wait for the maintainer.
    clock.advance(TTL + 1);
    const before = await withFreshReader(root, leases, clock, (r) => r.stats());
    expect(before.base.fragments, 'base fragments before maintenance').toBe(2);
    const broken = before.shards.find((s) => s.slot === 0)!.name;

    const M = open({
      hooks: {
        beforeMergeStep(step: MergeStep, shard: string) {
          if (step === 'base-commit' && shard === broken) throw new Error(`simulated: base commit of ${shard} failed`);
        },
      },
    });
    const out = await settle(M.log.maintain());
    const reported = out.ok ? JSON.stringify(out.value) : String((out.error as Error)?.message ?? out.error);
    expect(reported, 'the failed merge is reported').toContain(broken);

    const after = await withFreshReader(root, leases, clock, (r) => r.stats());
    expect(after.shards.filter((s) => s.slot === 1).map((s) => s.name), 'the other generation was merged').toEqual([]);
    expect(after.base.fragments, 'base compacted').toBe(1);
    expect([...after.base.indexes].sort(), 'base indexes').toEqual(['event_id_idx', 'item_id_idx', ...TEXT_COLUMNS.map(textIndexName)].sort());
    await withFreshReader(root, leases, clock, (r) => expectAcksVisible(r, acks, 'after a partly failed maintenance'));
  });
});

describe('resume', () => {
  it('a cursor without stepIndex does not send the item back to step 0', async () => {
    // nextStepIndex is "the step after the cursor". A step completed without an
    // index has no known successor index, so resumePoint answers null (resume after
    // cursor.stepName), never 0, which would rerun every completed step.
    const { open } = setup();
    const W = open({ slot: 0 });
    await W.log.append([{ itemId: 'n', runId: 'r1', create: {}, step: { name: 'generate' }, set: { out: 'done' } }]);
    const state = await W.log.fold('n');
    expect(state.cursor?.stepName).toBe('generate');
    expect(state.cursor?.stepIndex).toBeNull();
    const p = resumePoint(state);
    expect(p.resumable).toBe(true);
    expect(p.cursor?.stepName).toBe('generate');
    expect(p.nextStepIndex, 'next step of an un-indexed cursor').toBeNull();
  });
});

describe('fencing table (docs/design/fencing.md)', () => {
  it('row 2: a commit before the takeover whose epoch check runs after it: FencedError, visible', async () => {
    const { root, clock, leases, open } = setup();
    const afterCommit = { armed: null as Pause | null };
    const A = open({
      slot: 0,
      hooks: {
        async afterCommit() {
          const p = afterCommit.armed;
          afterCommit.armed = null;
          if (p) await p.hit();
        },
      },
    });
    const acks = await A.log.append([createBatch('x')]);
    const pause = (afterCommit.armed = new Pause());
    const step1 = settle(A.log.append([stepBatch('x', 1)]));
    await pause.reached.promise; // committed, epoch not yet checked

    clock.advance(TTL + 1);
    const B = open({ slot: 0 });
    acks.push(...(await B.log.append([createBatch('y')]))); // acquire + seal (after A's commit)
    pause.release();
    const out = await step1;
    expect(out.ok ? out.value : out.error).toBeInstanceOf(FencedError);

    // Sealed in: visible, and the new owner continues the item after it.
    const seen = await withFreshReader(root, leases, clock, (r) => r.fold('x'));
    expect(seen.cursor?.stepIndex, 'the fenced commit is visible').toBe(1);
    acks.push(...(await B.log.append([stepBatch('x', 2)])));
    expect(acks.at(-1)!.firstSeq).toBe(seen.lastSeq + 1);
    await expectDurable(root, leases, clock, acks, 'row 2');
  });

  it('row 3: a commit between the acquire and the seal: FencedError, visible', async () => {
    const { root, clock, leases, open } = setup();
    const beforeCommit = { armed: null as Pause | null };
    const A = open({
      slot: 0,
      hooks: {
        async beforeCommit() {
          const p = beforeCommit.armed;
          beforeCommit.armed = null;
          if (p) await p.hit();
        },
      },
    });
    const acks = await A.log.append([createBatch('x')]);
    const aPause = (beforeCommit.armed = new Pause());
    const step1 = settle(A.log.append([stepBatch('x', 1)]));
    await aPause.reached.promise;

    clock.advance(TTL + 1);
    const B = open({ slot: 0 });
    const acquired = new Pause();
    B.leases.tap.after = async (op) => {
      if (op === 'acquire' && !acquired.reached.settled) await acquired.hit();
    };
    const bAppend = settle(B.log.append([createBatch('y')]));
    await acquired.reached.promise; // B holds the slot, has not sealed yet

    aPause.release();
    const out = await step1;
    expect(out.ok ? out.value : out.error).toBeInstanceOf(FencedError);
    acquired.release();
    const bOut = await bAppend;
    expect(bOut.ok, `B: ${bOut.ok ? '' : String(bOut.error)}`).toBe(true);
    if (bOut.ok) acks.push(...bOut.value);

    const seen = await withFreshReader(root, leases, clock, (r) => r.fold('x'));
    expect(seen.cursor?.stepIndex, 'the fenced commit is visible').toBe(1);
    acks.push(...(await B.log.append([stepBatch('x', 2)])));
    expect(acks.at(-1)!.firstSeq).toBe(seen.lastSeq + 1);
    await expectDurable(root, leases, clock, acks, 'row 3');
  });
});

describe('readers beside maintenance', () => {
  /**
   * Pause points for a process doing maintenance work: at each one, finish the read that listed
   * at the previous point (so it lists before and reads after the step), check it, start one
   * that lists now, and check a fresh read made right there.
   */
  function readersAtEveryStep(root: string, leases: LocalLeaseStore, clock: ManualClock, acks: readonly Ack[]) {
    const lastSeq = new Map<string, number>();
    for (const a of acks) lastSeq.set(a.itemId, Math.max(lastSeq.get(a.itemId) ?? 0, a.lastSeq));
    const problems: string[] = [];
    let steps = 0;
    let straddled = 0;
    let inFlight: { label: string; pause: Pause; result: Promise<ItemState[]> } | null = null;
    const finishRead = async () => {
      if (!inFlight) return;
      const { label, pause, result } = inFlight;
      inFlight = null;
      if (pause.reached.settled) straddled++;
      pause.release();
      const out = await settle(result);
      if (!out.ok) problems.push(`read listed ${label}: ${String(out.error)}`);
      else {
        for (const [id, seq] of lastSeq) {
          const s = out.value.find((x) => x.itemId === id);
          if (!s || s.lastSeq !== seq || s.violations.length > 0) problems.push(`read listed ${label}: ${id} lastSeq ${s?.lastSeq ?? 'missing'} (acked ${seq})`);
        }
      }
    };
    const step = async (label: string) => {
      steps++;
      await finishRead();
      const R = testLog({ root, leases, clock });
      const pause = new Pause();
      R.objects.tap.after = async (op, key) => {
        if (op === 'list' && key === META && !pause.reached.settled) await pause.hit();
      };
      const result = R.log.allStates().finally(() => R.log.close());
      inFlight = { label, pause, result };
      await Promise.race([pause.reached.promise, result.catch(() => undefined)]);
      await withFreshReader(root, leases, clock, async (r) => {
        const out = await settle(expectAcksVisible(r, acks, `fresh read ${label}`));
        if (!out.ok) problems.push((out.error as Error).message.split('\n')[0]!);
      });
    };
    const mutating = new Set(['put', 'putIfAbsent', 'delete', 'deleteKey', 'deleteOlderThan']);
    /** Routes `t`'s merge steps, base operations and mutating requests through `step`. */
    const instrument = (t: TestLog) => {
      t.objects.tap.before = async (op, key) => {
        if (mutating.has(op)) await step(`before ${op} ${key}`);
      };
    };
    return {
      hooks: { beforeMergeStep: (s: MergeStep, shard: string) => step(`before ${s} of ${shard}`) },
      tableTap: { beforeBaseOp: (op: 'optimize' | 'createIndex') => step(`before base ${op}`) },
      instrument,
      async done() {
        await finishRead();
        return { problems, steps, straddled };
      },
    };
  }

  async function writeSome(W: TestLog): Promise<Ack[]> {
    const acks: Ack[] = [];
    const items = ['m1', 'm2'];
    for (const id of items) acks.push(...(await W.log.append([createBatch(id)])));
    await W.log.mergeOwnShard(); // a base exists
    for (const id of items) acks.push(...(await W.log.append([stepBatch(id, 1)])));
    for (const id of items) acks.push(...(await W.log.append([stepBatch(id, 2, { set: { big: { $blob: Buffer.from(id).toString('base64') } } })])));
    return acks;
  }

  it('a reader beside a maintainer (takeover, merge, retirement, compaction, cleanup) never sees fewer events than acked', async () => {
    const { root, clock, leases, open } = setup();
    const acks = await writeSome(open({ slot: 0 }));
    clock.advance(TTL + 1); // the writer died: the maintainer takes its slot over, seals and merges
    const at = readersAtEveryStep(root, leases, clock, acks);
    const M = open({ hooks: at.hooks, tableTap: at.tableTap });
    at.instrument(M);
    const report = await M.log.maintain();
    const { problems, steps, straddled } = await at.done();
    expect(report.mergedShards.length, 'generations the maintainer merged').toBe(1);
    expect(steps, 'pause points visited').toBeGreaterThan(10);
    expect(straddled, 'reads that listed before a step and read after it').toBe(steps);
    expect(problems).toEqual([]);
  }, 180_000);

  it("a reader beside a writer's own merge, retirement and close never sees fewer events than acked", async () => {
    const { root, clock, leases, open } = setup();
    // The readers start once the data is written (the acks are what they check against).
    let at: ReturnType<typeof readersAtEveryStep> | null = null;
    const W = open({ slot: 0, hooks: { beforeMergeStep: (s, shard) => at?.hooks.beforeMergeStep(s, shard) } });
    const acks = await writeSome(W);
    at = readersAtEveryStep(root, leases, clock, acks);
    at.instrument(W);
    await W.log.mergeOwnShard();
    await W.log.close();
    const { problems, steps, straddled } = await at.done();
    expect(steps, 'pause points visited').toBeGreaterThan(10);
    expect(straddled, 'reads that listed before a step and read after it').toBe(steps);
    expect(problems).toEqual([]);
  }, 180_000);

  it('a writer caching one item (cachedItems 1) among many items, with a second writer, stays correct', async () => {
    const { root, clock, leases, open } = setup();
    const W = open({ slot: 0, cachedItems: 1 });
    const W2 = open({ slot: 1, cachedItems: 1 });
    const ids = Array.from({ length: 8 }, (_, i) => `c${i}`);
    const acks: Ack[] = [];
    acks.push(...(await W.log.append(ids.slice(0, 4).map((id) => createBatch(id))))); // one group of many items
    for (const id of ids.slice(4)) acks.push(...(await W.log.append([createBatch(id)])));
    for (const id of ids.filter((_, i) => i % 2 === 0)) acks.push(...(await W2.log.append([stepBatch(id, 1)])));
    for (const id of ids) acks.push(...(await W.log.append([stepBatch(id, 2)])));
    acks.push(...(await W2.log.append(ids.map((id) => stepBatch(id, 3)))));
    for (const id of [...ids].reverse()) acks.push(...(await W.log.append([stepBatch(id, 4)])));
    // Redeliveries answer duplicates with the first seqs.
    const again = await W.log.append(ids.map((id) => stepBatch(id, 2)));
    for (const a of again) {
      const first = acks.find((x) => x.checkpointId === a.checkpointId)!;
      expect({ ...a, duplicate: false }).toEqual(first);
      expect(a.duplicate).toBe(true);
    }
    await expectDurable(root, leases, clock, acks, 'cachedItems 1');
    await withFreshReader(root, leases, clock, async (r) => {
      for (const [i, id] of ids.entries()) {
        const s = await r.fold(id);
        expect(s.lastSeq, `lastSeq of ${id}`).toBe(3 + 2 * (i % 2 === 0 ? 4 : 3));
      }
    });
  });
});
