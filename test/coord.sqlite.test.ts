/**
 * The CoordStore conformance suite on lib/coord/sqlite.ts (one SQLite file beside a log on a
 * local root), and what only this store has: one transaction per turn of the event loop, claims
 * expired by age, a connection shared and closed with its last handle, and exclusive claims
 * between processes.
 */
import { spawn } from 'node:child_process';
import { promises as fs, mkdirSync, readdirSync, readlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { COORD_DB, SqliteCoordStore } from '../lib/coord/sqlite.ts';
import { CorruptError, UnavailableError } from '../lib/errors.ts';
import { claimKey, itemKey } from '../lib/log/layout.ts';
import { coordStoreConformance } from './conformance/coord.ts';
import { rejection } from './support/rejection.ts';

const root = await fs.mkdtemp(path.join(os.tmpdir(), 'dgcl-coord-sqlite-'));
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});
const EXPIRY = { expiresAfterMs: 3_600_000 };

let n = 0;
const newDir = () => path.join(root, `t${n++}`, 'log.lance');

/** Two stores of two logs for the conformance suite; `prepare` makes each log's file first. */
function conformanceStores(prepare?: (logDir: string) => void) {
  return {
    kind: 'sqlite' as const,
    async create() {
      const dir = path.join(root, `t${n++}`);
      const [store, other] = await Promise.all(
        ['a', 'b'].map((l) => {
          const logDir = path.join(dir, l, 'log.lance');
          prepare?.(logDir);
          return SqliteCoordStore.open(logDir, { create: !prepare });
        }),
      );
      return {
        store: store!,
        other: other!,
        destroy: async () => {
          store!.close();
          other!.close();
          await fs.rm(dir, { recursive: true, force: true });
        },
      };
    },
  };
}

coordStoreConformance('sqlite beside a local log', conformanceStores());

/** A database in the table shape files made before the rowid table still have (same layout version). */
function earlierShape(logDir: string): void {
  mkdirSync(path.join(logDir, '_dgcl'), { recursive: true });
  const { DatabaseSync } = process.getBuiltinModule('node:sqlite') as typeof import('node:sqlite');
  const db = new DatabaseSync(path.join(logDir, ...COORD_DB.split('/')));
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('CREATE TABLE records (key TEXT PRIMARY KEY, body TEXT NOT NULL, written_ms INTEGER NOT NULL) WITHOUT ROWID');
  db.exec('CREATE INDEX records_by_time ON records (written_ms)');
  db.exec('PRAGMA user_version = 1');
  db.close();
}

coordStoreConformance('sqlite beside a local log, a file in the earlier table shape (WITHOUT ROWID)', conformanceStores(earlierShape));

describe('SqliteCoordStore', () => {
  it('a new file keeps records in a rowid table with a unique key; one in the earlier shape is used as it is', async () => {
    const { DatabaseSync } = process.getBuiltinModule('node:sqlite') as typeof import('node:sqlite');
    const ddl = (dir: string) => {
      const db = new DatabaseSync(path.join(dir, ...COORD_DB.split('/')));
      const sql = (db.prepare("SELECT sql FROM sqlite_master WHERE name = 'records'").get() as { sql: string }).sql;
      db.close();
      return sql;
    };
    const fresh = newDir();
    (await SqliteCoordStore.open(fresh, { create: true })).close();
    expect(ddl(fresh)).toMatch(/key TEXT NOT NULL UNIQUE/);
    expect(ddl(fresh)).not.toMatch(/WITHOUT ROWID/);
    const earlier = newDir();
    earlierShape(earlier);
    const s = await SqliteCoordStore.open(earlier, { create: true });
    await s.putIfAbsent(claimKey('c'), 'x', EXPIRY);
    await s.put(itemKey('i'), 'm');
    s.close();
    expect(ddl(earlier)).toMatch(/WITHOUT ROWID/);
  });

  for (const shape of ['rowid', 'earlier'] as const) {
    it(`the claim sweep on a file of the ${shape} shape deletes old claims only, never markers`, async () => {
      const dir = newDir();
      if (shape === 'earlier') earlierShape(dir);
      const s = await SqliteCoordStore.open(dir, { create: true });
      await s.putIfAbsent(claimKey('old'), 'x', EXPIRY);
      await s.put(itemKey('old-marker'), 'm');
      await new Promise((r) => setTimeout(r, 20));
      const cutoff = Date.now();
      await new Promise((r) => setTimeout(r, 20));
      await s.putIfAbsent(claimKey('new'), 'y', EXPIRY);
      await s.put(itemKey('old-marker'), 'm2'); // replaced: one row for the key, not two
      expect(await s.deleteClaimsOlderThan(cutoff)).toBe(1);
      expect([...(await s.getMany([claimKey('old'), claimKey('new'), itemKey('old-marker')])).values()]).toEqual([null, 'y', 'm2']);
      s.close();
      const db = new (process.getBuiltinModule('node:sqlite') as typeof import('node:sqlite')).DatabaseSync(path.join(dir, ...COORD_DB.split('/')));
      expect((db.prepare('SELECT count(*) AS n FROM records').get() as { n: number }).n).toBe(2);
      db.close();
    });
  }

  it('two handles of one log share the records; closing one leaves the other working', async () => {
    const dir = newDir();
    const a = await SqliteCoordStore.open(dir, { create: true });
    const b = await SqliteCoordStore.open(dir, { create: true });
    expect(await a.putIfAbsent(claimKey('cp'), 'from a', EXPIRY)).toBe(true);
    expect(await b.putIfAbsent(claimKey('cp'), 'from b', EXPIRY)).toBe(false);
    a.close();
    expect(await b.get(claimKey('cp'))).toBe('from a');
    await expect(rejection(a.get(claimKey('cp')))).resolves.toBeInstanceOf(UnavailableError);
    b.close();
    // reopened from the file
    const c = await SqliteCoordStore.open(dir, { create: true });
    expect(await c.get(claimKey('cp'))).toBe('from a');
    c.close();
  });

  it('writes of one turn commit together: a failing transaction fails every write queued with it, and none landed', async () => {
    const dir = newDir();
    const s = await SqliteCoordStore.open(dir, { create: true });
    await s.put(itemKey('before'), 'kept');
    // A trigger (from another connection) aborts the third write of the turn.
    const { DatabaseSync } = process.getBuiltinModule('node:sqlite') as typeof import('node:sqlite');
    const side = new DatabaseSync(path.join(dir, ...COORD_DB.split('/')));
    side.exec(`CREATE TRIGGER no_c BEFORE INSERT ON records WHEN NEW.key = '${claimKey('c')}' BEGIN SELECT RAISE(ABORT, 'refused'); END`);
    side.close();
    const results = await Promise.allSettled([
      s.putIfAbsent(claimKey('a'), 'a', EXPIRY),
      s.put(itemKey('b'), 'b'),
      s.putIfAbsent(claimKey('c'), 'c', EXPIRY),
    ]);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(UnavailableError);
    }
    expect(await s.getMany([claimKey('a'), itemKey('b'), claimKey('c'), itemKey('before')])).toEqual(
      new Map([
        [claimKey('a'), null],
        [itemKey('b'), null],
        [claimKey('c'), null],
        [itemKey('before'), 'kept'],
      ]),
    );
    // the next turn's writes are not affected
    expect(await s.putIfAbsent(claimKey('a'), 'a', EXPIRY)).toBe(true);
    s.close();
  });

  it('sync holds the write-ahead log open after its first call: each later sync is one fsync, started within the call; the last close closes it', async () => {
    const dir = newDir();
    const wal = `${path.join(dir, ...COORD_DB.split('/'))}-wal`;
    const walFds = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          const l = readlinkSync(`/proc/self/fd/${fd}`);
          return l === wal || l === `${wal} (deleted)`; // SQLite removes the file when its last connection closes
        } catch {
          return false; // closed meanwhile (the listing's own descriptor)
        }
      }).length;
    const s = await SqliteCoordStore.open(dir, { create: true });
    await s.put(itemKey('a'), 'x');
    const sqlites = walFds(); // SQLite's own
    await s.sync();
    expect(walFds()).toBe(sqlites + 1);
    const probe = await fs.open(path.join(root, `probe-${n++}`), 'w');
    const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void> };
    await probe.close();
    const syncs = vi.spyOn(proto, 'sync');
    const opens = vi.spyOn(fs, 'open');
    try {
      await s.put(itemKey('b'), 'y');
      const synced = s.sync();
      expect(syncs).toHaveBeenCalledTimes(1); // on the thread pool already: the caller's work overlaps it
      await synced;
      expect(opens).not.toHaveBeenCalled();
    } finally {
      syncs.mockRestore();
      opens.mockRestore();
    }
    s.close();
    await vi.waitFor(() => expect(walFds()).toBe(0)); // the handle's close is a thread-pool call
  });

  it('deleteClaimsOlderThan deletes claims written before the cutoff, and never markers', async () => {
    const dir = newDir();
    const s = await SqliteCoordStore.open(dir, { create: true });
    await s.putIfAbsent(claimKey('old-1'), 'x', EXPIRY);
    await s.putIfAbsent(claimKey('old-2'), 'x', EXPIRY);
    await s.put(itemKey('old-marker'), 'm');
    await new Promise((r) => setTimeout(r, 20));
    const cutoff = Date.now();
    await new Promise((r) => setTimeout(r, 20));
    await s.putIfAbsent(claimKey('new'), 'y', EXPIRY);
    expect(await s.deleteClaimsOlderThan(cutoff)).toBe(2);
    expect(await s.getMany([claimKey('old-1'), claimKey('old-2'), claimKey('new'), itemKey('old-marker')])).toEqual(
      new Map([
        [claimKey('old-1'), null],
        [claimKey('old-2'), null],
        [claimKey('new'), 'y'],
        [itemKey('old-marker'), 'm'],
      ]),
    );
    expect(await s.deleteClaimsOlderThan(cutoff)).toBe(0);
    s.close();
  });

  it('the claim sweep deletes more claims than one transaction holds, in several, and keeps the younger ones and every marker', async () => {
    const dir = newDir();
    const s = await SqliteCoordStore.open(dir, { create: true });
    const keys = Array.from({ length: 4_500 }, (_, i) => claimKey(`sweep-${i}`));
    for (let i = 0; i < keys.length; i += 500) await Promise.all(keys.slice(i, i + 500).map((k) => s.putIfAbsent(k, 'x', EXPIRY)));
    await s.put(itemKey('m'), 'marker');
    await new Promise((r) => setTimeout(r, 20));
    const cutoff = Date.now();
    await new Promise((r) => setTimeout(r, 20));
    await s.putIfAbsent(claimKey('young'), 'y', EXPIRY);
    const order: string[] = [];
    const sweep = s.deleteClaimsOlderThan(cutoff).then((n) => (order.push('sweep'), n));
    // Another write during the sweep is answered before the sweep ends: the lock is let go between
    // chunks (in one DELETE it would share the sweep's transaction and be answered after it).
    const during = s.put(itemKey('during'), 'd').then(() => order.push('put'));
    expect(await sweep).toBe(4_500);
    await during;
    expect(order).toEqual(['put', 'sweep']);
    const left = await s.getMany([...keys.slice(0, 3), keys.at(-1)!, claimKey('young'), itemKey('m'), itemKey('during')]);
    expect([...left.values()]).toEqual([null, null, null, null, 'y', 'marker', 'd']);
    s.close();
  });

  it('a file that is not a database is CORRUPT, and one of another layout version is refused', async () => {
    const dir = newDir();
    await fs.mkdir(path.join(dir, '_dgcl'), { recursive: true });
    await fs.writeFile(path.join(dir, ...COORD_DB.split('/')), 'not a database, just text that is long enough to be read as a header page');
    await expect(SqliteCoordStore.open(dir, { create: true })).rejects.toThrow(CorruptError);
    const dir2 = newDir();
    (await SqliteCoordStore.open(dir2, { create: true })).close();
    const { DatabaseSync } = process.getBuiltinModule('node:sqlite') as typeof import('node:sqlite');
    const side = new DatabaseSync(path.join(dir2, ...COORD_DB.split('/')));
    side.exec('PRAGMA user_version = 7');
    side.close();
    await expect(SqliteCoordStore.open(dir2, { create: true })).rejects.toThrow(/layout 7/);
  });

  it('a log folder deleted and made again gets a new database, not the cached connection to the old file', async () => {
    const dir = newDir();
    const a = await SqliteCoordStore.open(dir, { create: true }); // keeps the connection cached (one handle open)
    await a.put(itemKey('x'), 'old');
    await fs.rm(dir, { recursive: true, force: true });
    const b = await SqliteCoordStore.open(dir, { create: true });
    expect(await b.get(itemKey('x'))).toBeNull();
    await b.put(itemKey('x'), 'new');
    const c = await SqliteCoordStore.open(dir, { create: true });
    expect(await c.get(itemKey('x'))).toBe('new');
    a.close();
    b.close();
    c.close();
  });

  it('4 processes claiming the same 300 keys at once: each key has exactly one winner, whose body is stored', async () => {
    const dir = newDir();
    (await SqliteCoordStore.open(dir, { create: true })).close(); // created before the race, as a writer's choice does
    const script = path.join(import.meta.dirname, 'support', 'sqlite-claimer.ts');
    const procs = [0, 1, 2, 3].map((p) => {
      const child = spawn(process.execPath, ['--import', 'tsx', script, dir, String(p), '300'], { stdio: ['pipe', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const ready = new Promise<void>((resolve) => child.stdout.on('data', () => out.includes('ready') && resolve()));
      const done = new Promise<string>((resolve, reject) => child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`claimer ${p} exited ${code}: ${out}`)))));
      return { child, ready, done };
    });
    // A barrier: every process has opened the database and waits, then all start at once.
    await Promise.all(procs.map((p) => p.ready));
    for (const p of procs) p.child.stdin.end('go\n');
    const outs = await Promise.all(procs.map((p) => p.done));
    const won = outs.map((o) => JSON.parse(o.slice(o.indexOf('{'))) as { won: number[] });
    const s = await SqliteCoordStore.open(dir, { create: true });
    for (let k = 0; k < 300; k++) {
      const winners = won.flatMap((w, p) => (w.won.includes(k) ? [p] : []));
      expect(winners, `key ${k}`).toHaveLength(1);
      expect(await s.get(claimKey(`race-${k}`))).toBe(`process ${winners[0]}`);
    }
    expect(won.reduce((a, w) => a + w.won.length, 0)).toBe(300);
    s.close();
  }, 60_000);
});
