/**
 * Repair and adoption on a local root (lib/log/admin/rehome.ts; docs/operations.md "Repairing a
 * log"): records lost and rebuilt from the events, a copy made writable, a writer from before a
 * repair moved to the new records, a running writer refusing the repair.
 */
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, systemClock, type Clock } from '../lib/clock.ts';
import { UnavailableError } from '../lib/errors.ts';
import { DEFAULTS } from '../lib/index.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import { LanceCheckpointLog } from '../lib/log/log.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logUri, parseRoot } from '../lib/storage/location.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { expectAcksVisible, settle } from './support/race-kit.ts';
import { coordDbPath } from './support/coord.ts';
import { exportItems } from '../lib/export/export.ts';

const TTL = 60_000;
const opened: LanceCheckpointLog[] = [];

afterEach(async () => {
  for (const l of opened.splice(0)) await l.close().catch(() => undefined);
});

function tempRoot(): string {
  return mkdtempSync(path.join(tmpdir(), 'dgcl-rehome-'));
}

const logDir = (root: string, experiment = 'e') => path.join(root, 'datagen_checkpoints', 'p', experiment, 'log.lance');

/** A log process on a local root: its own lease store view (its clock) over the root's lease files. */
function open(root: string, o: { owner: string; clock?: Clock; slot?: number; ttlMs?: number; experiment?: string; objectMarkers?: boolean; holdMs?: number; objects?: LocalObjectStore }): LanceCheckpointLog {
  const clock = o.clock ?? systemClock;
  const uri = logUri(parseRoot(root), 'p', o.experiment ?? 'e');
  const log = new LanceCheckpointLog({
    ...DEFAULTS,
    pipeline: 'p',
    experiment: o.experiment ?? 'e',
    uri,
    objects: o.objects ?? new LocalObjectStore(uri),
    storageOptions: undefined,
    leases: new LocalLeaseStore({ dir: path.join(root, '.dgcl', 'leases'), clock }),
    owner: o.owner,
    clock,
    slots: 2,
    ...(o.slot !== undefined ? { slot: o.slot } : {}),
    leaseTtlMs: o.ttlMs ?? TTL,
    ...(o.objectMarkers ? { coordination: 'objects' as const } : {}),
    ...(o.holdMs !== undefined ? { repairLeaseHoldMs: o.holdMs } : {}),
  });
  opened.push(log);
  return log;
}

const record = (root: string, experiment = 'e') => readFileSync(path.join(logDir(root, experiment), '_dgcl', 'coordination'), 'utf8');
const logIds = (root: string, experiment = 'e') => readdirSync(path.join(logDir(root, experiment), '_dgcl', 'meta')).filter((n) => n.startsWith('log.'));

describe('repair', () => {
  it('a log whose coord.sqlite was deleted is refused, then repaired: items continue at their seqs and a resent batch is a duplicate', async () => {
    const root = tempRoot();
    const W = open(root, { owner: 'w' });
    const acks: Ack[] = [];
    acks.push(...(await W.append([createBatch('a'), createBatch('b')])));
    acks.push(...(await W.append([stepBatch('a', 1)])));
    await W.deleteItem('b', { throughSeq: acks[1]!.lastSeq });
    await W.close();
    const before = { record: record(root), ids: logIds(root) };
    const db = coordDbPath(logDir(root));
    for (const f of ['', '-wal', '-shm']) rmSync(db + f, { force: true });

    const refused = await settle(open(root, { owner: 'x' }).append([stepBatch('a', 2)]));
    expect(refused.ok ? 'appended' : (refused.error as { code?: string }).code, 'a writer refuses a log whose markers are gone').toBe('CORRUPT');

    const report = await open(root, { owner: 'r' }).repair();
    // b's only checkpoint is deleted: its claim is not rebuilt (its rows are not read), its marker is.
    expect({ markers: report.markers, claims: report.claims, previous: report.previous }).toEqual({ markers: 2, claims: 2, previous: before.record });
    expect(record(root), 'a new record, scoped by a new id').toBe(`sqlite ${report.logId} v2`);
    expect(logIds(root).some((n) => before.ids.includes(n)), 'the log has a new identity').toBe(false);
    expect(existsSync(coordDbPath(logDir(root))), 'the records are back, in a file of the new id').toBe(true);

    const X = open(root, { owner: 'x2' });
    const [resent] = await X.append([stepBatch('a', 1)]);
    expect({ duplicate: resent!.duplicate, firstSeq: resent!.firstSeq }, 'the resent batch is answered as the first time').toEqual({ duplicate: true, firstSeq: acks[2]!.firstSeq });
    const [next] = await X.append([stepBatch('a', 2)]);
    expect(next!.firstSeq, 'a continues after its last event').toBe(acks[2]!.lastSeq + 1);
    const [b] = await X.append([createBatch('b')]);
    expect(b!.firstSeq, 'a deleted item made again continues after its deleted seqs').toBe(acks[1]!.lastSeq + 1);
    await expectAcksVisible(X, [...acks.filter((a) => a.itemId === 'a'), next!, b!], 'after the repair');
  });

  it('is refused, and changes nothing, while a writer of the log runs', async () => {
    const root = tempRoot();
    const W = open(root, { owner: 'w', ttlMs: 1500 });
    await W.append([createBatch('a')]);
    const before = record(root);
    const r = await settle(open(root, { owner: 'r', ttlMs: 1500 }).repair());
    expect(r.ok ? 'repaired' : `${(r.error as { code?: string }).code}: ${(r.error as Error).message}`).toMatch(/^LEASE_HELD: writer slot \d of p\/e is held .*"w" until .*stop them and run it again$/);
    expect(record(root)).toBe(before);
    await W.append([stepBatch('a', 1)]);
  });

  it('a copy made with cp -r is refused, then adopted: it is written on its own and its origin is not touched', async () => {
    const root = tempRoot();
    const W = open(root, { owner: 'w' });
    const acks = await W.append([createBatch('a'), createBatch('b')]);
    await W.close();
    const other = tempRoot();
    cpSync(path.join(root, 'datagen_checkpoints'), path.join(other, 'datagen_checkpoints'), { recursive: true });
    // The copy's slots start again in the other root's lease files: epochs its shards already name.
    const C = open(other, { owner: 'c' });
    const refused = await settle(C.append([stepBatch('a', 1)]));
    expect(refused.ok ? 'appended' : (refused.error as { code?: string }).code).toBe('CORRUPT');
    const report = await open(other, { owner: 'r' }).adopt();
    expect(report.markers).toBe(2);
    const [a] = await open(other, { owner: 'c2' }).append([stepBatch('a', 1)]);
    expect(a!.firstSeq).toBe(acks[0]!.lastSeq + 1);
    const origin = open(root, { owner: 'o' });
    expect((await origin.fold('a')).lastSeq, 'the origin has not seen the copy\'s event').toBe(acks[0]!.lastSeq);
  });

  it('a log restored in place from a backup, then adopted: a reader from before does not read the lost history, a writer from before does not bring it back, writes continue', async () => {
    const root = tempRoot();
    const W = open(root, { owner: 'w', slot: 0 });
    const kept = await W.append([createBatch('a')]);
    await W.close();
    const backup = tempRoot();
    cpSync(path.join(root, 'datagen_checkpoints'), path.join(backup, 'datagen_checkpoints'), { recursive: true });
    // The history the restore loses: a reader and a writer open across it.
    const reader = open(root, { owner: 'reader' });
    const before = open(root, { owner: 'before', slot: 1 });
    const lost = await before.append([stepBatch('a', 1), createBatch('gone')]);
    expect((await reader.fold('a')).lastSeq).toBe(lost[0]!.lastSeq);
    await before.close(); // its own shard merged into the base of the history being lost
    rmSync(path.join(root, 'datagen_checkpoints'), { recursive: true, force: true });
    cpSync(path.join(backup, 'datagen_checkpoints'), path.join(root, 'datagen_checkpoints'), { recursive: true });
    await open(root, { owner: 'r' }).adopt();
    expect((await reader.fold('a')).lastSeq, 'the reader from before reads the restored log').toBe(kept[0]!.lastSeq);
    await expect(reader.fold('gone'), 'an item of the lost history').rejects.toMatchObject({ code: 'NOT_FOUND' });
    const [next] = await open(root, { owner: 'after' }).append([stepBatch('a', 1)]);
    expect({ firstSeq: next!.firstSeq, duplicate: next!.duplicate }, 'a continues after the restored history').toEqual({ firstSeq: kept[0]!.lastSeq + 1, duplicate: false });
  });

  it('a snapshot taken before a repair reads the same after it', async () => {
    const root = tempRoot();
    const W = open(root, { owner: 'w' });
    await W.append([createBatch('a'), createBatch('b')]);
    await W.append([{ ...stepBatch('a', 1), terminal: 'completed' }]);
    await W.snapshot('before');
    await W.close();
    const out = (name: string) => path.join(root, `${name}.jsonl`);
    await exportItems(open(root, { owner: 'e1' }), { out: out('one'), status: 'any', snapshot: 'before' });
    await open(root, { owner: 'r' }).repair();
    await exportItems(open(root, { owner: 'e2' }), { out: out('two'), status: 'any', snapshot: 'before' });
    expect(readFileSync(out('two'), 'utf8')).toBe(readFileSync(out('one'), 'utf8'));
    expect((await open(root, { owner: 'l' }).snapshots()).map((x) => x.name)).toEqual(['before']);
  });

  it('a writer frozen across a repair moves to the new records: it never seals the epoch of a writer that started after the repair', async () => {
    const root = tempRoot();
    const wClock = new ManualClock();
    const W = open(root, { owner: 'w', clock: wClock, slot: 0 });
    await W.append([createBatch('a')]);
    // W freezes (its clock stands still); for everyone else its lease runs out.
    const later = new ManualClock(wClock.nowMs() + 2 * TTL);
    await open(root, { owner: 'r', clock: later }).repair();
    const X = open(root, { owner: 'x', clock: later, slot: 0 });
    const xAcks = [...(await X.append([createBatch('x')]))];
    // W thaws and writes again, as a caller retries: refused while it finds out (its records were
    // rebuilt, its lease taken), then it takes slot 0 again, of the new records.
    let w = await settle(W.append([createBatch('w')]));
    for (let i = 0; i < 3 && !w.ok && ['FENCED', 'UNAVAILABLE'].includes((w.error as { code?: string }).code ?? ''); i++) w = await settle(W.append([createBatch('w')]));
    xAcks.push(...(await X.append([stepBatch('x', 1)])));
    await expectAcksVisible(open(root, { owner: 'reader', clock: later }), xAcks, 'the acks of the writer that started after the repair');
    expect(w.ok ? 'appended' : (w.error as { code?: string }).code, 'W waits for slot 0 of the new records (held by X) and gives up').toBe('LEASE_HELD');
  }, 60_000);

  it('a writer of a log with object markers, frozen across a repair, takes a slot once the old leases ran out: of the new records, so its acks stay visible', async () => {
    const root = tempRoot();
    const HOLD = 1_000;
    const wClock = new ManualClock();
    const W = open(root, { owner: 'w', clock: wClock, slot: 0, objectMarkers: true, holdMs: HOLD });
    const wAcks = [...(await W.append([createBatch('w')]))];
    const later = new ManualClock(wClock.nowMs() + 2 * TTL);
    await open(root, { owner: 'r', clock: later, holdMs: HOLD }).repair();
    // W thaws after the repair's hold on the old leases ran out: slot 0 of the old scope is free.
    // Its markers were objects, which the repair leaves in place: no marker read tells W that the
    // records moved, only reading the record again after taking a slot does.
    wClock.advance(2 * TTL + HOLD + 10);
    let w = await settle(W.append([stepBatch('w', 1)]));
    for (let i = 0; i < 3 && !w.ok && ['FENCED', 'UNAVAILABLE'].includes((w.error as { code?: string }).code ?? ''); i++) w = await settle(W.append([stepBatch('w', 1)]));
    if (!w.ok) throw w.error;
    wAcks.push(...w.value);
    // W's lease runs out for a writer of the new records, which takes slot 0; W writes again.
    const X = open(root, { owner: 'x', clock: new ManualClock(wClock.nowMs() + 2 * TTL), slot: 0 });
    const xAcks = [...(await X.append([createBatch('x')]))];
    const again = await settle(W.append([stepBatch('w', 2)]));
    if (again.ok) wAcks.push(...again.value);
    const reader = open(root, { owner: 'reader', clock: new ManualClock(wClock.nowMs() + 2 * TTL) });
    await expectAcksVisible(reader, xAcks, "the acks of the writer that took W's slot");
    await expectAcksVisible(reader, wAcks, "W's acks");
  }, 60_000);

  it("a repair whose switch times out keeps the old records locked: no writer of them acks a commit that the switch, landing late, would hide", async () => {
    const root = tempRoot();
    const uri = logUri(parseRoot(root), 'p', 'e');
    let inFlight: { key: string; body: string } | null = null;
    /** The repair's PUT of the record times out; the request lands later (below). */
    class SwitchTimesOut extends LocalObjectStore {
      override async put(key: string, body: string): Promise<void> {
        if (key !== '_dgcl/coordination') return super.put(key, body);
        inFlight = { key, body };
        throw new UnavailableError(`PUT ${key} timed out`);
      }
    }
    const wClock = new ManualClock();
    const W = open(root, { owner: 'w', clock: wClock, slot: 0 });
    const wAcks = [...(await W.append([createBatch('w')]))];
    const later = new ManualClock(wClock.nowMs() + 2 * TTL);
    const failed = await settle(open(root, { owner: 'r', clock: later, objects: new SwitchTimesOut(uri) }).repair());
    expect(failed.ok ? 'repaired' : (failed.error as { code?: string }).code, 'a repair whose switch timed out').toBe('UNAVAILABLE');
    // W, frozen across the repair, thaws while the record still names the old records.
    wClock.advance(2 * TTL + 10);
    const attempt = async (b: ReturnType<typeof stepBatch>) => {
      let w = await settle(W.append([b]));
      for (let i = 0; i < 3 && !w.ok && ['FENCED', 'UNAVAILABLE'].includes((w.error as { code?: string }).code ?? ''); i++) w = await settle(W.append([b]));
      if (w.ok) wAcks.push(...w.value);
      return w.ok ? 'acked' : (w.error as { code?: string }).code;
    };
    expect(await attempt(stepBatch('w', 1)), "W's append while the switch's outcome is unknown").toBe('LEASE_HELD');
    // The switch lands. A writer of the new records takes slot 0, sealing the slot's earlier epochs first.
    await new LocalObjectStore(uri).put(inFlight!.key, inFlight!.body);
    const X = open(root, { owner: 'x', clock: new ManualClock(wClock.nowMs()), slot: 0 });
    const xAcks = [...(await X.append([createBatch('x')]))];
    await attempt(stepBatch('w', 1));
    const reader = open(root, { owner: 'reader', clock: new ManualClock(wClock.nowMs()) });
    await expectAcksVisible(reader, xAcks, 'the acks of the writer of the new records');
    await expectAcksVisible(reader, wAcks, "W's acks");
  }, 60_000);
});
