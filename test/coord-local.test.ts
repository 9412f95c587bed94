/**
 * Coordination of logs on a local root (lib/coord/choose.ts, lib/coord/sqlite.ts): a new log keeps
 * its item markers and claims in one SQLite file beside it; `coordination: 'objects'` and logs with
 * data from before keep files; a log recorded as `sqlite` cannot be opened through a store that is
 * not a local folder. Two processes appending the same checkpoints at once get one
 * `duplicate: false` each (I4), through the SQLite file.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { CHOICE_KEY, chooseCoordStore } from '../lib/coord/choose.ts';
import { SqliteCoordStore } from '../lib/coord/sqlite.ts';
import { readdirSync } from 'node:fs';
import { CorruptError, InvalidInputError } from '../lib/errors.ts';
import { openLog, type OpenLogOptions } from '../lib/index.ts';
import { CLAIMS_DIR, claimKey, ITEMS_DIR, itemKey } from '../lib/log/layout.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logLocation, parseRoot } from '../lib/storage/location.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { coordDbPath, localCoord } from './support/coord.ts';
import { rejection } from './support/rejection.ts';
import { tree } from './support/tree.ts';

const root = mkdtempSync(path.join(tmpdir(), 'dgcl-coord-local-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let opened: CheckpointLog[] = [];
afterEach(async () => {
  for (const l of opened) await l.close().catch(() => undefined);
  opened = [];
});

let n = 0;
function experiment() {
  const name = `e${n++}`;
  const loc = logLocation(parseRoot(root), 'p', name);
  if (loc.kind !== 'file') throw new Error('a local root');
  const objects = new LocalObjectStore(loc.dir);
  const newLog = async (owner: string, more: Partial<OpenLogOptions> = {}) => {
    const log = await openLog({ root, pipeline: 'p', experiment: name, owner, ...more });
    opened.push(log);
    return log;
  };
  return { name, dir: loc.dir, objects, newLog };
}

/** The SQLite files in a log's `_dgcl` folder. */
const sqliteFiles = (dir: string) => (existsSync(path.join(dir, '_dgcl')) ? readdirSync(path.join(dir, '_dgcl')).filter((n) => n.includes('sqlite')) : []);

describe('local coordination', () => {
  it('a new log keeps markers and claims in its SQLite file: no marker or claim files', async () => {
    const x = experiment();
    // Pinned apart: an unpinned writer takes a random slot, and a pinned writer waits out the
    // lease of a live holder of its slot (a CI run hung here on it).
    const a = await x.newLog('a', { slot: 0 });
    const [c] = await a.append([createBatch('i1')]);
    expect(await x.objects.get(CHOICE_KEY)).toMatch(/^sqlite [0-9a-f-]{36} v2$/);
    expect(existsSync(coordDbPath(x.dir))).toBe(true);
    expect(await x.objects.list(ITEMS_DIR)).toEqual([]);
    expect(await x.objects.list(CLAIMS_DIR)).toEqual([]);
    const coord = await localCoord(x.objects);
    try {
      expect(await coord.get(itemKey('i1'))).toMatch(new RegExp(`^${a.writerEpoch} `));
      const claim = JSON.parse((await coord.get(claimKey(c!.checkpointId)))!) as Record<string, unknown>;
      expect(claim).toMatchObject({ checkpointId: c!.checkpointId, events: c!.eventIds.length, firstSeq: c!.firstSeq, lastSeq: c!.lastSeq });
      expect(claim).not.toHaveProperty('itemId'); // a purge cannot scrub a SQLite file's free pages
    } finally {
      coord.close?.();
    }
    // Another writer (another slot) continues the item from the log and answers the retry as a duplicate.
    const b = await x.newLog('b', { slot: 1 });
    const [again] = await b.append([createBatch('i1')]);
    expect(again).toMatchObject({ checkpointId: c!.checkpointId, firstSeq: c!.firstSeq, lastSeq: c!.lastSeq, duplicate: true });
    const [s] = await b.append([stepBatch('i1', 1)]);
    expect(s!.firstSeq).toBe(c!.lastSeq + 1);
  });

  it("coordination: 'objects' keeps files, and the record says so for every later writer", async () => {
    const x = experiment();
    const a = await x.newLog('a', { coordination: 'objects', slot: 0 });
    await a.append([createBatch('i1')]);
    expect(await x.objects.get(CHOICE_KEY)).toBe('objects');
    expect(await x.objects.list(ITEMS_DIR)).toHaveLength(1);
    expect(sqliteFiles(x.dir), 'no SQLite file').toEqual([]);
    const b = await x.newLog('b', { slot: 1 });
    await b.append([createBatch('i2')]);
    expect(await x.objects.list(ITEMS_DIR)).toHaveLength(2);
    expect(sqliteFiles(x.dir), 'no SQLite file').toEqual([]);
  });

  it('a log with data written before 0.3.0 (files, no record) stays on files and continues its items', async () => {
    const x = experiment();
    const old = await x.newLog('old', { coordination: 'objects' });
    await old.append([createBatch('i1')]);
    const [s1] = await old.append([stepBatch('i1', 1)]);
    await old.close();
    rmSync(path.join(x.dir, ...CHOICE_KEY.split('/')));
    const a = await x.newLog('a');
    const [s2] = await a.append([stepBatch('i1', 2)]);
    expect(await x.objects.get(CHOICE_KEY)).toBe('objects');
    expect(s2).toMatchObject({ firstSeq: s1!.lastSeq + 1, duplicate: false });
    expect(sqliteFiles(x.dir), 'no SQLite file').toEqual([]);
  });

  it('a log recorded as sqlite, opened through a store that is not a local folder: INVALID_INPUT', async () => {
    const x = experiment();
    const a = await x.newLog('a');
    await a.append([createBatch('i1')]);
    // The log's own objects under another base URI (as a copy synced to S3 would be).
    const foreign = new Proxy(x.objects, { get: (t, k) => (k === 'baseUri' ? 's3://bucket/copy/log.lance' : Reflect.get(t, k, t)) });
    for (const create of [true, false]) {
      const e = await rejection(chooseCoordStore(foreign, null, `p/${x.name}`, { create, prefer: 'table' }));
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as Error).message).toMatch(/SQLite file beside it/);
    }
  });

  it('a log recorded as sqlite whose database is gone: CORRUPT before anything is written (its markers are lost)', async () => {
    const x = experiment();
    const a = await x.newLog('a');
    await a.append([createBatch('i1')]);
    await a.close();
    const db = coordDbPath(x.dir);
    for (const f of ['', '-wal', '-shm']) rmSync(db + f, { force: true });
    const before = tree(x.dir);
    const b = await x.newLog('b');
    const e = await rejection(b.append([stepBatch('i1', 1)]));
    expect(e).toBeInstanceOf(CorruptError);
    expect((e as Error).message).toMatch(/coordination database .* is missing/);
    expect(tree(x.dir)).toEqual(before);
  });

  it("a group that begins items makes the database's write-ahead log durable before its commit", async () => {
    const x = experiment();
    const order: string[] = [];
    const real = SqliteCoordStore.prototype.sync;
    const sync = vi.spyOn(SqliteCoordStore.prototype, 'sync').mockImplementation(async function (this: SqliteCoordStore) {
      order.push('sync start');
      await real.call(this); // the real fsyncs, observed
      order.push('sync end');
    });
    try {
      const a = await x.newLog('a', { hooks: { beforeCommit: () => void order.push('commit') } });
      await a.append([createBatch('i1'), createBatch('i2')]);
      await a.append([stepBatch('i1', 1)]); // begins no item: no sync
      await a.append([createBatch('i3')]); // the held write-ahead log's fsync
      expect(order).toEqual(['sync start', 'sync end', 'commit', 'commit', 'sync start', 'sync end', 'commit']);
    } finally {
      sync.mockRestore();
    }
  });

  it('two processes appending the same 120 checkpoints at once: exactly one duplicate: false each, at the seqs every answer names', async () => {
    const x = experiment();
    const script = path.join(import.meta.dirname, 'support', 'dup-writer.ts');
    const procs = [0, 1].map((slot) => {
      const child = spawn(process.execPath, ['--import', 'tsx', script, root, x.name, String(slot), '120'], { stdio: ['pipe', 'pipe', 'inherit'] });
      let out = '';
      const ready = new Promise<void>((resolve) => child.stdout.on('data', (d: Buffer) => ((out += d.toString()), out.includes('ready') && resolve())));
      const done = new Promise<Ack[]>((resolve, reject) =>
        child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.slice(out.indexOf('['))) as Ack[]) : reject(new Error(`writer ${slot} exited ${code}: ${out}`)))),
      );
      return { child, ready, done };
    });
    // A barrier: both processes have opened the log; then both start at once.
    await Promise.all(procs.map((p) => p.ready));
    for (const p of procs) p.child.stdin.end('go\n');
    const [a, b] = await Promise.all(procs.map((p) => p.done));
    expect(a).toHaveLength(120);
    expect(b).toHaveLength(120);
    const byCp = new Map<string, Ack[]>();
    for (const ack of [...a!, ...b!]) byCp.set(ack.checkpointId, [...(byCp.get(ack.checkpointId) ?? []), ack]);
    expect(byCp.size).toBe(120);
    const reader = await x.newLog('reader');
    for (const [cp, acks] of byCp) {
      expect(acks.filter((k) => !k.duplicate), cp).toHaveLength(1);
      expect(new Set(acks.map((k) => `${k.firstSeq}-${k.lastSeq}`)).size, cp).toBe(1);
      const st = await reader.fold(acks[0]!.itemId);
      expect(st.lastSeq).toBe(acks[0]!.lastSeq); // one copy of the creation, at the answered seqs
    }
    expect(await x.objects.get(CHOICE_KEY)).toMatch(/^sqlite [0-9a-f-]{36} v2$/);
  }, 120_000);
});
