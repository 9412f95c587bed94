/**
 * Local coordination in one SQLite file (lib/coord/sqlite.ts, lib/coord/choose.ts, the writer's
 * WAL sync before a commit that begins items): its handles, connections and durability.
 *
 *  - A handle closed in the turn it queued a write does not fail the whole turn's transaction (the
 *    queued closure looked its connection up again at flush time, through the now closed handle,
 *    so the writes other handles of the file queued in that turn were rejected).
 *  - A write waiting for another process's transaction does not block the event loop (SQLite's
 *    busy handler sleeps inside the synchronous call: lease renewals, other logs' acks and reads
 *    of the process all stopped for up to the busy timeout, 10 s).
 *  - Two first calls of a log's coordination store at once (maintain() and the first append() of a
 *    handle, both `create: false`) each opened a SqliteCoordStore; only one was kept and closed by
 *    close(), the other's connection stayed open for the life of the process (its WAL never
 *    checkpointed and removed at the end). A maintain() still running when close() is called
 *    opened the store after close() released the log's: close() waits for it.
 *  - An objects-coordinated local log (every log created before 0.3.0, and
 *    `coordination: 'objects'`) puts a new item's marker with fsync before the commit whose rows it
 *    guards: a power cut that kept the (fsynced) rows and lost the marker made the item look new:
 *    its next step was refused as "item not found", a retried creation acked `duplicate: false` a
 *    second time.
 * Not tested here (a timing test at scale): a claim sweep (deleteClaimsOlderThan) is one DELETE in
 * one transaction, scanning every claim: ~1.2 s for 500k of 1M claims on this machine; other
 * processes' writes wait behind it and fail after 10 s (proposed: chunks per transaction).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, promises as fsp, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { COORD_DB, SqliteCoordStore } from '../lib/coord/sqlite.ts';
import { coordDbPath } from './support/coord.ts';
import { openLog } from '../lib/index.ts';
import { claimKey, ITEMS_DIR, itemKey } from '../lib/log/layout.ts';
import { createBatch, stepBatch } from './support/batches.ts';

const root = mkdtempSync(path.join(tmpdir(), 'dgcl-coord-sqlite-handles-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const newDir = () => path.join(root, `t${n++}`, 'log.lance');
const EXPIRY = { expiresAfterMs: 3_600_000 };

describe('the local SQLite coordination file', () => {
  it('a handle closed in the turn it wrote does not fail the writes other handles queued in that turn', async () => {
    const dir = newDir();
    const a = await SqliteCoordStore.open(dir, { create: true });
    const b = await SqliteCoordStore.open(dir, { create: true });
    // One turn: b claims, a puts a marker and is closed (its log was closed), b puts a marker.
    const fromB = b.putIfAbsent(claimKey('cp'), 'b', EXPIRY);
    const fromA = a.put(itemKey('i-a'), 'a');
    a.close();
    const fromB2 = b.put(itemKey('i-b'), 'b');
    const [rB, rA, rB2] = await Promise.allSettled([fromB, fromA, fromB2]);
    expect(rB).toEqual({ status: 'fulfilled', value: true });
    expect(rB2.status).toBe('fulfilled');
    // a's write was made before its close: it lands like any other of the turn.
    expect(rA.status).toBe('fulfilled');
    expect(await b.getMany([claimKey('cp'), itemKey('i-a'), itemKey('i-b')])).toEqual(
      new Map([
        [claimKey('cp'), 'b'],
        [itemKey('i-a'), 'a'],
        [itemKey('i-b'), 'b'],
      ]),
    );
    b.close();
  });

  it("a write waiting for another process's transaction does not block this process's event loop", async () => {
    const dir = newDir();
    const s = await SqliteCoordStore.open(dir, { create: true });
    await s.put(itemKey('warm'), 'x');
    // Another process takes the write lock and holds it for 3 s (as a long claim sweep of a
    // maintainer, or a process stopped in the middle of its transaction, would).
    const file = path.join(dir, ...COORD_DB.split('/'));
    const holder = spawn(
      process.execPath,
      [
        '--no-warnings',
        '-e',
        `const { DatabaseSync } = require('node:sqlite');
         const db = new DatabaseSync(${JSON.stringify(file)});
         db.exec('BEGIN IMMEDIATE');
         db.exec("INSERT OR REPLACE INTO records VALUES ('_dgcl/items/holder', 'h', 0)");
         process.stdout.write('locked\\n');
         setTimeout(() => { db.exec('COMMIT'); db.close(); }, 3000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await new Promise<void>((resolve) => holder.stdout.on('data', (d: Buffer) => d.toString().includes('locked') && resolve()));
    const exited = new Promise((r) => holder.on('exit', r));
    // The event loop's longest stall while the write waits for the lock.
    let last = Date.now();
    let worst = 0;
    const tick = setInterval(() => {
      const now = Date.now();
      worst = Math.max(worst, now - last);
      last = now;
    }, 10);
    try {
      await new Promise((r) => setTimeout(r, 30));
      last = Date.now();
      await s.put(itemKey('waits'), 'y'); // lands once the other process commits (3 s < busy timeout)
      worst = Math.max(worst, Date.now() - last); // a stall that ends with the put is one too
    } finally {
      clearInterval(tick);
    }
    await exited;
    expect(await s.get(itemKey('waits'))).toBe('y');
    expect(await s.get(`${ITEMS_DIR}/holder`)).toBe('h'); // the other process's write, committed first
    expect(worst).toBeLessThan(1000); // was ~3000: the whole wait inside one synchronous call
    s.close();
  }, 30_000);

  it("maintain() and the first append() of a handle at once: close() closes the log's only connection (no reference leaks)", async () => {
    const exp = `f3-${n++}`;
    const a = await openLog({ root, pipeline: 'p', experiment: exp, owner: 'a' });
    await a.append([createBatch('i1')]);
    await a.close();
    const dir = path.join(root, 'datagen_checkpoints', 'p', exp, 'log.lance');
    const wal = coordDbPath(dir) + '-wal';
    expect(existsSync(wal)).toBe(false); // the last connection closed: checkpointed and removed
    const b = await openLog({ root, pipeline: 'p', experiment: exp, owner: 'b' });
    await Promise.all([b.maintain(), b.append([stepBatch('i1', 1)])]);
    await b.close();
    await new Promise((r) => setTimeout(r, 50)); // a close deferred behind a queued transaction has run
    // Every handle of the process is closed: so is the connection (SQLite removes the WAL then).
    expect(existsSync(wal)).toBe(false);
  });

  it('maintain() still running when close() is called: close() waits for it, then closes the connection it opened', async () => {
    const exp = `f3b-${n++}`;
    const a = await openLog({ root, pipeline: 'p', experiment: exp, owner: 'a' });
    await a.append([createBatch('i1')]);
    await a.close();
    const wal = coordDbPath(path.join(root, 'datagen_checkpoints', 'p', exp, 'log.lance')) + '-wal';
    const b = await openLog({ root, pipeline: 'p', experiment: exp, owner: 'b' });
    const maintained = b.maintain().then(
      (r) => ({ ok: true as const, deletedClaims: r.deletedClaims }),
      (e: unknown) => ({ ok: false as const, error: String(e) }),
    );
    await b.close(); // was: released the log's stores under the running maintenance, which then opened its own
    expect(await maintained).toEqual({ ok: true, deletedClaims: 0 });
    expect(existsSync(wal)).toBe(false); // the connection maintenance opened was closed with the log
    await expect(b.maintain()).rejects.toMatchObject({ code: 'INTERNAL' });
  });

  it('an objects-coordinated local log: a power cut after an ack keeps the item (its marker was durable before the rows)', async () => {
    const exp = `f4-${n++}`;
    const dir = path.join(root, 'datagen_checkpoints', 'p', exp, 'log.lance');
    const markers = path.join(dir, ...ITEMS_DIR.split('/'));
    // Which marker files were fsynced (with their folder) when the commit began.
    const synced = new Set<string>();
    const probe = await fsp.open(path.join(root, 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void> };
    await probe.close();
    const paths = new WeakMap<object, string>();
    const open = fsp.open;
    const realSync = proto.sync;
    (fsp as { open: unknown }).open = async function (this: unknown, p: string, ...rest: unknown[]) {
      const fh = await (open as (...a: unknown[]) => Promise<object>).call(this, p, ...rest);
      paths.set(fh, path.resolve(String(p)));
      return fh;
    };
    proto.sync = async function (this: object) {
      await realSync.call(this);
      const p = paths.get(this);
      if (p) synced.add(p);
    };
    let atCommit: { markerFiles: string[]; synced: string[] } | null = null;
    try {
      const log = await openLog({
        root,
        pipeline: 'p',
        experiment: exp,
        owner: 'a',
        coordination: 'objects',
        hooks: {
          beforeCommit: async () => {
            atCommit ??= { markerFiles: (await fsp.readdir(markers)).map((f) => path.join(markers, f)), synced: [...synced] };
          },
        },
      });
      await log.append([createBatch('i1')]);
      await log.close();
    } finally {
      (fsp as { open: unknown }).open = open;
      proto.sync = realSync;
    }
    expect(atCommit).not.toBeNull();
    const { markerFiles, synced: durable } = atCommit!;
    expect(markerFiles).toHaveLength(1);
    // The marker's name in its folder fsynced before the commit began (its body need not be: a
    // body lost with a power cut is one no writer put, so writers read the item).
    expect(durable).toContain(markers);
  });
});
