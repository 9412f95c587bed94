import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import * as arrow from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import { commitData, committedBytes, committedTable, commitTable, EncodedRows, fastAddCount, fastMergeCount, mergeData } from '../lib/log/write/lance-add.ts';
import { InternalError } from '../lib/errors.ts';
import { EVENT_SCHEMA, rowsFromArrow, rowsToArrow } from '../lib/schema.ts';
import { rowsOf, newItemBatch } from '../bench/common.ts';

const tmp = () => mkdtempSync(path.join(tmpdir(), 'dgcl-lance-add-'));

describe('EncodedRows: a shard commit handed to the native add', () => {
  it('takes the fast path on the pinned LanceDB and stores exactly the rows', async () => {
    const db = await lancedb.connect(tmp());
    const t = await db.createEmptyTable('log', EVENT_SCHEMA);
    const rows = [...rowsOf(newItemBatch('a'), 'a'), ...rowsOf(newItemBatch('b'), 'b')];
    const before = fastAddCount.n;
    await t.add(new EncodedRows(rows) as never);
    expect(fastAddCount.n).toBe(before + 1);
    const back = rowsFromArrow(await t.query().toArrow());
    expect(back.sort((x, y) => x.event_id.localeCompare(y.event_id))).toEqual([...rows].sort((x, y) => x.event_id.localeCompare(y.event_id)));
  });

  it('a table of another schema rejects the rows and keeps its own (Lance checks the schema, not LanceDB)', async () => {
    const db = await lancedb.connect(tmp());
    const other = new arrow.Schema([new arrow.Field('event_id', new arrow.Utf8(), false), new arrow.Field('n', new arrow.Int32(), true)]);
    const t = await db.createEmptyTable('other', other);
    const before = await t.version();
    await expect(t.add(new EncodedRows(rowsOf(newItemBatch('a'), 'a')) as never)).rejects.toThrow();
    expect(await t.countRows()).toBe(0);
    expect(await t.version()).toBe(before);
  });

  it('anything else goes through LanceDB’s own add', async () => {
    const db = await lancedb.connect(tmp());
    const t = await db.createEmptyTable('log', EVENT_SCHEMA);
    const before = fastAddCount.n;
    await t.add(rowsToArrow(rowsOf(newItemBatch('a'), 'a')) as never);
    expect(fastAddCount.n).toBe(before);
    expect(await t.countRows()).toBe(rowsOf(newItemBatch('a'), 'a').length);
  });

  it("a writer's merge hands its commits (rows, then tables) encoded once to the native mergeInsert: insert-if-absent of exactly those rows", async () => {
    const db = await lancedb.connect(tmp());
    const base = await db.createEmptyTable('base', EVENT_SCHEMA);
    const commits = [0, 1, 2, 3].map((c) => [...rowsOf(newItemBatch(`a${c}`), `a${c}`), ...rowsOf(newItemBatch(`b${c}`), `b${c}`)]);
    await base.add(new EncodedRows(commits[2]!) as never); // already there: not inserted again
    const before = fastMergeCount.n;
    const data = mergeData([...commits[0]!, ...commits[1]!], commits.slice(2).map((rows) => committedTable(commitData(rows))));
    await base.mergeInsert('event_id').whenNotMatchedInsertAll().execute(data as never);
    expect(fastMergeCount.n).toBe(before + 1);
    const sort = (r: ReturnType<typeof rowsFromArrow>) => [...r].sort((x, y) => x.event_id.localeCompare(y.event_id));
    expect(sort(rowsFromArrow(await base.query().toArrow()))).toEqual(sort(commits.flat()));
  });

  it('rows already in Arrow (commitTable) take the fast path too and are stored exactly; no rows is refused', async () => {
    const db = await lancedb.connect(tmp());
    const t = await db.createEmptyTable('log', EVENT_SCHEMA);
    const rows = [...rowsOf(newItemBatch('a'), 'a'), ...rowsOf(newItemBatch('b'), 'b')];
    const table = rowsToArrow(rows);
    const data = commitTable(table);
    expect(committedBytes(data)).toBe(arrow.tableToIPC(table, 'file').byteLength);
    const before = fastAddCount.n;
    await t.add(data as never);
    expect(fastAddCount.n).toBe(before + 1);
    const back = rowsFromArrow(await t.query().toArrow());
    expect(back.sort((x, y) => x.event_id.localeCompare(y.event_id))).toEqual([...rows].sort((x, y) => x.event_id.localeCompare(y.event_id)));
    expect(() => commitTable(rowsToArrow([]))).toThrow(InternalError);
  });

  it('the writer gets EncodedRows on the pinned LanceDB (an upgrade that loses the patch fails here), never for no rows', () => {
    expect(commitData(rowsOf(newItemBatch('a'), 'a'))).toBeInstanceOf(EncodedRows);
    expect(() => new EncodedRows([])).toThrow(InternalError);
  });
});
