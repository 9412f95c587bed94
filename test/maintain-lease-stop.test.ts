/**
 * A maintenance pass stops when its maintainer lease was taken over (lib/log/maintain/maintain.ts,
 * `leaseStop`; docs/design/shards.md, "Maintenance"): every step left is listed, an unreachable
 * lease store is not asked before every step, a takeover by a maintainer whose clock runs ahead is
 * noticed, a pass paused past its lease renews it (or stops), a store that answered nothing just
 * before the expiry is asked again after it, and a renewal in flight answered before a pause does
 * not let the paused pass run on (a renewal joined instead of sent did: since reverted). Real
 * Lance on a local root, manual clocks, gates.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { MaintenanceStep } from '../lib/api.ts';
import { ManualClock } from '../lib/clock.ts';
import { UnavailableError } from '../lib/errors.ts';
import type { LocalLeaseStore } from '../lib/lease/local.ts';
import path from 'node:path';
import { LeaseKeeper, maintainerKey } from '../lib/lease/slots.ts';
import { leaseLogIdAt } from './support/coord.ts';
import { EXPERIMENT, Pause, PIPELINE, raceFixture, settle, sharedLeases, TapLeaseStore, testLog, type TestLog, withFreshReader } from './support/race-kit.ts';

const TTL = 60_000;
const { setup } = raceFixture(TTL);
/** A ttl whose keeper renews every second of real time (the paused-pass tests below need a timer renewal to happen). */
const SHORT_TTL = 3_000;
const raceFixtureShort = raceFixture(SHORT_TTL);
const batch = (itemId: string) => ({ itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: itemId } });
const codes = (r: { failures: Array<{ step: string; code: string }> }) => r.failures.map((f) => `${f.step}:${f.code}`);
const AFTER_MERGE = ['zombies', 'deletions', 'snapshots', 'compaction', 'indexes', 'projection', 'claims', 'meta'];

const extra: { logs: TestLog[]; stores: LocalLeaseStore[] } = { logs: [], stores: [] };
afterEach(async () => {
  for (const t of extra.logs) await t.log.close().catch(() => undefined);
  for (const s of extra.stores) await s.close().catch(() => undefined);
  extra.logs = [];
  extra.stores = [];
});

/** A writer's generation left to the maintainer (its lease lapsed), and a maintainer that pauses at its base commit. */
function pausedAtCommit(s: ReturnType<typeof setup>, owner = 'maintainer', extra: Omit<Parameters<typeof s.open>[0], 'hooks'> = {}) {
  const pause = new Pause();
  const M = s.open({
    slot: 1,
    slots: 2,
    owner,
    ...extra,
    hooks: {
      beforeMergeStep: async (step) => {
        if (step === 'base-commit') await pause.hit();
      },
    },
  });
  return { pause, M };
}

async function orphanedWrite(s: ReturnType<typeof setup>): Promise<void> {
  const A = s.open({ slot: 0, slots: 2 });
  await A.log.append([batch('x')]);
  s.clock.advance(2 * TTL);
}

describe('a maintenance pass whose maintainer lease was taken over', () => {
  it('fenced during the orphans step, every step left is listed FENCED (zombies too)', async () => {
    const s = setup();
    await orphanedWrite(s);
    const pause = new Pause();
    const M1 = s.open({ slot: 1, slots: 2, owner: 'maintainer-1' });
    let paused = false;
    M1.leases.tap.before = async (op, key) => {
      // takeOrphans reads the orphan's slot record: pause there, inside the 'orphans' step
      if (op === 'read' && key.includes('/slot/') && !paused) {
        paused = true;
        await pause.hit();
      }
    };
    const stalled = settle(M1.log.maintain());
    try {
      await pause.reached.promise;
      s.clock.advance(2 * TTL);
      const m2 = await s.open({ slot: 1, slots: 2, owner: 'maintainer-2' }).log.maintain();
      expect([m2.ran, m2.failures]).toEqual([true, []]);
    } finally {
      pause.release();
    }
    const late = await stalled;
    expect(late.ok && codes(late.value)).toEqual(['retirements', ...AFTER_MERGE].map((step) => `${step}:FENCED`));
    expect(late.ok && late.value.stoppedBy).toBe('FENCED');
    expect(late.ok && late.value.failures.map((f) => f.skipped), 'each marked skipped').toEqual(['retirements', ...AFTER_MERGE].map(() => true));
  });

  it('a store that does not renew but answers the read is asked once; one that answers neither stops an expired pass', async () => {
    for (const readToo of [false, true]) {
      const s = setup();
      await orphanedWrite(s);
      const { pause, M } = pausedAtCommit(s);
      const asked: string[] = [];
      M.leases.tap.before = (op) => {
        if (op === 'renew' || (readToo && op === 'assertCurrent')) {
          asked.push(op);
          throw new UnavailableError('lease store unreachable (test)');
        }
      };
      const pass = settle(M.log.maintain());
      try {
        await pause.reached.promise;
        s.clock.advance(2 * TTL);
      } finally {
        pause.release();
      }
      const done = await pass;
      if (!readToo) {
        expect(done.ok && [done.value.failures, done.value.stoppedBy], 'nobody took the lease: the pass goes on').toEqual([[], undefined]);
        expect(asked).toEqual(['renew']);
      } else {
        expect(done.ok && codes(done.value)).toEqual(AFTER_MERGE.map((step) => `${step}:UNAVAILABLE`));
        expect(done.ok && done.value.stoppedBy).toBe('UNAVAILABLE');
        expect(asked).toEqual(['renew', 'assertCurrent']);
      }
    }
  });

  it('a takeover by a maintainer whose clock runs ahead (less than half the ttl) is noticed', async () => {
    const s = setup();
    await orphanedWrite(s);
    const { pause, M: M1 } = pausedAtCommit(s, 'maintainer-1');
    const stalled = settle(M1.log.maintain());
    try {
      await pause.reached.promise;
      s.clock.advance(TTL - 20_000); // M1: 20 s of its lease left on its own clock
      const c2 = new ManualClock(s.clock.nowMs() + 25_000); // M2's runs 25 s ahead: the lease ran out
      const store2 = sharedLeases(s.root, c2);
      extra.stores.push(store2);
      const M2 = testLog({ root: s.root, leases: store2, clock: c2, owner: 'maintainer-2', slots: 2, slot: 1, leaseTtlMs: TTL });
      extra.logs.push(M2);
      const m2 = await M2.log.maintain();
      expect([m2.ran, m2.heldBy], 'M2 took the maintainer lease over').toEqual([true, undefined]);
    } finally {
      pause.release();
    }
    const late = await stalled;
    expect(late.ok && [codes(late.value), late.value.stoppedBy]).toEqual([AFTER_MERGE.map((step) => `${step}:FENCED`), 'FENCED']);
  });

  it('a pass paused past its lease that nobody took renews it before its next step', async () => {
    const s = setup();
    await orphanedWrite(s);
    const atIndexes = new Pause();
    const { pause, M } = pausedAtCommit(s, 'maintainer', {
      tableTap: {
        beforeBaseOp: async (op) => {
          if (op === 'createIndex') await atIndexes.hit();
        },
      },
    });
    const pass = settle(M.log.maintain());
    let m2;
    try {
      await pause.reached.promise;
      s.clock.advance(2 * TTL);
      pause.release();
      await atIndexes.reached.promise;
      m2 = await s.open({ slot: 1, slots: 2, owner: 'maintainer-2' }).log.maintain();
    } finally {
      pause.release();
      atIndexes.release();
    }
    const done = await pass;
    expect(m2.heldBy, 'the paused pass renewed its lease before its next step').toBe('maintainer');
    expect(done.ok && done.value.failures).toEqual([]);
  });

  it('a store that answered nothing just before the expiry is asked again once the lease ran out, and the pass stops UNAVAILABLE', async () => {
    const s = setup();
    const A = s.open({ slot: 0, slots: 2 });
    await A.log.append([batch('x')]);
    await A.log.mergeOwnShard();
    await A.log.close();
    const asked: string[] = [];
    const M = s.open({ slot: 1, slots: 2, owner: 'maintainer' });
    M.leases.tap.before = (op, key) => {
      if ((op === 'renew' || op === 'assertCurrent') && key.endsWith('/maintainer')) {
        asked.push(op);
        throw new UnavailableError('lease store unreachable (test)');
      }
    };
    const onProgress = (step: MaintenanceStep) => {
      // 1 s of the lease left before 'retirements': asked, no answer, not run out: go on.
      if (step === 'orphans') s.clock.advance(TTL - 1_000);
      // Before the next step the lease ran out 1 s ago, less than a keeper interval after the ask.
      if (step === 'retirements') s.clock.advance(2_000);
    };
    const done = await M.log.maintain({ onProgress });
    expect([codes(done), done.stoppedBy]).toEqual([AFTER_MERGE.map((step) => `${step}:UNAVAILABLE`), 'UNAVAILABLE']);
    expect(asked, 'asked again once the lease ran out').toEqual(['renew', 'assertCurrent', 'renew', 'assertCurrent']);
  });

  it('an overtaken pass (same owner string) whose taker already released stops FENCED; the next pass finishes', async () => {
    const s = setup();
    await orphanedWrite(s);
    const { pause, M: M1 } = pausedAtCommit(s, 'same');
    const stalled = settle(M1.log.maintain());
    await pause.reached.promise;
    s.clock.advance(2 * TTL);
    const M2 = s.open({ slot: 1, slots: 2, owner: 'same' });
    const m2 = await M2.log.maintain();
    expect([m2.ran, m2.failures]).toEqual([true, []]);
    pause.release();
    const late = await stalled;
    expect(late.ok && late.value.stoppedBy).toBe('FENCED');
    const next = await M2.log.maintain();
    expect([next.ran, next.failures, next.stoppedBy]).toEqual([true, [], undefined]);
    expect(await withFreshReader(s.root, s.leases, s.clock, async (log) => (await log.trajectory('x')).length), 'x whole: each event once').toBe(3);
  });

  // Against a change that made renewNow join the renewal in flight (to save "one renewal too
  // many"): a renewal the store answered before the process was paused says nothing of the
  // lease after the pause. Both tests fail with the joining renewNow.
  it('a pass paused past its lease while its keeper\'s renewal was answered stops FENCED at its next step', async () => {
    const s = raceFixtureShort.setup();
    const A = s.open({ slot: 0, slots: 2 });
    await A.log.append([batch('x')]);
    await A.log.mergeOwnShard();
    await A.log.close();
    const atIndexes = new Pause(); // the pass, inside its 'indexes' step: the container freezes here
    const answered = new Pause(); // the keeper's timer renewal: answered by the store, not yet seen by the process
    let indexHeld = false;
    let renewHeld = false;
    const M = s.open({
      slot: 1,
      slots: 2,
      owner: 'm1',
      tableTap: {
        beforeBaseOp: async (op) => {
          if (op === 'createIndex' && !indexHeld) {
            indexHeld = true;
            await atIndexes.hit();
          }
        },
      },
    });
    M.leases.tap.after = async (op, key) => {
      if (op === 'renew' && key.endsWith('/maintainer') && !renewHeld) {
        renewHeld = true;
        await answered.hit();
      }
    };
    // The answer reaches the thawed process just after the pass asked before 'projection'.
    const onProgress = (step: MaintenanceStep) => {
      if (step === 'indexes') setTimeout(() => answered.release(), 50);
    };
    const pass = settle(M.log.maintain({ onProgress }));
    await atIndexes.reached.promise;
    await answered.reached.promise; // the keeper renews every ttl/3 of real time (1 s)
    s.clock.advance(2 * SHORT_TTL); // frozen past the lease
    expect((await s.leases.acquire(maintainerKey(PIPELINE, EXPERIMENT, leaseLogIdAt(path.join(s.root, 'datagen_checkpoints', PIPELINE, EXPERIMENT, 'log.lance'))), 'm2', SHORT_TTL)).owner, 'm2 took the lease over').toBe('m2');
    atIndexes.release();
    const done = await pass;
    expect(done.ok && [codes(done.value), done.value.stoppedBy]).toEqual([['projection:FENCED', 'claims:FENCED', 'meta:FENCED'], 'FENCED']);
  });

  it('the keeper alone: renewNow after a pause fails FENCED although the renewal in flight was answered before it', async () => {
    const s = setup();
    const store = new TapLeaseStore(s.leases);
    const key = maintainerKey(PIPELINE, EXPERIMENT);
    const lease = await store.acquire(key, 'm1', TTL);
    const answered = new Pause();
    let renewals = 0;
    store.tap.before = (op) => {
      if (op === 'renew') renewals++;
    };
    store.tap.after = async (op) => {
      if (op === 'renew' && renewals === 1) await answered.hit();
    };
    const keeper = new LeaseKeeper(store, lease, { ttlMs: TTL, intervalMs: 1, clock: s.clock });
    await answered.reached.promise; // the timer's renewal, answered by the store
    s.clock.advance(2 * TTL); // paused past the lease
    expect((await s.leases.acquire(key, 'm2', TTL)).owner).toBe('m2');
    const got = settle(keeper.renewNow());
    const stopped = keeper.stop();
    answered.release();
    const r = await got;
    await stopped;
    expect(r.ok ? 'renewed' : (r.error as { code?: string }).code, 'no renewal of a lease m2 holds').toBe('FENCED');
    expect([keeper.lost, renewals], 'lost; its own renewal was sent after the one in flight').toEqual([true, 2]);
  });
});
