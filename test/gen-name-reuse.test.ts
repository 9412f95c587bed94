/**
 * A writer never makes a generation of the same name twice (lib/log/write/generations.ts, openGeneration).
 * Found by simulation seed 18370: a writer's first making of its generation landed but its answer
 * was lost; a takeover sealed the epoch (the seal listed the generation), a maintainer merged and
 * retired it; the zombie's next commit made the same name again, and while it was between the
 * dataset and the marker, a maintenance sweep deleted the new dataset (no marker yet, epoch
 * sealed). The marker then came back over a dataset without the version the seal names, and every
 * read failed on it from then on. Real Lance on a local root, a manual clock, taps and gates.
 */
import { describe, expect, it, vi } from 'vitest';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { UnavailableError } from '../lib/errors.ts';
import { META_DIR, shardPrefix } from '../lib/log/layout.ts';
import { DatasetSync } from '../lib/storage/dataset-sync.ts';
import { Gate, Pause, raceFixture, settle, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const { setup } = raceFixture(TTL);
const batch = (itemId: string) => ({ itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: itemId } });
const isGenMarker = (op: string, key: string) => op === 'putIfAbsent' && key.startsWith(`${META_DIR}/gen.`);
const G1 = `${META_DIR}/gen.s00-e000001-g000001`;

/**
 * The first generation marker PUT of `A` times out: the caller is told now, the request lands
 * when `land` is resolved; `late()` is its outcome.
 */
function lateFirstMarker(A: ReturnType<ReturnType<typeof setup>['open']>) {
  const land = new Gate();
  let sent: Promise<boolean> | null = null;
  A.objects.tap.before = (op, key) => {
    if (isGenMarker(op, key) && sent === null) {
      sent = land.promise.then(() => A.objects.inner.putIfAbsent(key, ''));
      throw new UnavailableError('injected: timed out, lands later');
    }
  };
  return { land, late: () => sent };
}

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

  it('is retired by the next merge round once its marker is there: reads stop listing it', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', mergeEveryCommits: 2 });
    const givenUp = G1;
    let lost = false;
    A.objects.tap.after = (op, key) => {
      if (op === 'putIfAbsent' && key === givenUp && !lost) {
        lost = true;
        throw new UnavailableError('injected: the marker landed, its answer was lost');
      }
    };
    const [ack] = await A.log.append([batch('x')]);
    expect(ack!.firstSeq, 'acked through the next generation').toBe(1);
    expect(await A.objects.inner.get(givenUp), 'the given-up marker landed').not.toBeNull();
    await A.log.append([{ ...batch('x'), create: undefined, step: { name: 's', index: 1 } }]); // the second commit: a merge round
    await A.log.idle();
    expect(await A.objects.inner.get(givenUp), 'retired after the merge round').toBeNull();
    expect(existsSync(path.join(A.objects.inner.dir, ...shardPrefix('s00-e000001-g000001').split('/'))), 'its dataset deleted').toBe(false);
    const read = () => withFreshReader(s.root, s.leases, s.clock, async (log) => (await log.trajectory('x')).length);
    expect(await read()).toBe(5);
  });

  // Without this a retirement that ignored whether the marker was there passed every test.
  it('a merge round before its late marker lands keeps the name; the round after it lands retires it; reads never fail', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', mergeEveryCommits: 2, cachedItems: 0 });
    const { land, late } = lateFirstMarker(A);
    const step = (index: number) => ({ ...batch('x'), ...(index > 0 ? { create: undefined } : {}), step: { name: 's', index } });
    const read = () => withFreshReader(s.root, s.leases, s.clock, async (log) => (await log.trajectory('x')).length);
    await A.log.append([step(0)]);
    await A.log.append([step(1)]); // a rotation: merge round 1, the marker not there yet
    await A.log.idle();
    land.resolve();
    expect(await late(), 'the late marker landed').toBe(true);
    expect(await read()).toBe(5);
    await A.log.append([step(2)]);
    await A.log.append([step(3)]); // merge round 2: there now, retired
    await A.log.idle();
    expect(await A.objects.inner.get(G1), 'retired').toBeNull();
    expect(await read()).toBe(9);
  });

  it('is looked for in 3 merge rounds at most, and not at all if it failed before its marker was sent', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', mergeEveryCommits: 1 });
    // g1: its dataset's first fsync round fails (before the marker); g2: its marker PUT fails.
    const real = DatasetSync.prototype.sync;
    let syncFailed = false;
    const sync = vi.spyOn(DatasetSync.prototype, 'sync').mockImplementation(async function (this: DatasetSync) {
      if (!syncFailed && this.dir.endsWith('g000001.lance')) {
        syncFailed = true;
        throw new Error('injected: EIO');
      }
      return real.call(this);
    });
    let putFailed = false;
    const gets = new Map<string, number>();
    A.objects.tap.before = (op, key) => {
      if (isGenMarker(op, key) && key.endsWith('g000002') && !putFailed) {
        putFailed = true;
        throw new UnavailableError('injected: the marker PUT failed');
      }
      if (op === 'get' && key.startsWith(`${META_DIR}/gen.`)) gets.set(key, (gets.get(key) ?? 0) + 1);
    };
    try {
      const r = await settle(A.log.append([batch('x')]));
      expect(r.ok, 'two makings failed').toBe(false);
      for (let i = 0; i < 5; i++) {
        await A.log.append([{ ...batch(`y${i}`) }]); // a rotation and a merge round each
        await A.log.idle();
      }
    } finally {
      sync.mockRestore();
    }
    expect(Object.fromEntries(gets)).toEqual({ [`${META_DIR}/gen.s00-e000001-g000002`]: 3 });
    const read = () => withFreshReader(s.root, s.leases, s.clock, async (log) => (await log.items()).items.length);
    expect(await read()).toBe(5);
  });

  // The log's id is put (when none is listed) after a new generation's dataset and
  // before its marker; a failure there is one before the marker too.
  it('is not looked for when the log id PUT failed (before its marker was sent)', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', mergeEveryCommits: 1 });
    let failed = false;
    const gets = new Map<string, number>();
    A.objects.tap.before = (op, key) => {
      if (op === 'putIfAbsent' && key.startsWith(`${META_DIR}/log.`) && !failed) {
        failed = true;
        throw new UnavailableError('injected: the log id PUT failed');
      }
      if (op === 'get' && key.startsWith(`${META_DIR}/gen.`)) gets.set(key, (gets.get(key) ?? 0) + 1);
    };
    const [ack] = await A.log.append([batch('x')]);
    expect(failed, 'the id PUT was tried and failed').toBe(true);
    expect(ack!.firstSeq, 'acked through the next generation').toBe(1);
    for (let i = 0; i < 4; i++) {
      await A.log.append([{ ...batch(`y${i}`) }]); // a rotation and a merge round each
      await A.log.idle();
    }
    expect(Object.fromEntries(gets), 'no marker to look for').toEqual({});
    expect((await A.objects.inner.list(META_DIR)).filter((n) => n.startsWith('log.')), 'one id, put by the next making').toHaveLength(1);
    const read = () => withFreshReader(s.root, s.leases, s.clock, async (log) => (await log.items()).items.length);
    expect(await read()).toBe(5);
  });

  // Against a first version of the fix that retired the given-up name at once: its
  // marker PUT timed out and landed after the retirement, a marker without a dataset in a live
  // epoch, and every read failed until the epoch was sealed.
  it('is not retired while its marker may still land: landing late, it is an empty generation readers read, retired by close()', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', cachedItems: 0 });
    const { land, late } = lateFirstMarker(A);
    const [ack] = await A.log.append([batch('x')]);
    expect(ack!.firstSeq, 'acked through the next generation').toBe(1);
    await A.log.idle(); // nothing of the writer's runs in the background (a first version of the fix retired the name there)
    land.resolve();
    expect(await late(), 'the late marker landed').toBe(true);
    const read = () => withFreshReader(s.root, s.leases, s.clock, async (log) => (await log.trajectory('x')).length);
    expect(await read()).toBe(3);
    expect((await s.open({ slot: 1, slots: 2, owner: 'm' }).log.maintain()).failures).toEqual([]);
    expect(await read()).toBe(3);
    await A.log.append([{ ...batch('x'), create: undefined, step: { name: 's', index: 1 } }]); // reads x from storage (nothing cached)
    await A.log.close();
    expect(await A.objects.inner.get(G1), 'retired by close(): its marker was there').toBeNull();
    expect(await read()).toBe(5);
  });

  it('failing twice fails the commit with an error naming both names tried, and nothing is acked', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a' });
    A.objects.tap.before = (op, key) => {
      if (isGenMarker(op, key)) throw new Error('injected: no space left');
    };
    const r = await settle(A.log.append([batch('x')]));
    expect(r.ok, 'not acked').toBe(false);
    const e = (r as { error: Error }).error;
    expect(e).toBeInstanceOf(UnavailableError);
    expect(e.message).toMatch(/making shard generation s00-e000001-g000001, then s00-e000001-g000002 failed: injected: no space left/);
    A.objects.tap.before = undefined;
    expect(await withFreshReader(s.root, s.leases, s.clock, async (log) => (await log.items()).items)).toEqual([]);
  });

  it("is made durable before its marker: the marker never names a dataset a power cut could take", async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2, owner: 'a', mergeEveryCommits: 3 });
    const order: string[] = [];
    const real = DatasetSync.prototype.sync;
    const sync = vi.spyOn(DatasetSync.prototype, 'sync').mockImplementation(async function (this: DatasetSync) {
      await real.call(this);
      order.push(`synced ${path.basename(this.dir, '.lance')}`);
    });
    try {
      A.objects.tap.before = (op, key) => void (isGenMarker(op, key) && order.push(`marker ${key.slice(`${META_DIR}/gen.`.length)}`));
      for (let i = 0; i < 4; i++) await A.log.append([batch(`i${i}`)]); // the first generation, and the one made ahead
      await A.log.idle();
    } finally {
      sync.mockRestore();
    }
    const markers = order.filter((o) => o.startsWith('marker '));
    expect(markers.slice(0, 2), 'the first generation, and the one made ahead').toEqual(['marker s00-e000001-g000001', 'marker s00-e000001-g000002']);
    for (const m of markers) {
      const gen = m.slice('marker '.length);
      expect(order.slice(0, order.indexOf(m)), `${gen} synced before its marker: ${order.join(', ')}`).toContain(`synced ${gen}`);
    }
  });

  // close() once retired a made-ahead generation whose making failed before its marker was
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
