/**
 * A writer never makes a generation of the same name twice (lib/log/writer.ts, openGeneration).
 * Found by simulation seed 18370: a writer's first making of its generation landed but its answer
 * was lost; a takeover sealed the epoch (the seal listed the generation), a maintainer merged and
 * retired it; the zombie's next commit made the same name again, and while it was between the
 * dataset and the marker, a maintenance sweep deleted the new dataset (no marker yet, epoch
 * sealed). The marker then came back over a dataset without the version the seal names, and every
 * read failed on it from then on. Real Lance on a local root, a manual clock, taps and gates.
 */
import { describe, expect, it, vi } from 'vitest';
import { UnavailableError } from '../lib/errors.ts';
import { META_DIR } from '../lib/log/layout.ts';
import { Gate, Pause, raceFixture, settle, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const { setup } = raceFixture(TTL);
const batch = (itemId: string) => ({ itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: itemId } });
const isGenMarker = (op: string, key: string) => op === 'putIfAbsent' && key.startsWith(`${META_DIR}/gen.`);

describe('a generation whose making failed', () => {
  it('is not made again by a zombie: after a takeover, merge, retirement and sweep every read still succeeds', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a' });
    // First every making's marker lands and its answer is lost; then (the zombie) the first
    // making pauses between its dataset and its marker.
    const made: Record<'lost' | 'zombie', string[]> = { lost: [], zombie: [] };
    let phase: keyof typeof made = 'lost';
    const paused = new Pause();
    A.objects.tap.before = async (op, key) => {
      if (!isGenMarker(op, key)) return;
      made[phase].push(key);
      if (phase === 'zombie' && made.zombie.length === 1) await paused.hit();
    };
    A.objects.tap.after = (op, key) => {
      if (isGenMarker(op, key) && phase === 'lost') throw new UnavailableError('injected: the marker landed, its answer was lost');
    };
    await expect(A.log.append([batch('x')])).rejects.toBeInstanceOf(UnavailableError);

    // A freezes past its lease; B takes the slot (sealing A's epoch), a maintainer merges and retires.
    s.clock.advance(2 * TTL);
    const B = s.open({ slot: 0, slots: 2, owner: 'b' });
    await B.log.append([batch('y')]);
    const M = s.open({ slot: 1, slots: 2, owner: 'm' });
    expect((await M.log.maintain()).failures).toEqual([]);

    // A thaws and commits again; its making pauses before the marker while maintenance sweeps.
    phase = 'zombie';
    const zombie = settle(A.log.append([batch('x')]));
    await paused.reached.promise;
    expect((await M.log.maintain()).failures).toEqual([]);
    paused.release();
    const late = await zombie;
    expect(late.ok ? 'acked' : (late.error as { code?: string }).code, 'the zombie is told it was fenced').toBe('FENCED');

    const read = () =>
      withFreshReader(s.root, s.leases, s.clock, async (log) => ({
        y: (await log.trajectory('y')).length,
        items: (await log.items()).items.map((i) => i.itemId),
      }));
    expect(await read(), 'every read succeeds; x was never acked').toEqual({ y: 3, items: ['y'] });
    expect(made.zombie.filter((k) => made.lost.includes(k)), 'no name made again').toEqual([]);
    expect((await M.log.maintain()).failures).toEqual([]);
    expect(await read()).toEqual({ y: 3, items: ['y'] });
  });

  // review28 F1, against a first version of the fix that retired the given-up name: its marker
  // PUT timed out and landed after the retirement, a marker without a dataset in a live epoch,
  // and every read failed until the epoch was sealed.
  it('is left as it is: its marker landing late leaves an empty generation readers read', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', cachedItems: 0 });
    const land = new Gate();
    let late: Promise<boolean> | null = null;
    A.objects.tap.before = (op, key) => {
      if (isGenMarker(op, key) && late === null) {
        // Timed out: the caller is told now; the request lands when the test says.
        late = land.promise.then(() => A.objects.inner.putIfAbsent(key, ''));
        throw new UnavailableError('injected: timed out, lands later');
      }
    };
    const [ack] = await A.log.append([batch('x')]);
    expect(ack!.firstSeq, 'acked through the next generation').toBe(1);
    await A.log.idle(); // nothing of the writer's runs in the background (a first version of the fix retired the name there)
    land.resolve();
    expect(await late, 'the late marker landed').toBe(true);
    const read = () => withFreshReader(s.root, s.leases, s.clock, async (log) => (await log.trajectory('x')).length);
    expect(await read()).toBe(3);
    expect((await s.open({ slot: 1, slots: 2, owner: 'm' }).log.maintain()).failures).toEqual([]);
    expect(await read()).toBe(3);
    await A.log.append([{ ...batch('x'), create: undefined, step: { name: 's', index: 1 } }]); // reads x from storage (nothing cached)
    await A.log.close();
    expect(await read()).toBe(5);
  });

  // review29: close() retired a made-ahead generation whose making failed before its marker was
  // there; the marker PUT, timed out, landed after the retirement, and close()'s seal failed: a
  // marker without a dataset in a live epoch, and every read failed until the lease ran out.
  it('made ahead, is not retired by close() while its marker may still land', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', mergeEveryCommits: 5 });
    const ahead = `${META_DIR}/gen.s00-e000001-g000002`;
    const land = new Gate();
    let late: Promise<boolean> | null = null;
    let failFence = false;
    A.objects.tap.before = (op, key) => {
      if (op === 'putIfAbsent' && key === ahead && late === null) {
        late = land.promise.then(() => A.objects.inner.putIfAbsent(key, ''));
        throw new UnavailableError('injected: timed out, lands later');
      }
      if (failFence && op === 'putIfAbsent' && key.includes('/fence.')) throw new UnavailableError('injected: the fence PUT failed');
    };
    await A.log.append([batch('x')]); // the next generation is made ahead after this commit
    await vi.waitFor(() => expect(late, 'the made-ahead marker was sent').not.toBeNull(), { timeout: 10_000, interval: 5 });
    failFence = true;
    expect((await settle(A.log.close())).ok, 'close() fails at its fence: the epoch stays live').toBe(false);
    land.resolve();
    expect(await late, 'the late marker landed').toBe(true);
    const read = () => withFreshReader(s.root, s.leases, s.clock, async (log) => (await log.trajectory('x')).length);
    expect(await read()).toBe(3);
    s.clock.advance(2 * TTL);
    expect((await s.open({ slot: 1, slots: 2, owner: 'm' }).log.maintain()).failures).toEqual([]);
    expect(await read()).toBe(3);
  });
});
