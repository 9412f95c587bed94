/**
 * THE LeaseStore conformance suite (LangGraph checkpoint-validation style): every backend runs
 * exactly these tests through a tiny initializer. Expiry is driven by the injected ManualClock,
 * never by sleeping. Each test gets a fresh store (own folder / own table).
 */
import { rejection } from '../support/rejection.ts';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ManualClock } from '../../lib/clock.ts';
import { FencedError, InvalidInputError, LeaseHeldError } from '../../lib/errors.ts';
import { LeaseFencedError } from '../../lib/lease/rules.ts';
import {
  LeaseKeeper,
  SLOT_WAIT_FIRST_MS,
  acquireMaintainer,
  acquireWriterSlot,
  maintainerKey,
  parseWriterEpoch,
  slotKey,
} from '../../lib/lease/slots.ts';
import type { Lease, LeaseStore } from '../../lib/lease/types.ts';

export interface LeaseStoreHarness {
  store: LeaseStore;
  /** The clock the store was built with. */
  clock: ManualClock;
  destroy(): Promise<void>;
}

export interface LeaseStoreFactory {
  create(): Promise<LeaseStoreHarness>;
}

const TTL = 10_000;
const KEY = 'pipe/exp/slot/3';


export function leaseStoreConformance(name: string, factory: LeaseStoreFactory): void {
  describe(`LeaseStore conformance: ${name}`, () => {
    let h: LeaseStoreHarness;
    let store: LeaseStore;
    let clock: ManualClock;

    beforeEach(async () => {
      h = await factory.create();
      store = h.store;
      clock = h.clock;
    });
    afterEach(async () => {
      await h.store.close();
      await h.destroy();
    });

    it('acquires a fresh key at epoch 1 and reads it back', async () => {
      const now = clock.nowMs();
      const lease = await store.acquire(KEY, 'a', TTL);
      expect(lease).toEqual({ key: KEY, owner: 'a', epoch: 1, expiresAtMs: now + TTL });
      expect(await store.read(KEY)).toEqual(lease);
      await store.assertCurrent(lease);
    });

    it('read returns null for a key never acquired, and keys are independent', async () => {
      expect(await store.read('pipe/exp/never')).toBeNull();
      const a = await store.acquire('pipe/exp/slot/1', 'a', TTL);
      const b = await store.acquire('pipe/exp/slot/2', 'b', TTL);
      expect([a.epoch, b.epoch]).toEqual([1, 1]);
      expect((await store.read('pipe/exp/slot/1'))?.owner).toBe('a');
      expect((await store.read('pipe/exp/slot/2'))?.owner).toBe('b');
    });

    it('a held key throws LeaseHeldError with the holder, for other owners and the holder itself', async () => {
      const lease = await store.acquire(KEY, 'a', TTL);
      clock.advance(TTL - 1);
      for (const owner of ['b', 'a']) {
        const e = await rejection(store.acquire(KEY, owner, TTL));
        expect(e).toBeInstanceOf(LeaseHeldError);
        const held = e as LeaseHeldError;
        expect(held.code).toBe('LEASE_HELD');
        expect(held.retryable).toBe(true);
        expect(held.holder).toEqual(lease);
      }
      expect(await store.read(KEY)).toEqual(lease);
    });

    it('20 concurrent acquirers: exactly one wins, the others see it as the holder', async () => {
      const owners = Array.from({ length: 20 }, (_, i) => `w${i}`);
      const results = await Promise.allSettled(owners.map((o) => store.acquire(KEY, o, TTL)));
      const won = results.filter((r): r is PromiseFulfilledResult<Lease> => r.status === 'fulfilled');
      expect(won).toHaveLength(1);
      const winner = won[0]!.value;
      expect(winner.epoch).toBe(1);
      for (const r of results) {
        if (r.status === 'fulfilled') continue;
        expect(r.reason).toBeInstanceOf(LeaseHeldError);
        expect((r.reason as LeaseHeldError).holder?.owner).toBe(winner.owner);
      }
      expect(await store.read(KEY)).toEqual(winner);
    });

    it('renew by the holder extends the expiry and keeps the epoch', async () => {
      const lease = await store.acquire(KEY, 'a', TTL);
      clock.advance(TTL / 2);
      const renewed = await store.renew(lease, TTL * 2);
      expect(renewed).toEqual({ ...lease, expiresAtMs: clock.nowMs() + TTL * 2 });
      expect(await store.read(KEY)).toEqual(renewed);
      clock.advance(TTL); // past the first expiry, not the renewed one
      expect(await rejection(store.acquire(KEY, 'b', TTL))).toBeInstanceOf(LeaseHeldError);
      // renewing with the old handle works too: key, owner and epoch are what count
      await store.renew(lease, TTL);
      await store.assertCurrent(renewed);
    });

    it('an expired lease nobody took over can still renew, and is still current', async () => {
      const lease = await store.acquire(KEY, 'a', TTL);
      clock.advance(TTL * 3);
      await store.assertCurrent(lease);
      const renewed = await store.renew(lease, TTL);
      expect(renewed.epoch).toBe(1);
      expect(await rejection(store.acquire(KEY, 'b', TTL))).toBeInstanceOf(LeaseHeldError);
    });

    it('renew with a stale epoch or another owner throws FencedError', async () => {
      const e1 = await store.acquire(KEY, 'a', TTL);
      await store.release(e1);
      const e2 = await store.acquire(KEY, 'a', TTL);
      expect(e2.epoch).toBe(2);
      const err = await rejection(store.renew(e1, TTL));
      expect(err).toBeInstanceOf(FencedError);
      expect((err as FencedError).code).toBe('FENCED');
      expect((err as FencedError).retryable).toBe(false);
      expect((err as LeaseFencedError).current).toEqual(e2);
      expect(await rejection(store.renew({ ...e2, owner: 'b' }, TTL))).toBeInstanceOf(FencedError);
      expect(await rejection(store.renew({ ...e2, epoch: 3 }, TTL))).toBeInstanceOf(FencedError);
      expect(await store.read(KEY)).toEqual(e2);
    });

    it('expiry (inclusive) allows a steal with a higher epoch that fences the old holder', async () => {
      const old = await store.acquire(KEY, 'a', TTL);
      clock.advance(TTL - 1);
      expect(await rejection(store.acquire(KEY, 'b', TTL))).toBeInstanceOf(LeaseHeldError);
      clock.advance(1); // now === expiresAtMs: expired
      const stolen = await store.acquire(KEY, 'b', TTL);
      expect(stolen.epoch).toBe(old.epoch + 1);
      expect(stolen.owner).toBe('b');
      const renewErr = await rejection(store.renew(old, TTL));
      expect(renewErr).toBeInstanceOf(FencedError);
      expect((renewErr as LeaseFencedError).current).toEqual(stolen);
      expect(await rejection(store.assertCurrent(old))).toBeInstanceOf(FencedError);
      await store.assertCurrent(stolen);
      expect(await store.read(KEY)).toEqual(stolen);
    });

    it('release then re-acquire gives a higher epoch at once; the released record keeps its epoch', async () => {
      const a = await store.acquire(KEY, 'a', TTL);
      await store.release(a);
      expect(await store.read(KEY)).toEqual({ key: KEY, owner: '', epoch: 1, expiresAtMs: 0 });
      expect(await rejection(store.assertCurrent(a))).toBeInstanceOf(FencedError);
      expect(await rejection(store.renew(a, TTL))).toBeInstanceOf(FencedError);
      const b = await store.acquire(KEY, 'b', TTL); // no clock advance needed
      expect(b.epoch).toBe(2);
    });

    it('epochs increase by one on every acquire, never going back', async () => {
      const epochs: number[] = [];
      for (let i = 0; i < 6; i++) {
        const l = await store.acquire(KEY, `o${i % 2}`, TTL);
        epochs.push(l.epoch);
        if (i % 2 === 0) await store.release(l);
        else clock.advance(TTL);
      }
      expect(epochs).toEqual([1, 2, 3, 4, 5, 6]);
    });

    it('release of a superseded or already released lease is a no-op', async () => {
      const old = await store.acquire(KEY, 'a', TTL);
      clock.advance(TTL);
      const current = await store.acquire(KEY, 'b', TTL);
      await store.release(old);
      expect(await store.read(KEY)).toEqual(current);
      await store.assertCurrent(current);
      await store.release(current);
      await store.release(current);
      expect(await store.read(KEY)).toEqual({ key: KEY, owner: '', epoch: 2, expiresAtMs: 0 });
    });

    it('rejects invalid input before any I/O', async () => {
      expect(await rejection(store.acquire(KEY, '', TTL))).toBeInstanceOf(InvalidInputError);
      expect(await rejection(store.acquire(KEY, 'a', 0))).toBeInstanceOf(InvalidInputError);
      expect(await rejection(store.acquire('', 'a', TTL))).toBeInstanceOf(InvalidInputError);
      expect(await rejection(store.renew({ key: KEY, owner: 'a', epoch: 0, expiresAtMs: 0 }, TTL))).toBeInstanceOf(
        InvalidInputError,
      );
      expect(await store.read(KEY)).toBeNull();
    });

    it('10 concurrent maintainer candidates: exactly one becomes maintainer', async () => {
      const o = { pipeline: 'pipe', experiment: 'exp', ttlMs: TTL };
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) => acquireMaintainer(store, { ...o, owner: `m${i}` })),
      );
      const won = results.filter((r): r is PromiseFulfilledResult<Lease> => r.status === 'fulfilled');
      expect(won).toHaveLength(1);
      expect(won[0]!.value.key).toBe(maintainerKey('pipe', 'exp'));
      expect(won[0]!.value.key).toBe('pipe/exp/maintainer');
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(LeaseHeldError);
    });

    it('a crashed maintainer (never renews) is replaced after expiry and fenced', async () => {
      const o = { pipeline: 'pipe', experiment: 'exp', ttlMs: TTL };
      const crashed = await acquireMaintainer(store, { ...o, owner: 'm-crashed' });
      clock.advance(TTL / 2);
      expect(await rejection(acquireMaintainer(store, { ...o, owner: 'm-next' }))).toBeInstanceOf(LeaseHeldError);
      clock.advance(TTL / 2);
      const next = await acquireMaintainer(store, { ...o, owner: 'm-next' });
      expect(next.epoch).toBe(crashed.epoch + 1);
      expect(await rejection(store.assertCurrent(crashed))).toBeInstanceOf(FencedError);
      expect(await rejection(store.renew(crashed, TTL))).toBeInstanceOf(FencedError);
      await store.release(crashed); // the zombie waking up and letting go changes nothing
      await store.assertCurrent(next);
    });

    it('writer slots: distinct slots per writer, LeaseHeldError when all are held, epochs in writerEpoch', async () => {
      const o = { pipeline: 'pipe', experiment: 'exp', slots: 4, ttlMs: TTL };
      const taken = await Promise.all(
        ['w0', 'w1', 'w2', 'w3'].map((owner) => acquireWriterSlot(store, { ...o, owner })),
      );
      expect(taken.map((t) => t.slot).sort()).toEqual([0, 1, 2, 3]);
      for (const t of taken) {
        expect(t.lease.key).toBe(slotKey('pipe', 'exp', t.slot));
        expect(t.writerEpoch).toBe(`s0${t.slot}-e000001`);
        expect(parseWriterEpoch(t.writerEpoch)).toEqual({ slot: t.slot, epoch: 1 });
      }
      const full = await rejection(acquireWriterSlot(store, { ...o, owner: 'w4', waitMs: 0, clock }));
      expect(full).toBeInstanceOf(LeaseHeldError);
      expect((full as LeaseHeldError).holder).toBeDefined();
      // one writer dies; after expiry the newcomer gets exactly its slot at the next epoch
      const dead = taken[2]!;
      for (const t of taken) if (t !== dead) await store.renew(t.lease, TTL * 10);
      clock.advance(TTL);
      const again = await acquireWriterSlot(store, { ...o, owner: 'w4', clock });
      expect(again.slot).toBe(dead.slot);
      expect(again.writerEpoch).toBe(`s0${dead.slot}-e000002`);
      expect(await rejection(store.assertCurrent(dead.lease))).toBeInstanceOf(FencedError);
      // asking for one slot by number
      await store.release(again.lease);
      const pinned = await acquireWriterSlot(store, { ...o, owner: 'w5', slot: dead.slot });
      expect(pinned.writerEpoch).toBe(`s0${dead.slot}-e000003`);
      expect(await rejection(acquireWriterSlot(store, { ...o, owner: 'w6', slot: dead.slot }))).toBeInstanceOf(
        LeaseHeldError,
      );
    });

    it('writer slots: a writer beyond the slots waits, and takes the first slot to expire', async () => {
      const o = { pipeline: 'pipe', experiment: 'exp', slots: 2, ttlMs: TTL, clock };
      const a = await acquireWriterSlot(store, { ...o, owner: 'a', slot: 0 });
      const b = await acquireWriterSlot(store, { ...o, owner: 'b', slot: 1 });
      await store.renew(a.lease, TTL * 3); // slot 1 (b) expires first, slot 0 much later
      const start = clock.nowMs();
      const c = await acquireWriterSlot(store, { ...o, owner: 'c', waitMs: TTL * 2 });
      expect(c.slot).toBe(1);
      expect(c.writerEpoch).toBe('s01-e000002');
      // it woke at b's expiry, not a back-off step later
      expect(clock.nowMs()).toBe(b.lease.expiresAtMs);
      expect(clock.nowMs() - start).toBe(TTL);
      expect(await rejection(store.assertCurrent(b.lease))).toBeInstanceOf(FencedError);
      await store.assertCurrent(a.lease);
    });

    it('writer slots: a slot released during the wait is taken without waiting for an expiry', async () => {
      const o = { pipeline: 'pipe', experiment: 'exp', slots: 2, ttlMs: TTL };
      const a = await acquireWriterSlot(store, { ...o, owner: 'a', slot: 0 });
      await acquireWriterSlot(store, { ...o, owner: 'b', slot: 1 });
      // the waiter's first sleep proves it found both slots held; a holder lets go right then
      let sleeps = 0;
      let released: Promise<void> | undefined;
      const watching = {
        nowMs: () => clock.nowMs(),
        sleep: async (ms: number) => {
          if (sleeps++ === 0) released = store.release(a.lease);
          await released;
          await clock.sleep(ms);
        },
      };
      const start = clock.nowMs();
      const c = await acquireWriterSlot(store, { ...o, owner: 'c', clock: watching, random: () => 0.5 });
      expect(sleeps).toBe(1);
      expect(c.slot).toBe(0);
      expect(c.writerEpoch).toBe('s00-e000002');
      expect(clock.nowMs() - start).toBeLessThanOrEqual(SLOT_WAIT_FIRST_MS); // one back-off step
      expect(clock.nowMs() - start).toBeLessThan(TTL);
    });

    it('writer slots: the wait ends at its deadline with LeaseHeldError naming every slot and the first to free', async () => {
      const o = { pipeline: 'pipe', experiment: 'exp', slots: 3, ttlMs: TTL, clock };
      const taken = [];
      for (const slot of [0, 1, 2]) taken.push(await acquireWriterSlot(store, { ...o, owner: `h${slot}`, slot }));
      await store.renew(taken[0]!.lease, TTL * 9);
      await store.renew(taken[2]!.lease, TTL * 5); // the first to free
      await store.renew(taken[1]!.lease, TTL * 7);
      const first = await store.read(slotKey('pipe', 'exp', 2));
      const start = clock.nowMs();
      // default wait: one lease ttl
      const err = await rejection(acquireWriterSlot(store, { ...o, owner: 'late' }));
      expect(err).toBeInstanceOf(LeaseHeldError);
      expect(clock.nowMs() - start).toBe(TTL); // waited exactly up to the deadline
      const held = err as LeaseHeldError;
      expect(held.holder).toEqual(first);
      expect(held.message).toContain('all 3 writer slots of pipe/exp are held (waited 10000 ms)');
      for (const slot of [0, 1, 2]) expect(held.message).toContain(`slot ${slot}: "h${slot}" until`);
      expect(held.message).toContain(`the first frees at ${first!.expiresAtMs} (slot 2)`);
      // waitMs 0: one pass, no sleep
      const before = clock.nowMs();
      expect(await rejection(acquireWriterSlot(store, { ...o, owner: 'late', waitMs: 0 }))).toBeInstanceOf(LeaseHeldError);
      expect(clock.nowMs()).toBe(before);
      // a pinned slot does not wait unless asked to
      expect(await rejection(acquireWriterSlot(store, { ...o, owner: 'late', slot: 1 }))).toBeInstanceOf(LeaseHeldError);
      expect(clock.nowMs()).toBe(before);
      const pinned = await rejection(acquireWriterSlot(store, { ...o, owner: 'late', slot: 1, waitMs: 2_000 }));
      expect((pinned as LeaseHeldError).message).toContain('writer slot 1 of pipe/exp is held (waited 2000 ms)');
      expect(clock.nowMs() - before).toBe(2_000);
      expect(await rejection(acquireWriterSlot(store, { ...o, owner: 'late', waitMs: -1 }))).toBeInstanceOf(
        InvalidInputError,
      );
    });

    it('LeaseKeeper renews in the background and reports the loss once fenced', async () => {
      const ttlMs = 600; // renewals every 200 ms of real time; expiry is driven by the ManualClock
      const lease = await store.acquire(KEY, 'a', ttlMs);
      const lost: FencedError[] = [];
      const keeper = new LeaseKeeper(store, lease, { ttlMs, clock, onLost: (e) => lost.push(e) });
      try {
        clock.advance(400);
        await vi.waitFor(() => expect(keeper.current().expiresAtMs).toBe(clock.nowMs() + ttlMs), {
          timeout: 10_000,
          interval: 20,
        });
        expect(keeper.current().epoch).toBe(1);
        expect(keeper.lost).toBe(false);
        expect((await store.read(KEY))?.expiresAtMs).toBe(keeper.current().expiresAtMs);
        // a pause longer than the ttl (the keeper could not renew in time), then a takeover
        await keeper.stop();
        clock.advance(ttlMs);
        expect(keeper.expired()).toBe(true);
        const thief = await store.acquire(KEY, 'b', TTL);
        await expect(keeper.renewNow()).rejects.toBeInstanceOf(FencedError);
        expect(keeper.lost).toBe(true);
        expect(lost).toHaveLength(1);
        expect(keeper.lostReason).toBe(lost[0]);
        await keeper.release(); // lost: must not touch the thief's lease
        expect(await store.read(KEY)).toEqual(thief);
      } finally {
        await keeper.stop();
      }
    });

    it('LeaseKeeper stops by itself on FencedError from a background renewal', async () => {
      const ttlMs = 300;
      const lease = await store.acquire(KEY, 'a', ttlMs);
      clock.advance(ttlMs);
      const thief = await store.acquire(KEY, 'b', TTL);
      const keeper = new LeaseKeeper(store, lease, ttlMs);
      await vi.waitFor(() => expect(keeper.lost).toBe(true), { timeout: 10_000, interval: 20 });
      expect(keeper.lostReason).toBeInstanceOf(FencedError);
      expect(keeper.current()).toEqual(lease);
      expect(await store.read(KEY)).toEqual(thief);
      await keeper.stop();
    });
  });
}
