/**
 * review42 (sound): rows files' binary directory (8ab9ebd, lib/log/projection/fold-rows.ts v2Directory).
 * Ids in the order the projection builder emits them (compareUtf8, lib/log/read/summary.ts) are
 * accepted by assembleRowsFile (Buffer.compare order), and every id of a file is found by the
 * in-place binary search, in files of 1 to 300 ids drawn from ASCII, the BMP above the
 * surrogates (U+E000-U+FFFF: after astral characters in UTF-8, before them in UTF-16), astral
 * characters and NUL; ids not in the file are not found. Any single flipped byte of the directory
 * or its length reads as RowsFileError (never as a wrong "not here"), count included (it is not
 * under the CRC, but the bounds checks catch it).
 */
import { describe, expect, it } from 'vitest';
import { assembleRowsFile, encodeItem, RowsDirectories, RowsFileError } from '../lib/log/projection/fold-rows.ts';
import { compareUtf8 } from '../lib/log/read/summary.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { tempRoot } from './support/race-kit.ts';
import { fullRow } from './support/rows.ts';

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

describe('review42: rows file v2 directory lookups', () => {
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
