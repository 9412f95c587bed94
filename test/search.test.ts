/**
 * `search` on a local root, real Lance: the same answers from unmerged shards (scanned), from the
 * base through its full-text indexes (after maintenance), and from base rows merged after the
 * last index refresh (LanceDB's flat search of unindexed rows); ids, hashes and numbers never
 * match; deleted items are hidden; one hit per event while a merge has copied it and not yet
 * retired its shard; the limit, the candidate re-asks of the index, words too long for it; the
 * CLI's output; `dgcl stats` naming the indexes.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { LanceTables } from '../lib/log/tables.ts';
import { TEXT_COLUMNS, textIndexName, textQuery } from '../lib/log/text-index.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { queryWords } from '../lib/text-match.ts';
import { run } from './support/cli.ts';
import { tree } from './support/tree.ts';
import { describeHits, SEARCH_BATCHES, SEARCH_CASES, storedIds } from './support/search-fixture.ts';

type Log = Awaited<ReturnType<typeof openLog>>;

function freshRoot(name: string) {
  const root = mkdtempSync(path.join(tmpdir(), `dgcl-search-${name}-`));
  return { root, pipeline: 'p', experiment: 'e' };
}

/** A writer whose shard stays unmerged until it is closed. */
const unmerged = (at: ReturnType<typeof freshRoot>, slot = 0) => openLog({ ...at, slot, mergeEveryCommits: 1_000_000, mergeIdleMs: 0 });

/** The base's full-text index of `column`, as LanceDB lists it. */
async function textIndex(log: Log, column: (typeof TEXT_COLUMNS)[number]) {
  const tables = new LanceTables(log.uri, undefined, new LocalObjectStore(log.uri));
  try {
    const base = (await tables.base(true))!;
    return (await base.listIndices()).find((i) => i.name === textIndexName(column));
  } finally {
    tables.close();
  }
}

interface State {
  name: string;
  make: () => Promise<{ reader: Log; done: () => Promise<void> }>;
}

const STATES: State[] = [
  {
    name: 'in unmerged shards (no base yet)',
    make: async () => {
      const at = freshRoot('tail');
      const w = await unmerged(at);
      for (const b of SEARCH_BATCHES) await w.append([b]);
      const reader = await openLog(at);
      expect((await reader.stats()).base.rows).toBe(0);
      return { reader, done: async () => (await reader.close(), await w.close()) };
    },
  },
  {
    name: 'in the base, through its full-text indexes (after maintenance)',
    make: async () => {
      const at = freshRoot('base');
      const w = await openLog(at);
      for (const b of SEARCH_BATCHES) await w.append([b]);
      await w.close(); // merges its shard
      const reader = await openLog(at);
      const report = await reader.maintain();
      expect(report.failures).toEqual([]);
      for (const c of TEXT_COLUMNS) {
        const ix = await textIndex(reader, c);
        expect(ix, `${c}'s index`).toBeDefined();
        expect(ix!.numUnindexedRows, `${c}'s index covers the base`).toBe(0);
      }
      expect((await reader.stats()).shards).toEqual([]);
      return { reader, done: () => reader.close() };
    },
  },
  {
    name: 'in base rows merged after the last index refresh',
    make: async () => {
      const at = freshRoot('late');
      const first = await openLog(at);
      await first.append([{ itemId: 'filler', runId: 'r0', create: {}, set: { note: 'something else entirely' } }]);
      await first.close();
      const reader = await openLog(at);
      await reader.maintain();
      const w = await openLog(at);
      for (const b of SEARCH_BATCHES) await w.append([b]);
      await w.close(); // merged into the base, not indexed
      const ix = await textIndex(reader, 'value_str');
      expect(ix!.numUnindexedRows, 'the fixture rows are not in the index').toBeGreaterThanOrEqual(SEARCH_BATCHES.length);
      expect((await reader.stats()).shards).toEqual([]);
      return { reader, done: () => reader.close() };
    },
  },
];

describe.each(STATES)('search $name', (state) => {
  let reader: Log;
  let done: () => Promise<void>;
  beforeAll(async () => {
    ({ reader, done } = await state.make());
  });
  afterAll(async () => done?.());

  it.each(SEARCH_CASES)('finds $what', async ({ text, options, hits }) => {
    expect(await describeHits(reader, text, options)).toEqual(hits);
  });

  it('never matches an event id, checkpoint id, writer epoch or blob checksum', async () => {
    const ids = await storedIds(reader);
    expect(ids.length).toBeGreaterThan(20);
    for (const id of ids) expect(await reader.search(id), id).toEqual([]);
  });

  it('gives a snippet of the text around the match, and the hit its seq and error type', async () => {
    const [hit] = await reader.search('slow down');
    const failed = (await reader.trajectory('recovered')).find((e) => e.eventType === 'FAILED')!;
    expect(hit).toEqual({ itemId: 'recovered', seq: failed.itemSeq, eventType: 'FAILED', field: null, errorType: 'RateLimitError', snippet: 'Traceback (most recent call last): File "gen.py", line 12, in invoke_model RateLimitError: slow down' });
    const [json] = await reader.search('control');
    expect(json!.snippet).toBe('first line escaped word\u001bcontrol word');
  });
});

describe('search hides deleted items', () => {
  it('in unmerged shards, and in the base after maintenance (the tombstone kept)', async () => {
    const at = freshRoot('deleted');
    const w = await unmerged(at);
    for (const b of SEARCH_BATCHES) await w.append([b]);
    const before = await w.search('invoice');
    expect(before.map((h) => h.itemId).sort()).toEqual(['chat', 'chat', 'recovered']);
    expect((await w.deleteItem('recovered')).deleted).toBe(true);
    expect((await w.search('invoice')).map((h) => h.itemId)).toEqual(['chat', 'chat']);
    expect(await w.search('quota')).toEqual([]);
    await w.close();
    const m = await openLog(at);
    const report = await m.maintain();
    expect(report.pendingDeletions, 'still in the base, hidden by its tombstone').toBe(1);
    expect((await m.search('invoice')).map((h) => h.itemId)).toEqual(['chat', 'chat']);
    expect(await m.search('quota')).toEqual([]);
    // Created again: the new incarnation's events are found, the deleted ones still not.
    await m.append([{ itemId: 'recovered', runId: 'r2', create: {}, set: { prompt: 'a new invoice' } }]);
    const again = (await m.search('invoice')).filter((h) => h.itemId === 'recovered');
    expect(again.map((h) => h.snippet)).toEqual(['a new invoice']);
    await m.close();
  });
});

describe('search returns each event once', () => {
  it('while a merge has copied a shard into the base and not yet retired it', async () => {
    const at = freshRoot('copies');
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let reached!: () => void;
    const atRetire = new Promise<void>((r) => (reached = r));
    const w = await openLog({
      ...at,
      mergeEveryCommits: 1_000_000,
      mergeIdleMs: 0,
      hooks: {
        async beforeMergeStep(step) {
          if (step === 'retire-marker') {
            reached();
            await held;
          }
        },
      },
    });
    let appended = 0;
    for (const b of SEARCH_BATCHES) for (const ack of await w.append([b])) appended += ack.eventIds.length;
    const merging = w.mergeOwnShard();
    await atRetire;
    const reader = await openLog(at);
    const stats = await reader.stats();
    expect(stats.base.rows, 'the base holds a copy of every event').toBe(appended);
    expect(stats.shards.filter((s) => !s.retired && s.rows > 0).length, 'the shard is still visible').toBe(1);
    expect(await describeHits(reader, 'invoice')).toEqual(SEARCH_CASES[0]!.hits);
    release();
    await merging;
    await reader.close();
    await w.close();
  });
});

describe('search limits', () => {
  const many = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ itemId: `m-${String(from + i).padStart(4, '0')}`, runId: 'r', create: {}, set: { text: 'common needle' } }));

  it('returns at most `limit` events, 100 by default, from the tail and from the base', async () => {
    const at = freshRoot('limit');
    const w = await unmerged(at);
    await w.append(many(130));
    expect((await w.search('needle')).length).toBe(100);
    expect((await w.search('needle', { limit: 7 })).length).toBe(7);
    expect((await w.search('needle', { limit: 10_000 })).length).toBe(130);
    await w.close();
    const m = await openLog(at);
    await m.maintain();
    expect((await m.search('needle')).length).toBe(100);
    expect((await m.search('needle', { limit: 7 })).length).toBe(7);
    // Tail and base together, sorted by item.
    await m.append(many(20, 130));
    const all = await m.search('needle', { limit: 10_000 });
    expect(all.map((h) => h.itemId)).toEqual(Array.from({ length: 150 }, (_, i) => `m-${String(i).padStart(4, '0')}`));
    await m.close();
  });

  it('asks the index again while its candidates are JSON keys, until every value holding the word is found', async () => {
    const at = freshRoot('keys');
    const w = await openLog(at);
    // 600 events with the word only as a key (candidates the check drops), 3 with it as a value.
    const keys = Array.from({ length: 600 }, (_, i) => ({ itemId: `k-${String(i).padStart(4, '0')}`, runId: 'r', create: {}, set: { meta: { needle: i } } }));
    await w.append(keys);
    await w.append(['v-1', 'v-2', 'v-3'].map((itemId) => ({ itemId, runId: 'r', create: {}, set: { meta: { label: 'a needle here' } } })));
    await w.close();
    const m = await openLog(at);
    await m.maintain();
    expect((await m.search('needle')).map((h) => h.itemId)).toEqual(['v-1', 'v-2', 'v-3']);
    await m.close();
  });

  it('finds a word too long for the index (64 bytes or more) by scanning the base', async () => {
    const at = freshRoot('long');
    const long = `x${'y'.repeat(70)}`;
    const w = await openLog(at);
    await w.append([{ itemId: 'a', runId: 'r', create: {}, set: { s: `short ${long} word`, j: { t: `${long}` } } }]);
    await w.close();
    const m = await openLog(at);
    await m.maintain();
    expect((await m.search(long.toUpperCase())).map((h) => h.field)).toEqual(['j', 's']);
    expect((await m.search(`${long} word`)).map((h) => h.field)).toEqual(['s']);
    await m.close();
  });

  it('refuses what cannot match with INVALID_INPUT naming the option', async () => {
    const at = freshRoot('input');
    const w = await openLog(at);
    await w.append([SEARCH_BATCHES[0]!]);
    const bad: Array<[unknown, unknown, string]> = [
      ['', {}, 'text'],
      ['--- ...', {}, 'text'],
      ['x', { limit: 0 }, 'limit'],
      ['x', { limit: 10_001 }, 'limit'],
      ['x', { limit: 1.5 }, 'limit'],
      ['x', { fields: [] }, 'fields'],
      ['x', { fields: ['\uD800'] }, 'fields'],
      ['x', { eventTypes: [] }, 'eventTypes'],
      ['x', { eventTypes: ['NOPE'] }, 'eventTypes'],
      ['x', { eventTypes: ['ITEM_CREATED', 'TERMINAL'] }, 'eventTypes'],
      ['x', { eventTypes: ['FAILED'], fields: ['prompt'] }, 'fields'],
    ];
    for (const [text, o, field] of bad) {
      await expect(w.search(text as string, o as never), JSON.stringify([text, o])).rejects.toMatchObject({ code: 'INVALID_INPUT', field });
    }
    await w.close();
  });
});

describe('search is a read', () => {
  it('writes nothing, fails on a log that does not exist, and is refused by a closed log', async () => {
    const at = freshRoot('read');
    const w = await openLog(at);
    await w.append([SEARCH_BATCHES[0]!]);
    await w.close();
    const before = tree(at.root);
    const r = await openLog(at);
    expect((await r.search('invoice')).map((h) => h.itemId)).toEqual(['recovered']);
    await r.close();
    expect(tree(at.root)).toEqual(before);
    await expect(r.search('invoice')).rejects.toMatchObject({ code: 'INTERNAL', message: expect.stringMatching(/closed/) });
    const missing = await openLog({ ...at, experiment: 'never-written' });
    await expect(missing.search('invoice')).rejects.toMatchObject({ code: 'LOG_NOT_FOUND' });
    await missing.close();
    expect(tree(at.root)).toEqual(before);
  });
});

describe("the index's tokenizer and the text rules split and lowercase words alike", () => {
  it('for each stored text, Lance tokenize() gives the words queryWords gives', async () => {
    const at = freshRoot('tokens');
    const w = await openLog(at);
    await w.append([{ itemId: 'a', runId: 'r', create: {}, set: { s: 'x' } }]);
    await w.close();
    const m = await openLog(at);
    await m.maintain();
    const tables = new LanceTables(m.uri, undefined, new LocalObjectStore(m.uri));
    const base = (await tables.base(true))!;
    const texts = ['RateLimitError: rate_limit/exceeded (429)', 'ΟΔΟΣ Straße İstanbul K', 'e\u0301te\u0301 café naïve', '東京タワー に 行く', 'a\u00a0b\u2028c', 'x²y ½ ٣٤', 'emoji😀word 😀', "don't it's"];
    for (const t of texts) {
      const lance = (await base.tokenize(t, { column: 'value_str' })).map((x) => x.text);
      expect([...new Set(lance)], t).toEqual(queryWords(t));
    }
    // The index query finds the row through the index alone (fastSearch skips unindexed rows).
    const hit = await base.query().fullTextSearch(textQuery('value_str', ['x']), { columns: 'value_str' }).select(['item_id', '_score']).fastSearch().toArray();
    expect(hit.map((r) => r.item_id)).toEqual(['a']);
    tables.close();
    await m.close();
  });
});

describe('dgcl search and stats', () => {
  let at: ReturnType<typeof freshRoot>;
  const flags = () => ['--root', at.root, '--pipeline', at.pipeline, '--experiment', at.experiment];
  beforeAll(async () => {
    at = freshRoot('cli');
    const w = await openLog(at);
    for (const b of SEARCH_BATCHES) await w.append([b]);
    await w.close();
    const m = await openLog(at);
    await m.maintain();
    await m.close();
  });

  it('--json prints one line per event with exactly itemId, seq, eventType, field, errorType, snippet', async () => {
    const r = await run(['search', 'invoice', '--json', ...flags()]);
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => Object.keys(l))).toEqual(lines.map(() => ['itemId', 'seq', 'eventType', 'field', 'errorType', 'snippet']));
    expect(lines.map((l) => [l.itemId, l.eventType, l.field, l.errorType])).toEqual([
      ['chat', 'FIELD_SET', 'tags', null],
      ['chat', 'FIELD_APPEND', 'log', null],
      ['recovered', 'FIELD_SET', 'prompt', null],
    ]);
    expect(r.stderr).toBe('');
  });

  it('prints a table by default, and says when nothing matched', async () => {
    const r = await run(['search', 'Quota', ...flags()]);
    expect(r.code).toBe(0);
    const [head, row, ...rest] = r.stdout.split('\n');
    expect(head!.split(/\s{2,}/)).toEqual(['ITEM', 'SEQ', 'EVENT', 'FIELD/ERROR', 'SNIPPET']);
    expect(row!.split(/\s{2,}/)).toEqual(['recovered', expect.stringMatching(/^\d+$/), 'FAILED', 'RateLimitError', '429 Too Many Requests: quota exhausted for the model']);
    expect(rest).toEqual([]);
    const none = await run(['search', 'absent', ...flags()]);
    expect([none.code, none.stdout]).toEqual([0, '(no matching events)']);
  });

  it('--field narrows (repeatable), --limit bounds and says more may match', async () => {
    const one = await run(['search', 'invoice', '--json', '--field', 'prompt', ...flags()]);
    expect(one.stdout.split('\n').map((l) => (JSON.parse(l) as { field: string }).field)).toEqual(['prompt']);
    const two = await run(['search', 'invoice', '--json', '--field', 'prompt', '--field', 'log', ...flags()]);
    expect(two.stdout.split('\n').map((l) => (JSON.parse(l) as { field: string }).field)).toEqual(['log', 'prompt']);
    const limited = await run(['search', 'invoice', '--json', '--limit', '2', ...flags()]);
    expect(limited.stdout.split('\n')).toHaveLength(2);
    expect(limited.stderr).toContain('2 events shown, the limit');
    const bad = await run(['search', 'invoice', '--limit', '0', ...flags()]);
    expect(bad.code).toBe(2);
    const punct = await run(['search', '?!', ...flags()]);
    expect([punct.code, punct.stderr]).toEqual([2, expect.stringContaining('INVALID_INPUT: text:')]);
  });

  it('dgcl stats names the full-text indexes', async () => {
    const r = await run(['stats', ...flags()]);
    expect(r.stdout).toContain(`full-text (search): ${TEXT_COLUMNS.map(textIndexName).sort().join(', ')}`);
    const json = JSON.parse((await run(['stats', '--json', ...flags()])).stdout) as { base: { indexes: string[] } };
    expect(json.base.indexes).toEqual(expect.arrayContaining(TEXT_COLUMNS.map(textIndexName)));
  });
});
