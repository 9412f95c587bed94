/**
 * Writer slots come free promptly: a log opened with `closeOnSignals` gives its slot up on
 * SIGINT/SIGTERM (batches served, shard merged, lease released) and the process still ends by
 * the signal; a local lease whose holder process died is taken at once, through a new epoch and
 * the seal; a writer waiting for a slot says who holds the slots and until when (library and
 * CLI). Real processes, real logs in temp folders, the local lease store.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openLog, type OpenLogOptions, type SlotWait } from '../lib/index.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import { slotKey } from '../lib/lease/slots.ts';
import { leaseLogIdAt } from './support/coord.ts';
import { createBatch } from './support/batches.ts';
import { startNode, startTs, type Proc } from './support/proc.ts';

/** A lease far longer than any test: waiting it out would time the test out. */
const LONG_TTL = 600_000;

const newRoot = () => mkdtempSync(path.join(tmpdir(), 'dgcl-slots-'));
const leasesOf = (root: string) => new LocalLeaseStore({ dir: path.join(root, '.dgcl', 'leases') });

function holder(o: Partial<OpenLogOptions> & { root: string; itemId: string }): Proc {
  return startTs('test/support/slot-holder.ts', [], { DGCL_TEST_TASK: JSON.stringify({ pipeline: 'p', experiment: 'e', slots: 1, leaseTtlMs: LONG_TTL, ...o }) });
}

/** The holder's writer epoch, once it acked its batch (or its exit, if it died first). */
function acked(p: Proc): Promise<string> {
  return new Promise((resolve, reject) => {
    const seen = p.lines.find((l) => l.startsWith('acked '));
    if (seen) return resolve(seen.slice(6));
    p.onLine((l) => l.startsWith('acked ') && resolve(l.slice(6)));
    void p.exit.then((r) => reject(new Error(`the holder exited before its ack: ${r.code} ${r.signal} ${r.stderr}`)));
  });
}

describe('writer slots come free promptly', () => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    it(`closeOnSignals: on ${signal} the writer merges its shard and releases its slot, and the process ends by ${signal}`, async () => {
      const root = newRoot();
      const p = holder({ root, itemId: 'held', closeOnSignals: true });
      const epoch = await acked(p);
      const key = slotKey('p', 'e', 0, leaseLogIdAt(path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance')));
      const store = leasesOf(root);
      expect((await store.read(key))?.owner, 'held before the signal').not.toBe('');
      p.child.kill(signal);
      const r = await p.exit;
      expect(r.signal, r.stderr).toBe(signal);
      const lease = await store.read(key);
      expect(lease, 'released, epoch kept').toMatchObject({ owner: '', epoch: Number(epoch.slice(5)), expiresAtMs: 0 });
      const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
      expect((await log.stats()).shards.filter((s) => !s.retired), 'its shard was merged').toEqual([]);
      expect((await log.fold('held')).lastSeq).toBe(3);
      await log.close();
    });
  }

  it('a local lease whose holder process died is taken at once, without waiting out the ttl; the takeover seals the dead epoch', async () => {
    const root = newRoot();
    const p = holder({ root, itemId: 'held' });
    const epoch = await acked(p);
    p.child.kill('SIGKILL');
    await p.exit;
    const key = slotKey('p', 'e', 0, leaseLogIdAt(path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance')));
    const store = leasesOf(root);
    const dead = await store.read(key);
    expect(dead!.expiresAtMs, 'the dead holder\'s lease has not expired').toBeGreaterThan(Date.now() + LONG_TTL / 2);
    expect(await store.holderIsGone(key)).toBe(true);

    // One slot, a ttl of ten minutes: only a takeover of the dead holder's lease lets this through.
    const log = await openLog({ root, pipeline: 'p', experiment: 'e', slots: 1, leaseTtlMs: LONG_TTL });
    await log.append([createBatch('next')]);
    expect(log.writerEpoch).toBe(`s00-e${String(Number(epoch.slice(5)) + 1).padStart(6, '0')}`);
    expect((await log.fold('held')).lastSeq, "the dead writer's acked batch stays visible").toBe(3);
    const stats = await log.stats();
    expect(stats.shards.filter((s) => s.epoch === Number(epoch.slice(5))).map((s) => s.state)).toEqual(['sealed']);
    await log.close();
  }, 60_000);

  it('a lease held by a live process is not taken before its expiry', async () => {
    const root = newRoot();
    const p = holder({ root, itemId: 'held' });
    await acked(p);
    const store = leasesOf(root);
    const key = slotKey('p', 'e', 0, leaseLogIdAt(path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance')));
    await expect(store.acquire(key, 'me', 1000)).rejects.toMatchObject({ code: 'LEASE_HELD' });
    expect(await store.holderIsGone(key)).toBe(false);
    p.child.kill('SIGKILL');
    await p.exit;
  });

  it('a writer waiting for a slot is told who holds it and until when; close() of the holder lets it in', async () => {
    const root = newRoot();
    const first = await openLog({ root, pipeline: 'p', experiment: 'e', slots: 1, owner: 'first-writer' });
    await first.append([createBatch('a')]);
    let seen: SlotWait | null = null;
    const second = await openLog({
      root,
      pipeline: 'p',
      experiment: 'e',
      slots: 1,
      owner: 'second-writer',
      // Without the callback this append fails after the ttl: the slot is never given up.
      leaseTtlMs: 30_000,
      onSlotWait: (w) => {
        seen = w;
        void first.close();
      },
    });
    const t0 = Date.now();
    await second.append([createBatch('b')]);
    expect(seen).not.toBeNull();
    const w = seen! as SlotWait;
    expect(w).toMatchObject({ pipeline: 'p', experiment: 'e', slots: 1, slot: null, holders: [{ slot: 0, owner: 'first-writer', epoch: 1 }] });
    expect(w.holders[0]!.expiresAtMs).toBe(w.firstFreeAtMs);
    expect(w.untilMs).toBeGreaterThanOrEqual(t0 + 30_000 - 5_000);
    expect(second.writerEpoch).toBe('s00-e000002');
    await second.close();
  });

  it('dgcl append waiting for a slot prints who holds all of them; it ends by SIGTERM at once, holding nothing and writing nothing', async () => {
    const root = newRoot();
    const holders = [];
    for (let i = 0; i < 16; i++) {
      const log = await openLog({ root, pipeline: 'p', experiment: 'e', owner: `holder-${i}` });
      await log.append([createBatch(`h${i}`)]);
      holders.push(log);
    }
    const p = startNode('bin/dgcl.js', ['append', '--root', root, '--pipeline', 'p', '--experiment', 'e'], {}, `${JSON.stringify(createBatch('waiting'))}\n`);
    let stderr = '';
    const waiting = new Promise<void>((resolve) => {
      p.child.stderr!.on('data', (d) => {
        stderr += String(d);
        if (stderr.includes('\n')) resolve();
      });
    });
    await waiting;
    expect(stderr).toMatch(/^dgcl: waiting for a writer slot: all 16 writer slots of p\/e are held \(slot 0: holder-\d+ until \d{4}-\d\d-\d\dT[\d:.]+Z; .*slot 15: holder-\d+ until .*\); the first frees at .* unless renewed; giving up at /);
    p.child.kill('SIGTERM');
    const r = await p.exit;
    expect(r.signal, r.stderr).toBe('SIGTERM');
    expect(p.lines).toEqual([]);
    const log = holders[0]!;
    await expect(log.fold('waiting')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    for (const h of holders) await h.close();
  }, 120_000);
});
