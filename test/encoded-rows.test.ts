/**
 * The ack path's encoding (EncodedRows + the patched LocalTable.add, rowsToArrow from column
 * buffers, arrowToRows from chunk buffers).
 *
 *  - A second module instance of lib/log/write/lance-add.ts in one process (two copies of this
 *    library sharing one hoisted @lancedb/lancedb, or a test runner's module reset) finds
 *    LocalTable.prototype already patched; the patch recognises EncodedRows by a brand in the
 *    global symbol registry, not `instanceof` (which knew only the FIRST instance's class: the
 *    second instance's rows went to LanceDB's own add, which took them for row objects and threw:
 *    every commit of that log failed).
 *  - The stored rows equal the old encoder's through real Lance for the edge values; the buffer
 *    reader keeps a leading U+FEFF (get() dropped it); a required-column null in a later chunk is
 *    still a CorruptError naming the row.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import * as arrow from 'apache-arrow';
import { describe, expect, it, vi } from 'vitest';
import { CorruptError, NotFoundError } from '../lib/errors.ts';
import { openLog } from '../lib/index.ts';
import { EncodedRows, fastAddCount } from '../lib/log/write/lance-add.ts';
import { EVENT_SCHEMA, rowsFromArrow } from '../lib/schema.ts';
import type { EventRow } from '../lib/types.ts';
import { fullRow } from './support/rows.ts';

const tmp = () => mkdtempSync(path.join(tmpdir(), 'dgcl-encoded-rows-'));


/** The encoder before this change (af5097b): apache-arrow builders, int64/timestamps raw. */
function oldRowsToArrow(rows: readonly EventRow[]): arrow.Table {
  const children: Record<string, arrow.Vector> = {};
  for (const f of EVENT_SCHEMA.fields) {
    const values = rows.map((r) => (r as unknown as Record<string, unknown>)[f.name]);
    if (arrow.DataType.isInt(f.type) && f.type.bitWidth === 64 || arrow.DataType.isTimestamp(f.type)) {
      const data = new BigInt64Array(values.length);
      const valid = new Uint8Array(Math.ceil(values.length / 8));
      let nulls = 0;
      values.forEach((v, i) => {
        if (v === null || v === undefined) return void nulls++;
        data[i] = typeof v === 'bigint' ? v : BigInt(v as number);
        valid[i >> 3]! |= 1 << (i & 7);
      });
      children[f.name] = arrow.makeVector(arrow.makeData({ type: f.type, length: values.length, nullCount: nulls, data, nullBitmap: nulls ? valid : undefined } as never));
      continue;
    }
    const builder = arrow.makeBuilder({ type: f.type, nullValues: [null, undefined] });
    for (const v of values) builder.append(v as never);
    children[f.name] = builder.finish().toVector();
  }
  return new arrow.Table(EVENT_SCHEMA, children);
}

const show = (rows: EventRow[]) =>
  JSON.stringify(rows, (_k, v: unknown) =>
    typeof v === 'bigint' ? `${v}n` : v instanceof Uint8Array ? `u8[${[...v]}]` : typeof v === 'number' && (!Number.isFinite(v) || Object.is(v, -0)) ? `num:${Object.is(v, -0) ? '-0' : v}` : v,
  );

describe('EncodedRows and the patched LocalTable.add', () => {
  it('rows encoded by a second module instance of lance-add.ts are committed too', async () => {
    const db = await lancedb.connect(tmp());
    const t = await db.createEmptyTable('log', EVENT_SCHEMA);
    vi.resetModules();
    const second = (await import('../lib/log/write/lance-add.ts')) as typeof import('../lib/log/write/lance-add.ts');
    expect(second.EncodedRows).not.toBe(EncodedRows); // two instances, one patched prototype
    const rows = [fullRow(), fullRow({ event_id: 'e2', item_seq: 2 })];
    await t.add(new second.EncodedRows(rows) as never);
    expect(await t.countRows()).toBe(2);
  });

  it('stores what the old encoder stored, through real Lance (nulls, all-null bool, extremes, -0/NaN/Inf, empty and astral strings)', async () => {
    const cases: EventRow[][] = [
      Array.from({ length: 9 }, (_, i) => fullRow({ event_id: `e${i}`, item_seq: i + 1 })),
      Array.from({ length: 11 }, (_, i) => fullRow({ event_id: `e${i}`, item_seq: i + 1, value_bool: i % 3 === 0 ? null : i % 2 === 0 })),
      [
        fullRow({ event_id: 'a', value_i64: 2n ** 63n - 1n, attempt: 2 ** 31 - 1, codec_version: -(2 ** 31), value_f64: -0, step_index: Number.MAX_SAFE_INTEGER, event_ts: 0 }),
        fullRow({ event_id: 'b', value_i64: 0n, attempt: -(2 ** 31), codec_version: 2 ** 31 - 1, value_f64: NaN, event_ts: -1 }),
        fullRow({ event_id: 'c', value_f64: Infinity, value_str: '', value_blob: new Uint8Array(0), event_ts: 2 ** 53 - 1 }),
        fullRow({ event_id: 'd', value_f64: -Infinity, value_str: '𝒳é\u0000😀', value_blob: new Uint8Array([0, 255, 1]), parent_item_id: '', value_bool: false }),
        fullRow({ event_id: 'e', value_f64: 5e-324, value_i64: null, value_bool: true, step_index: null, iteration: null, codec_version: null }),
      ],
    ];
    const db = await lancedb.connect(tmp());
    for (const [n, rows] of cases.entries()) {
      const a = await db.createEmptyTable(`old${n}`, EVENT_SCHEMA);
      const b = await db.createEmptyTable(`new${n}`, EVENT_SCHEMA);
      await a.add(oldRowsToArrow(rows) as never);
      const before = fastAddCount.n;
      await b.add(new EncodedRows(rows) as never);
      expect(fastAddCount.n).toBe(before + 1);
      const sort = (xs: EventRow[]) => xs.sort((x, y) => x.event_id.localeCompare(y.event_id));
      const stored = sort(rowsFromArrow(await b.query().toArrow()));
      expect(show(stored)).toBe(show(sort(rowsFromArrow(await a.query().toArrow()))));
      expect(show(stored)).toBe(show(sort([...rows])));
    }
  });

  it('a string that starts with U+FEFF reads back whole (apache-arrow get() drops the BOM)', async () => {
    const db = await lancedb.connect(tmp());
    const t = await db.createEmptyTable('log', EVENT_SCHEMA);
    await t.add(new EncodedRows([fullRow({ value_kind: 'str', value_i64: null, value_str: '\uFEFFhello', item_id: '\uFEFFitem' })]) as never);
    const back = await t.query().toArrow();
    expect(rowsFromArrow(back).map((r) => [r.item_id, r.value_str])).toEqual([['\uFEFFitem', '\uFEFFhello']]);
    expect(back.getChild('value_str')!.get(0)).toBe('hello'); // why the old reader lost it
  });

  it('a required column null in a later chunk is a CorruptError naming the row', () => {
    const good = new EncodedRows([fullRow(), fullRow({ event_id: 'e2' })]).table;
    const bad = new EncodedRows([fullRow({ event_id: 'e3' }), fullRow({ event_id: 'e4', writer_epoch: null as unknown as string })]).table;
    const table = new arrow.Table([...good.batches, ...bad.batches]);
    expect(() => rowsFromArrow(table)).toThrow(CorruptError);
    expect(() => rowsFromArrow(table)).toThrow('column writer_epoch is null in a stored event (row 3)');
  });

  it('a deleted item whose id starts with U+FEFF keeps its blobs hidden (loadBlob matched tombstones by the id get() returned)', async () => {
    const log = await openLog({ root: tmp(), pipeline: 'p', experiment: 'bom' });
    try {
      const id = '\uFEFFitem';
      const bytes = Buffer.from('a blob of a BOM item');
      await log.append([{ itemId: id, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { img: { $blob: bytes.toString('base64') } } }]);
      const ref = (await log.fold(id)).fields.img as { $blobRef: { eventId: string } };
      expect(Buffer.from((await log.loadBlob(ref.$blobRef.eventId))!)).toEqual(bytes);
      expect((await log.deleteItem(id)).deleted).toBe(true);
      await expect(log.loadBlob(ref.$blobRef.eventId)).rejects.toThrow(NotFoundError);
    } finally {
      await log.close();
    }
  });
});
