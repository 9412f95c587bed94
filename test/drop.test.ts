/**
 * `dropLog` (lib/log/admin/drop.ts) on a local root with real Lance and local lease files: what
 * it deletes, what it leaves (the shared lease records, released), its refusal while the log is
 * in use, a second drop, and what becomes of a writer that was paused through the drop.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock, type Clock } from '../lib/clock.ts';
import { LeaseHeldError, openLog, type OpenLogOptions } from '../lib/index.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import { acquireMaintainer, DEFAULT_SLOTS, slotKey } from '../lib/lease/slots.ts';
import { dropLog, dropPlan } from '../lib/log/admin/drop.ts';
import { HeldLeases } from '../lib/log/admin/held-leases.ts';
import { leaseKeysOf, slotsToTake } from '../lib/log/admin/lease-keys.ts';
import { openPlace, type OpenedPlace } from '../lib/log/admin/place.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { leaseLogIdAt } from './support/coord.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { tree } from './support/tree.ts';

const dirs: string[] = [];
const logs: CheckpointLog[] = [];
const places: OpenedPlace[] = [];
afterEach(async () => {
  for (const l of logs.splice(0)) await l.close().catch(() => undefined);
  for (const p of places.splice(0)) await p.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempRoot(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'dgcl-drop-'));
  dirs.push(d);
  return d;
}

async function open(o: Partial<OpenLogOptions> & { root: string }): Promise<CheckpointLog> {
  const log = await openLog({ pipeline: 'p', experiment: 'e', leaseTtlMs: 3_600_000, mergeIdleMs: 0, ...o });
  logs.push(log);
  return log;
}

async function place(root: string, experiment = 'e'): Promise<OpenedPlace> {
  const p = await openPlace({ root, pipeline: 'p', experiment });
  places.push(p);
  return p;
}

/** A closed log with a few items, merged and not. */
async function writtenLog(root: string, o: Partial<OpenLogOptions> = {}): Promise<void> {
  const w = await open({ root, owner: 'w', slot: 0, mergeEveryCommits: 2, ...o });
  for (let i = 0; i < 5; i++) await w.append([createBatch(`i${i}`), stepBatch(`i${i}`, 1)]);
  await w.close();
}

const leaseStore = (root: string) => new LocalLeaseStore({ dir: path.join(root, '.dgcl', 'leases') });
const logDir = (root: string, experiment = 'e') => path.join(root, 'datagen_checkpoints', 'p', experiment);
const files = (dir: string) => tree(dir).filter((l) => !l.endsWith('/')).length;
/** The id the log's lease keys are scoped by (its coordination record). */
const idOf = (root: string, experiment = 'e') => leaseLogIdAt(path.join(logDir(root, experiment), 'log.lance'));

describe('dropLog', () => {
  it('deletes every object of the log (its SQLite file too) and its own lease records; other logs stay', async () => {
    const root = tempRoot();
    await writtenLog(root);
    await writtenLog(root, { experiment: 'other' });
    const objects = files(path.join(logDir(root), 'log.lance'));
    expect(readdirSync(path.join(logDir(root), 'log.lance', '_dgcl')), 'the fixture: a local log keeps its records in SQLite').toContain(`coord.${idOf(root)}.sqlite`);
    const leases = leaseStore(root);
    const id = idOf(root);
    expect(await leases.read(slotKey('p', 'e', 0, id)), 'the writer held slot 0').not.toBeNull();
    const otherTree = tree(logDir(root, 'other'));

    const result = await dropLog(await place(root), { waitMs: 0 });
    expect(result).toEqual({ objects, records: 0, leases: DEFAULT_SLOTS + 1 });
    expect(existsSync(logDir(root)), 'the experiment\'s folder went with its log').toBe(false);
    expect(tree(logDir(root, 'other'))).toEqual(otherTree);
    expect(await leases.read(slotKey('p', 'e', 0, id)), 'its lease keys, named by its id, went with it').toBeNull();
    const reader = await open({ root });
    await expect(reader.items()).rejects.toMatchObject({ code: 'LOG_NOT_FOUND' });
  });

  it('a second drop finds nothing to drop', async () => {
    const root = tempRoot();
    await writtenLog(root);
    const p = await place(root);
    const objects = files(path.join(logDir(root), 'log.lance'));
    expect((await dropLog(p, { waitMs: 0 })).objects).toBe(objects);
    const leaseFiles = tree(path.join(root, '.dgcl'));
    expect(await dropLog(p, { waitMs: 0 })).toEqual({ objects: 0, records: 0, leases: 0 });
    expect(tree(path.join(root, '.dgcl')), 'no lease is taken for a log that is gone').toEqual(leaseFiles);
    expect((await dropPlan(p)).exists).toBe(false);
  });

  it('is refused while a writer holds its slot or maintenance runs, naming the holder, and deletes nothing', async () => {
    const root = tempRoot();
    const w = await open({ root, owner: 'live-writer', slot: 3 });
    await w.append([createBatch('x')]);
    const before = tree(path.join(root, 'datagen_checkpoints'));
    const p = await place(root);
    const err = await dropLog(p, { waitMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaseHeldError);
    const id = idOf(root);
    expect(err).toMatchObject({ code: 'LEASE_HELD', holder: { key: slotKey('p', 'e', 3, id), owner: 'live-writer' } });
    expect((err as Error).message).toContain(`writer slot 3 (p/e/${id}/slot/3): "live-writer"`);
    expect(tree(path.join(root, 'datagen_checkpoints'))).toEqual(before);
    // What it took meanwhile was given back: another writer takes a slot at once.
    const leases = leaseStore(root);
    expect((await leases.read(slotKey('p', 'e', 0, id)))?.owner).toBe('');
    expect(await w.append([stepBatch('x', 1)])).toHaveLength(1);
    await w.close();

    const m = await acquireMaintainer(leases, { pipeline: 'p', experiment: 'e', logId: id, owner: 'maintainer-x', ttlMs: 3_600_000 });
    await expect(dropLog(p, { waitMs: 100 })).rejects.toMatchObject({ code: 'LEASE_HELD', holder: { owner: 'maintainer-x' } });
    expect(await open({ root }).then((r) => r.fold('x'))).toMatchObject({ itemId: 'x' });
    await leases.release(m);
    expect((await dropLog(p, { waitMs: 0 })).leases).toBe(DEFAULT_SLOTS + 1);
  });

  it('waits for a lease that frees within its wait', async () => {
    const root = tempRoot();
    await writtenLog(root);
    const leases = leaseStore(root);
    const held = await leases.acquire(slotKey('p', 'e', 5, idOf(root)), 'leaving-writer', 3_600_000);
    let released = false;
    setTimeout(() => void leases.release(held).then(() => (released = true)), 300);
    expect((await dropLog(await place(root), { waitMs: 20_000 })).leases).toBe(DEFAULT_SLOTS + 1);
    expect(released, 'the drop waited for the holder to let go').toBe(true);
    expect(existsSync(logDir(root))).toBe(false);
  });

  it('takes every slot a log was written with, beyond the default count', async () => {
    const root = tempRoot();
    await writtenLog(root, { slots: 20, slot: 18 });
    const p = await place(root);
    expect(slotsToTake(await p.objects.list('_dgcl/meta'))).toBe(19);
    const plan = await dropPlan(p);
    const id = leaseLogIdAt(path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance'));
    expect(plan.leases.map((k) => k.key)).toEqual(leaseKeysOf({ pipeline: 'p', experiment: 'e', logId: id, scoped: true }, 19).map((k) => k.key));
    const leases = leaseStore(root);
    expect(await leases.read(slotKey('p', 'e', 18, id)), 'the writer held slot 18').not.toBeNull();
    expect((await dropLog(p, { waitMs: 0 })).leases).toBe(20);
    // The log's own lease keys (scoped by its id) go with it.
    expect(await leases.read(slotKey('p', 'e', 18, id))).toBeNull();
  });

  it('ends a lease named by the log id by deleting its record, a shared one by releasing it', async () => {
    const root = tempRoot();
    const store = leaseStore(root);
    const scoped = 'p/e/2f1b6c1e-0000-4000-8000-000000000001/slot/0';
    const keys = [
      { key: scoped, what: 'writer slot 0', scoped: true },
      { key: slotKey('p', 'e', 0), what: 'writer slot 0', scoped: false },
    ];
    const held = await HeldLeases.take(store, keys, { owner: 'dropper', ttlMs: 60_000, waitMs: 0, clock: systemClock });
    expect(await held.end(null, (k) => k.scoped)).toBe(1);
    expect(await store.read(scoped), 'deleted').toBeNull();
    expect((await store.read(slotKey('p', 'e', 0)))?.owner, 'still held').toBe('dropper');
    expect(await held.end(null, () => true)).toBe(1);
    expect(await store.read(slotKey('p', 'e', 0)), 'released, its record kept').toMatchObject({ owner: '', epoch: 1 });
  });

  it('fences a writer paused through the drop: its next commit is refused (FENCED) and no log appears at the place', async () => {
    const root = tempRoot();
    // Renewals never run (a frozen process); its lease lapses after the ttl.
    const frozen: Clock = { nowMs: () => Date.now(), sleep: (ms) => new Promise((r) => setTimeout(r, ms)), setTimer: () => () => {} };
    const w = await open({ root, owner: 'paused', clock: frozen, leaseTtlMs: 1_000 });
    await w.append([createBatch('x')]);
    await new Promise((r) => setTimeout(r, 1_200));
    expect((await dropLog(await place(root), { waitMs: 0 })).leases).toBe(DEFAULT_SLOTS + 1);

    // Refused, retryable: its records are gone (UNAVAILABLE: the record changed) or its epoch was taken (FENCED).
    await expect(w.append([createBatch('y')])).rejects.toMatchObject({ retryable: true });
    const reader = await open({ root });
    await expect(reader.items(), 'the fenced commit\'s files are no log').rejects.toMatchObject({ code: 'LOG_NOT_FOUND' });
  });
});
