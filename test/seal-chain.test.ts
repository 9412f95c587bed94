/**
 * A takeover whose predecessor died before sealing the epoch before it: the epoch two back
 * belongs to a zombie that makes its first generation only after the new takeover listed the
 * meta folder. A read of that generation (live, nothing fenced yet) and the zombie's own retry
 * (a duplicate answer from those rows) must stay true once the takeover seals its predecessor,
 * whose seal hides every unsealed epoch below it. Real Lance on a local root; pauses in the
 * tapped stores give the same interleaving on every run.
 */
import { describe, expect, it } from 'vitest';
import { FencedError, UnavailableError } from '../lib/errors.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch } from './support/batches.ts';
import { eventsOf, expectDurable, Pause, raceFixture, settle, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const META = '_dgcl/meta';

const { setup } = raceFixture(TTL);

describe('sealing an epoch seals the unsealed epochs below it first', () => {
  it("a zombie's generation made after the takeover listed, read live before the fence, stays visible; its duplicate ack stays true", async () => {
    const { root, clock, leases, open } = setup();
    // W takes epoch 1 and stops before naming its first generation.
    const W = open({ slot: 0, slots: 1 });
    const wGen = new Pause();
    W.objects.tap.before = async (op, key) => {
      if (op === 'putIfAbsent' && key.startsWith(`${META}/gen.`) && !wGen.reached.settled) await wGen.hit();
    };
    const x = createBatch('x');
    const wAppend = settle(W.log.append([x]));
    await wGen.reached.promise;

    // W's lease lapses. B takes epoch 2 and dies in its takeover (its fence of epoch 1 fails),
    // giving the slot back: epoch 1 is never sealed.
    clock.advance(TTL + 1);
    const B = open({ slot: 0, slots: 1 });
    B.objects.tap.before = (op, key) => {
      if (op === 'putIfAbsent' && key === `${META}/fence.s00-e000001`) throw new UnavailableError('simulated: fence PUT failed');
    };
    const bAppend = await settle(B.log.append([createBatch('b')]));
    expect(bAppend.ok, 'B fails in its takeover').toBe(false);

    // C takes epoch 3, lists the meta folder (no generation of epoch 1 yet), and stops before its
    // fence of epoch 2.
    const C = open({ slot: 0, slots: 1 });
    const cFence = new Pause();
    C.objects.tap.before = async (op, key) => {
      if (op === 'putIfAbsent' && key === `${META}/fence.s00-e000002` && !cFence.reached.settled) await cFence.hit();
    };
    const y = createBatch('y');
    const cAppend = settle(C.log.append([y]));
    await cFence.reached.promise;

    // W names its generation and commits; its epoch check finds the epoch taken.
    wGen.release();
    const wOut = await wAppend;
    expect(wOut.ok ? 'acked' : wOut.error, 'the zombie is not acknowledged').toBeInstanceOf(FencedError);

    // Nothing is fenced yet: W's retry answers from the rows as a duplicate, a reader sees them.
    const retry = await W.log.append([x]);
    expect(retry.map((a) => a.duplicate)).toEqual([true]);
    const named = new Map(retry[0]!.eventIds.map((id, i) => [id, retry[0]!.firstSeq + i]));
    const before = await withFreshReader(root, leases, clock, (r) => eventsOf(r, 'x'));
    expect([...before], 'a read before the takeover goes on sees the rows').toEqual([...named]);
    const acks: Ack[] = [...retry];

    cFence.release();
    const cOut = await cAppend;
    expect(cOut.ok, `C's append: ${cOut.ok ? '' : String(cOut.error)}`).toBe(true);
    if (cOut.ok) acks.push(...cOut.value);

    // I3: what the earlier read returned is returned later; I4: the duplicate ack names visible events.
    const after = await withFreshReader(root, leases, clock, (r) => eventsOf(r, 'x'));
    expect([...after], 'a later read returns what the earlier one did').toEqual([...before]);
    await expectDurable(root, leases, clock, acks, 'after the takeover');
  });
});
