/**
 * exportItems / dgcl export: JSON Lines and Parquet read back (Parquet by DuckDB, an independent
 * reader) equal the folded states; item-id ranges cover every item once; blobs as references or
 * files; bad input writes nothing.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportItems } from '../lib/export/export.ts';
import { InvalidInputError } from '../lib/errors.ts';
import type { CheckpointLog } from '../lib/api.ts';
import type { ItemState, OutputValue } from '../lib/types.ts';
import { BLOB, buildExperiment } from './support/report-log.ts';
import { dgcl } from './support/proc.ts';

let dir: string;
let log: CheckpointLog;
let states: ItemState[];

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'dgcl-export-'));
  log = await buildExperiment(path.join(dir, 'root'));
  states = await log.allStates();
  // The fixture really spans base and an unmerged shard, and every status.
  expect((await log.stats()).shards.length).toBeGreaterThanOrEqual(1);
  expect(new Set(states.map((s) => s.status))).toEqual(new Set(['completed', 'filtered', 'failed', 'in_progress']));
});

afterAll(async () => {
  await log.close();
});

const FIXED = ['item_id', 'root_item_id', 'parent_item_id', 'status', 'attempts'];
const FIELDS = ['big', 'image', 'messages', 'meta', 'mixed', 'n', 'ok', 'score', 'title'];

function expected(s: ItemState, fields: readonly string[], blob: (v: OutputValue, id: string, f: string) => unknown = (v) => v): Record<string, unknown> {
  const o: Record<string, unknown> = { item_id: s.itemId, root_item_id: s.rootItemId, parent_item_id: s.parentItemId, status: s.status, attempts: s.attempts };
  for (const f of fields) o[f] = f in s.fields ? blob(s.fields[f]!, s.itemId, f) : null;
  return o;
}

function readJsonl(file: string): Record<string, unknown>[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

async function readParquet(file: string): Promise<{ rows: Record<string, unknown>[]; types: Record<string, string> }> {
  const db = await DuckDBInstance.create(':memory:');
  const c = await db.connect();
  try {
    const types = Object.fromEntries(
      (await c.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet('${file}')`)).getRowObjectsJson().map((r) => [String(r.column_name), String(r.column_type)]),
    );
    const rows = (await c.runAndReadAll(`SELECT * FROM read_parquet('${file}') ORDER BY item_id`)).getRowObjects() as Record<string, unknown>[];
    return { rows, types };
  } finally {
    c.closeSync();
    db.closeSync();
  }
}

describe('exportItems', () => {
  it('JSON Lines of every item equals the folded states, over several item-id ranges', async () => {
    const out = path.join(dir, 'all.jsonl');
    const r = await exportItems(log, { out, status: 'any', chunkEvents: 15 });
    expect(r.ranges).toBeGreaterThan(3); // small ranges: items are split across several reads
    expect(r.columns).toEqual([...FIXED, ...FIELDS]);
    const rows = readJsonl(out);
    expect(rows).toEqual(states.map((s) => expected(s, FIELDS)));
    expect(r.rows).toBe(states.length);
  });

  it('--status picks completed (the default) or filtered items', async () => {
    // The fixture has items of every status, so each comparison below has rows on both sides.
    expect(new Set(states.map((s) => s.status))).toEqual(new Set(['completed', 'filtered', 'failed', 'in_progress']));
    for (const status of ['completed', 'filtered'] as const) {
      const out = path.join(dir, `${status}.jsonl`);
      await exportItems(log, { out, ...(status === 'filtered' ? { status } : {}), fields: ['n', 'title'] });
      const want = states.filter((s) => s.status === status).map((s) => expected(s, ['n', 'title']));
      expect(readJsonl(out)).toEqual(want);
    }
  });

  it('Parquet read back by DuckDB equals the folded states, with typed columns', async () => {
    const out = path.join(dir, 'all.parquet');
    const r = await exportItems(log, { out, status: 'any', chunkEvents: 20 });
    expect(r.format).toBe('parquet');
    const { rows, types } = await readParquet(out);
    expect(types).toEqual({
      item_id: 'VARCHAR',
      root_item_id: 'VARCHAR',
      parent_item_id: 'VARCHAR',
      status: 'VARCHAR',
      attempts: 'INTEGER',
      big: 'BIGINT',
      image: 'JSON',
      messages: 'JSON',
      meta: 'JSON',
      mixed: 'JSON',
      n: 'BIGINT',
      ok: 'BOOLEAN',
      score: 'DOUBLE',
      title: 'VARCHAR',
    });
    // DuckDB's values in the fold's terms: BIGINT as bigint, JSON columns as JSON text.
    const want = states.map((s) =>
      expected(s, FIELDS, (v, _id, f) => {
        if (f === 'big' || f === 'n') return typeof v === 'number' ? BigInt(v) : BigInt((v as { $int: string }).$int);
        if (['image', 'messages', 'meta', 'mixed'].includes(f)) return v;
        return v;
      }),
    );
    const got = rows.map((row) => {
      const o: Record<string, unknown> = { ...row };
      for (const f of ['image', 'messages', 'meta', 'mixed']) if (o[f] !== null) o[f] = JSON.parse(String(o[f]));
      return o;
    });
    expect(got).toEqual(want);
    expect(rows.find((x) => x.item_id === 'it-000')!.big).toBe(9007199254740993n); // exact beyond 2^53
  });

  it('--blobs writes each blob beside the export; rows hold the file paths relative to the export', async () => {
    const out = path.join(dir, 'blobs.parquet');
    const blobs = path.join(dir, 'blob-files');
    const r = await exportItems(log, { out, blobs, fields: ['image', 'n'] });
    const withBlob = states.filter((s) => s.status === 'completed' && 'image' in s.fields);
    expect(r.blobFiles).toBe(withBlob.length);
    const { rows, types } = await readParquet(out);
    expect(types.image).toBe('VARCHAR');
    for (const s of withBlob) {
      const row = rows.find((x) => x.item_id === s.itemId)!;
      expect(row.image).toBe(`blob-files/${s.itemId}/image`);
      expect(readFileSync(path.join(dir, String(row.image)))).toEqual(BLOB);
    }
    expect(readdirSync(blobs).sort()).toEqual(withBlob.map((s) => s.itemId).sort());
  });

  it('--blobs outside the export\'s folder: the paths still lead there from the export', async () => {
    const out = path.join(dir, 'nested', 'deeper', 'items.jsonl');
    const blobs = path.join(dir, 'elsewhere');
    await exportItems(log, { out, blobs, fields: ['image'] });
    const rows = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { item_id: string; image?: string });
    const withImage = rows.filter((x) => typeof x.image === 'string');
    expect(withImage.length).toBe(states.filter((s) => s.status === 'completed' && 'image' in s.fields).length);
    for (const row of withImage) {
      expect(row.image).toBe(`../../elsewhere/${row.item_id}/image`);
      expect(readFileSync(path.resolve(path.dirname(out), row.image!))).toEqual(BLOB);
    }
  });

  it('rejects bad input with a typed error naming it, and writes nothing', async () => {
    const out = path.join(dir, 'bad.jsonl');
    const cases: [Record<string, unknown>, string][] = [
      [{ format: 'csv' }, 'format'],
      [{ status: 'done' }, 'status'],
      [{ fields: [] }, 'fields'],
      [{ fields: ['n', 'n'] }, 'fields'],
      [{ fields: ['status'] }, 'fields'],
      [{ chunkEvents: 0 }, 'chunkEvents'],
      [{ out: 's3://b' }, 'out'],
    ];
    for (const [bad, field] of cases) {
      const err = await exportItems(log, { out, ...bad } as never).catch((e: unknown) => e);
      expect(err, JSON.stringify(bad)).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).field).toBe(field);
      expect(existsSync(out)).toBe(false);
    }
  });

  it('refuses a log object openLog did not return (a wrapper around one): INVALID_INPUT naming `log`, nothing written', async () => {
    const out = path.join(dir, 'wrapped.jsonl');
    const err = await exportItems(Object.create(log) as CheckpointLog, { out }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).field).toBe('log');
    expect(existsSync(out)).toBe(false);
  });

  it('dgcl export writes the same rows as the library; bad usage exits 2', async () => {
    const flags = ['--root', path.join(dir, 'root'), '--pipeline', 'p', '--experiment', 'e'];
    const out = path.join(dir, 'cli.jsonl');
    const r = await dgcl(['export', ...flags, '--out', out, '--status', 'any', '--fields', 'n,title', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ rows: states.length, format: 'jsonl' });
    expect(readJsonl(out)).toEqual(states.map((s) => expected(s, ['n', 'title'])));
    const bad = await dgcl(['export', ...flags, '--out', path.join(dir, 'x.jsonl'), '--status', 'done']);
    expect(bad.code).toBe(2);
    expect(existsSync(path.join(dir, 'x.jsonl'))).toBe(false);
  });
});
