/**
 * The fold projection (lib/log/projection/fold-rows.ts): the rows codec and file layout, read in parts
 * through a real local object store; and folds through it on real Lance against folds through
 * Lance: right after maintenance (no base query at all), with a live tail and a deleted item,
 * after a merge since (Lance again), and with a damaged or missing rows file (Lance again, the
 * same answer).
 */
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { assembleRowsFile, decodeRow, decodeRowsFile, encodeItem, encodeRow, encodeRowsFile, RowsDirectories, RowsFileError } from '../lib/log/projection/fold-rows.ts';
import { compareUtf8 } from '../lib/log/read/summary.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { PROJECTION_DIR, PROJECTION_KEY } from '../lib/log/projection/stored.ts';
import { LIGHT_COLUMNS } from '../lib/schema.ts';
import type { ByteRange } from '../lib/storage/objects.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import type { EventRow } from '../lib/types.ts';
import { raceFixture, tempRoot, type TableTap } from './support/race-kit.ts';
import { fullRow } from './support/rows.ts';

const { setup } = raceFixture(60_000);

/** A float FIELD_SET of `itemId` at `seq`. */
function row(itemId: string, seq: number, over: Partial<EventRow> = {}): EventRow {
  const ids = { event_id: `e-${itemId}-${seq}`, item_id: itemId, root_item_id: itemId, item_seq: seq, checkpoint_id: `c-${seq}` };
  return fullRow({ ...ids, field_type: 'dgcl.float64', value_kind: 'float', value_i64: null, value_f64: 1.5, ...over });
}

/** A store that counts its ranged reads. */
class CountingStore extends LocalObjectStore {
  ranges: ByteRange[] = [];
  /** Another base URI: what the rows-file reader takes for the kind of store. */
  constructor(dir: string, uri?: string) {
    super(dir);
    if (uri) (this as { baseUri: string }).baseUri = uri;
  }
  override getBytes(key: string, range: ByteRange) {
    this.ranges.push(range);
    return super.getBytes(key, range);
  }
}

describe('rows codec and file', () => {
  it('round-trips every kind of value, -0, the infinities, NaN, int64 extremes and lone surrogates', () => {
    const rows = [
      row('a', 1, { value_f64: -0 }),
      row('a', 2, { value_f64: Infinity }),
      row('a', 3, { value_f64: -Infinity, value_kind: 'float' }),
      row('a', 4, { value_f64: NaN }),
      row('a', 5, { value_f64: null, value_i64: -(2n ** 63n), value_kind: 'int' }),
      row('a', 6, { value_f64: null, value_i64: 2n ** 63n - 1n, value_kind: 'int' }),
      row('a', 7, { value_f64: null, value_bool: false, value_str: 'é\u{1F600}\uD800"\\', value_json: '{"a":[1]}', terminal: 'completed' }),
      row('a', 8, { parent_item_id: 'p', step_name: null, step_index: null, field_name: null, field_type: null, codec_version: null, value_kind: null, value_f64: null, error_type: 'Boom', traceback: 'tb\n', payload_size: 12, payload_checksum: 'sha256:00' }),
    ];
    for (const r of rows) {
      const back = decodeRow(JSON.parse(JSON.stringify(encodeRow(r))));
      expect(back, `seq ${r.item_seq}`).toEqual(r);
      expect(Object.is(back.value_f64, r.value_f64), `seq ${r.item_seq}: the same double`).toBe(true);
    }
  });

  it('refuses a stored row that is not one: wrong length, a null where none may be, a bad int64', () => {
    const good = encodeRow(row('a', 1));
    expect(() => decodeRow(good.slice(1))).toThrow(RowsFileError);
    const at = (c: string) => LIGHT_COLUMNS.indexOf(c as keyof EventRow);
    const bad = (c: string, v: unknown) => {
      const cells: unknown[] = [...good];
      cells[at(c)] = v;
      return () => decodeRow(cells);
    };
    expect(bad('item_id', null)).toThrow(/item_id is null/);
    expect(bad('item_seq', 1.5)).toThrow(/item_seq/);
    expect(bad('value_i64', '12a')).toThrow(/value_i64/);
    expect(bad('value_f64', 'one')).toThrow(/value_f64/);
    expect(bad('value_bool', 1)).toThrow(/value_bool/);
    expect(decodeRow(good)).toEqual(row('a', 1));
  });

  it('reads an item from the end of a small file in one request, from a large one in two or three', async () => {
    const dir = tempRoot();
    const objects = new CountingStore(dir);
    const small = [['a', [row('a', 1), row('a', 2)]], ['b', [row('b', 1)]]] as const;
    await objects.putIfAbsent('_dgcl/projection/rows-v1-0-3-0.bin', encodeRowsFile(small));
    const dirs = new RowsDirectories(objects);
    expect(await dirs.itemRows('_dgcl/projection/rows-v1-0-3-0.bin', 'b')).toEqual([row('b', 1)]);
    expect(await dirs.itemRows('_dgcl/projection/rows-v1-0-3-0.bin', 'a')).toEqual(small[0][1]);
    expect(await dirs.itemRows('_dgcl/projection/rows-v1-0-3-0.bin', 'c'), 'an item it does not hold').toEqual([]);
    expect(objects.ranges, 'one read of the end: the file is within it').toEqual([{ suffix: 32 * 1024 }]);

    // Long random ids: a directory longer than the end read first, items far before it.
    const ids = Array.from({ length: 1000 }, (_, i) => `${String(i).padStart(4, '0')}-${randomBytes(300).toString('base64')}`);
    const big = ids.map((id) => [id, [row(id, 1, { traceback: randomBytes(200).toString('hex') })]] as const);
    await objects.putIfAbsent('_dgcl/projection/rows-v1-1-1000-0.bin', encodeRowsFile(big));
    objects.ranges = [];
    const fresh = new RowsDirectories(objects);
    expect(await fresh.itemRows('_dgcl/projection/rows-v1-1-1000-0.bin', ids[0]!)).toEqual(big[0]![1]);
    expect(objects.ranges.map((r) => Object.keys(r).join()), 'the end, the rest of the directory, the item').toEqual(['suffix', 'start,end', 'start,end']);
    objects.ranges = [];
    expect(await fresh.itemRows('_dgcl/projection/rows-v1-1-1000-0.bin', ids[500]!)).toEqual(big[500]![1]);
    expect(objects.ranges.length, 'the directory is kept: the item alone').toBe(1);
    expect(decodeRowsFile((await objects.getBytes('_dgcl/projection/rows-v1-1-1000-0.bin', { suffix: 2 ** 30 }))!.bytes)).toEqual(big);

    // On an object store a request costs more than its bytes: a longer end, so a file of 100
    // items (~75 KB) comes whole in the first read, and every later fold of its items needs none.
    const remote = new CountingStore(dir, 's3://bucket/p/e/log.lance');
    const mid = Array.from({ length: 100 }, (_, i) => [`m${String(i).padStart(3, '0')}`, [row(`m${String(i).padStart(3, '0')}`, 1, { traceback: randomBytes(300).toString('hex') })]] as const);
    await objects.putIfAbsent('_dgcl/projection/rows-v1-2-100-0.bin', encodeRowsFile(mid));
    const viaRemote = new RowsDirectories(remote);
    for (const k of [0, 50, 99]) expect(await viaRemote.itemRows('_dgcl/projection/rows-v1-2-100-0.bin', `m${String(k).padStart(3, '0')}`)).toEqual(mid[k]![1]);
    expect(remote.ranges).toEqual([{ suffix: 256 * 1024 }]);
    // Locally the end is short: the directory, then the item's range.
    objects.ranges = [];
    const viaLocal = new RowsDirectories(objects);
    for (const k of [0, 10]) expect(await viaLocal.itemRows('_dgcl/projection/rows-v1-2-100-0.bin', `m${String(k).padStart(3, '0')}`)).toEqual(mid[k]![1]);
    expect(objects.ranges).toEqual([{ suffix: 32 * 1024 }, expect.objectContaining({ start: 0 }), expect.objectContaining({ start: expect.any(Number) })]);
  });

  it('a damaged file is an error of its own, never other rows', async () => {
    const objects = new LocalObjectStore(tempRoot());
    const bytes = encodeRowsFile([['a', [row('a', 1)]], ['b', [row('b', 1), row('b', 2)]]]);
    const key = (n: number) => `_dgcl/projection/rows-v1-0-3-${n}.bin`;
    const flipped = Buffer.from(bytes);
    flipped[10] = flipped[10]! ^ 0xff; // inside the first item's block
    await objects.putIfAbsent(key(0), flipped);
    await objects.putIfAbsent(key(1), bytes.subarray(0, bytes.length - 3));
    await objects.putIfAbsent(key(2), Buffer.concat([Buffer.from('x'), bytes.subarray(1)]));
    const dirs = new RowsDirectories(objects);
    await expect(dirs.itemRows(key(0), 'a')).rejects.toThrow(RowsFileError);
    expect(await dirs.itemRows(key(0), 'b'), 'the other item of the file is whole').toEqual([row('b', 1), row('b', 2)]);
    await expect(dirs.itemRows(key(1), 'a')).rejects.toThrow(/footer/);
    await expect(dirs.itemRows(key(2), 'a')).rejects.toThrow(RowsFileError);
    await expect(dirs.itemRows(key(3), 'a')).rejects.toThrow(/missing/);
  });

  // The directory is searched where it lies: a damaged id or entry must not read as "not in this
  // file" (a fold would then miss the item's rows), so every lookup of a damaged one fails.
  it('a damaged directory fails every lookup, the items it holds and those it does not', async () => {
    const objects = new LocalObjectStore(tempRoot());
    const items = [['alpha', [row('alpha', 1)]], ['beta', [row('beta', 1)]], ['gamma', [row('gamma', 1)]]] as const;
    const bytes = encodeRowsFile(items);
    const dirLength = bytes.readUInt32LE(bytes.length - 12);
    const dirStart = bytes.length - 12 - dirLength;
    // Every byte of the directory (count, CRC, entries, ids), flipped in turn.
    for (let at = dirStart; at < dirStart + dirLength; at++) {
      const damaged = Buffer.from(bytes);
      damaged[at] = damaged[at]! ^ 0x04;
      const key = `_dgcl/projection/rows-v1-0-3-${at}.bin`;
      await objects.putIfAbsent(key, damaged);
      for (const id of ['alpha', 'beta', 'gamma', 'delta', 'b']) {
        await expect(new RowsDirectories(objects).itemRows(key, id), `byte ${at - dirStart} of the directory, ${id}`).rejects.toThrow(RowsFileError);
      }
    }
    expect(() => encodeRowsFile([items[1], items[0]]), 'written out of order').toThrow(/out of order/);
  });

  it('reads the files of earlier releases (dgclrow1: a gzipped JSON directory) as before', async () => {
    const objects = new CountingStore(tempRoot());
    const ids = ['a', 'b\u00e9', 'c\uffff', 'c\u{1f600}', 'zz']; // UTF-8 byte order, not UTF-16's
    const items = ids.map((id, i) => [id, Array.from({ length: i + 1 }, (_, k) => row(id, k + 1))] as const);
    const blocks = items.map(([, rows]) => gzipSync(`[${rows.map((r) => JSON.stringify(encodeRow(r))).join(',')}]`));
    let at = 0;
    const dir = gzipSync(JSON.stringify(items.map(([id], i) => [id, (at += blocks[i]!.length) - blocks[i]!.length, blocks[i]!.length])));
    const footer = Buffer.alloc(12);
    footer.writeUInt32LE(dir.length, 0);
    footer.write('dgclrow1', 4, 'latin1');
    const v1 = Buffer.concat([...blocks, dir, footer]);
    await objects.putIfAbsent('_dgcl/projection/rows-v1-0-15-0.bin', v1);
    await objects.putIfAbsent('_dgcl/projection/rows-v1-0-15-1.bin', encodeRowsFile(items));
    expect(decodeRowsFile(v1)).toEqual(items);
    for (const k of [0, 1]) {
      const dirs = new RowsDirectories(objects);
      for (const [id, rows] of items) expect(await dirs.itemRows(`_dgcl/projection/rows-v1-0-15-${k}.bin`, id)).toEqual(rows);
      expect(await dirs.itemRows(`_dgcl/projection/rows-v1-0-15-${k}.bin`, 'c'), 'not in the file').toEqual([]);
    }
  });
});

function batches(n: number, round: number, from = 0) {
  const out: unknown[] = [];
  for (let i = from; i < from + n; i++) {
    const itemId = `it-${String(i).padStart(4, '0')}`;
    if (round === 0) out.push({ itemId, runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { x: i, big: 2n ** 60n + BigInt(i), name: `n${i}` } });
    else if ((i + round) % 4 === 0) out.push({ itemId, runId: 'r', step: { name: `s${round}`, index: round }, failed: { errorType: `Boom${round}`, traceback: `tb ${i}` } });
    else out.push({ itemId, runId: 'r', step: { name: `s${round}`, index: round }, set: { y: i * round }, append: { log: [`r${round}`] }, ...(round === 3 && i % 5 === 0 ? { terminal: 'completed' } : {}) });
  }
  return out;
}

/** A fresh reader (its own process's caches) and how many queries of the base its reads made. */
function reader(open: ReturnType<typeof setup>['open'], owner: string) {
  const counts = { base: 0 };
  const tableTap: TableTap = { beforeRead: (name) => void (name === 'base' && counts.base++) };
  const r = open({ slot: 0, slots: 2, owner, tableTap });
  return { log: r.log, objects: r.objects, counts };
}

async function foldsOf(log: CheckpointLog, ids: readonly string[]) {
  const failed = (e: Error) => `${e.name}: ${e.message}`;
  return Promise.all(ids.map(async (id) => ({ state: await log.fold(id).catch(failed), trajectory: await log.trajectory(id).catch(failed) })));
}

describe('folds through the fold projection', () => {
  it('equal folds through Lance; no base query while it describes the base, Lance again when it does not', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 2 });
    const B = open({ slot: 1, slots: 2 });
    // Two writers' merges: base fragments whose items overlap (an item's rows in both).
    await A.log.append(batches(1500, 0));
    await B.log.append(batches(700, 0, 1500));
    await A.log.append(batches(1500, 1));
    await A.log.mergeOwnShard();
    await B.log.append(batches(900, 1, 1200));
    await B.log.mergeOwnShard();
    const M = open({ slot: 0, slots: 2, owner: 'maintainer' });
    expect((await M.log.maintain()).failures).toEqual([]);
    const files = (await M.objects.inner.list(PROJECTION_DIR)).filter((n) => n.startsWith('rows-'));
    expect(files.length, 'rows files of more than one fragment and chunk').toBeGreaterThan(2);

    // A live tail (unmerged) and a deleted item.
    await A.log.append(batches(40, 2, 1480));
    await A.log.deleteItem('it-0007');
    const ids = ['it-0000', 'it-0007', 'it-0999', 'it-1000', 'it-1201', 'it-1499', 'it-1500', 'it-1510', 'it-2199', 'it-9999'];

    const P = reader(open, 'projected');
    const got = await foldsOf(P.log, ids);
    expect(P.counts.base, 'no query of the base: every base row came from the rows files').toBe(0);
    const state = (id: string) => got[ids.indexOf(id)]!.state;
    expect(JSON.stringify(got[ids.indexOf('it-1500')]!.trajectory), 'the tail (step s2) is read too').toContain('"s2"');
    expect(state('it-0007'), 'a deleted item').toMatch(/^NotFoundError/);
    expect(state('it-9999')).toMatch(/^NotFoundError/);

    // The same folds through Lance: a reader that finds no index.
    const index = (await M.objects.inner.get(PROJECTION_KEY))!;
    await M.objects.inner.delete(PROJECTION_KEY);
    const L = reader(open, 'through-lance');
    expect(await foldsOf(L.log, ids)).toEqual(got);
    expect(L.counts.base, 'the base queried once per fold and trajectory').toBe(2 * ids.length);
    await M.objects.inner.put(PROJECTION_KEY, index);

    // A merge since: the base moved past the index's version; Lance again, the same answer.
    await A.log.mergeOwnShard();
    const before = P.counts.base;
    expect(await foldsOf(P.log, ids)).toEqual(await foldsOf(L.log, ids));
    expect(P.counts.base - before, 'the projected reader queried the base for each').toBe(2 * ids.length);

    // Maintenance again: back to the rows files, for a reader that held the older index too.
    expect((await M.log.maintain()).failures).toEqual([]);
    const again = P.counts.base;
    const want = await foldsOf(L.log, ids);
    expect(await foldsOf(P.log, ids)).toEqual(want);
    expect(P.counts.base - again, 'no base query after the new index').toBe(0);

    // A damaged rows file and a missing one: Lance for the folds that need them, the same answer.
    const rowsFiles = (await M.objects.inner.list(PROJECTION_DIR)).filter((n) => n.startsWith('rows-'));
    const damaged = `${PROJECTION_DIR}/${rowsFiles[0]!}`;
    const bytes = (await M.objects.inner.getBytes(damaged, { suffix: 2 ** 30 }))!.bytes;
    await M.objects.inner.delete(damaged);
    await M.objects.inner.putIfAbsent(damaged, Buffer.from(bytes).fill(7, 0, Math.min(64, bytes.length)));
    await M.objects.inner.delete(`${PROJECTION_DIR}/${rowsFiles.at(-1)!}`);
    const D = reader(open, 'damaged');
    expect(await foldsOf(D.log, ids)).toEqual(want);
    expect(D.counts.base, 'some folds went to Lance, not all').toBeGreaterThan(0);
    expect(D.counts.base).toBeLessThan(2 * ids.length);
  });
});

describe('rows files: the local read plan (the end, then the rest)', () => {
  it('returns the right rows for every item of files from 100 B to 200 KB, directories shorter and longer than the end, items across its start', async () => {
    const objects = new LocalObjectStore(tempRoot());
    let checked = 0;
    for (const [n, idLen, tbLen] of [[1, 1, 0], [3, 4, 10], [20, 8, 400], [60, 40, 250], [200, 120, 30], [40, 20, 4000], [1000, 10, 100]] as const) {
      const ids = Array.from({ length: n }, (_, i) => `${String(i).padStart(5, '0')}${randomBytes(idLen).toString('hex')}`);
      const items = ids.map((id) => [id, [row(id, 1, { traceback: randomBytes(tbLen).toString('base64') }), row(id, 2, { traceback: '' })]] as const);
      const key = `_dgcl/projection/rows-v1-${n}-${idLen}-${tbLen}.bin`;
      const file = encodeRowsFile(items);
      await objects.putIfAbsent(key, file);
      expect(decodeRowsFile(file)).toEqual(items);
      const dirs = new RowsDirectories(objects);
      for (const [id, rows] of items) {
        expect(await dirs.itemRows(key, id), `${key} ${id} (file ${file.length} B)`).toEqual(rows);
        checked++;
      }
      expect(await dirs.itemRows(key, 'zzz-none')).toEqual([]);
    }
    expect(checked).toBe(1324);
  });
});

// Ids in the order the projection builder emits them (compareUtf8, lib/log/read/summary.ts) are
// accepted by assembleRowsFile (Buffer.compare order), and every id of a file is found by the
// in-place binary search, in files of 1 to 300 ids drawn from ASCII, the BMP above the surrogates
// (U+E000-U+FFFF: after astral characters in UTF-8, before them in UTF-16), astral characters and
// NUL; ids not in the file are not found. Any single flipped byte of the directory or its length
// reads as RowsFileError (never as a wrong "not here"), count included (it is not under the CRC,
// but the bounds checks catch it).
const ALPHABET = ['a', 'b', 'z', '\u0000', '\u00e9', '\u07ff', '\u0800', '\ud7ff', '\ue000', '\uffff', '\u{10000}', '\u{1F600}', '\u{10FFFF}'];

function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

function randomId(r: () => number): string {
  const n = 1 + Math.floor(r() * 5);
  let s = '';
  for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(r() * ALPHABET.length)];
  return s;
}

const rowOf = (itemId: string) => fullRow({ event_id: `e-${itemId}`, item_id: itemId, root_item_id: itemId, item_seq: 1, checkpoint_id: 'c' });

describe('rows files: the binary directory (v2Directory) lookups', () => {
  it('compareUtf8 order is Buffer order on well-formed ids; every id in a file is found, others are not', async () => {
    const dir = tempRoot();
    const objects = new LocalObjectStore(dir);
    for (let seed = 1; seed <= 40; seed++) {
      const r = rng(seed);
      const pool = new Set<string>();
      const want = 1 + Math.floor(r() * 300);
      while (pool.size < want) pool.add(randomId(r));
      const ids = [...pool].sort(compareUtf8);
      for (let i = 1; i < ids.length; i++) expect(Buffer.compare(Buffer.from(ids[i - 1]!), Buffer.from(ids[i]!)), `${JSON.stringify(ids[i - 1])} < ${JSON.stringify(ids[i])}`).toBe(-1);
      const inFile = ids.filter(() => r() < 0.7);
      if (inFile.length === 0) continue;
      const bytes = assembleRowsFile(inFile.map((id) => [id, encodeItem([rowOf(id)]).block] as const));
      const key = `f${seed}.bin`;
      await objects.putIfAbsent(key, bytes);
      const dirs = new RowsDirectories(objects);
      const held = new Set(inFile);
      for (const id of ids) {
        const rows = await dirs.itemRows(key, id);
        expect(rows.length, `${JSON.stringify(id)} (seed ${seed})`).toBe(held.has(id) ? 1 : 0);
      }
    }
  });

  it('a flipped byte of the directory or its length is an error, never a miss', async () => {
    const dir = tempRoot();
    const objects = new LocalObjectStore(dir);
    const ids = ['a', 'b\u00e9', 'c\uffff', 'c\u{1F600}', 'd'];
    const good = assembleRowsFile(ids.map((id) => [id, encodeItem([rowOf(id)]).block] as const));
    const dirLen = good.readUInt32LE(good.length - 12);
    const dirStart = good.length - 12 - dirLen;
    let misses = 0;
    for (let at = dirStart; at < good.length - 8; at++) {
      for (const bit of [0x01, 0x80]) {
        const bad = Buffer.from(good);
        bad[at]! ^= bit;
        const key = `bad-${at}-${bit}.bin`;
        await objects.putIfAbsent(key, bad);
        const dirs = new RowsDirectories(objects);
        for (const id of ids) {
          try {
            const rows = await dirs.itemRows(key, id);
            if (rows.length !== 1) misses++;
          } catch (e) {
            expect(e).toBeInstanceOf(RowsFileError);
          }
        }
      }
    }
    expect(misses).toBe(0);
  });
});
