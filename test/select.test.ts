/**
 * `where` on a real log (Lance datasets in a temp folder, base and unmerged shard): `items`,
 * `failures`, `exportItems` and `report` select exactly the expected items, paged or not,
 * scanning the log and through the projection maintenance keeps, combined with the other
 * listing filters; a bad filter is INVALID_INPUT before anything is read or written.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportItems } from '../lib/export/export.ts';
import { InvalidInputError } from '../lib/errors.ts';
import { openLog } from '../lib/index.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { readsOf } from '../lib/log/reads.ts';
import type { ScanOptions } from '../lib/log/read/stream.ts';
import { report } from '../lib/report/report.ts';
import { parseWhere } from '../lib/select/parse.ts';
import type { Where } from '../lib/select/where.ts';
import type { ItemQuery } from '../lib/types.ts';
import { buildSelectLog, fillerId, FILLERS } from './support/select-log.ts';

const fillers = (keep: (i: number) => boolean) => Array.from({ length: FILLERS }, (_, i) => i).filter(keep).map(fillerId);

/** Filter text -> the ids it selects in the fixture (test/support/select-log.ts), worked out by hand. */
const CASES: Array<[string, string[]]> = [
  ['status = failed', ['b-fail', 'f-fail2']],
  ['error_type = Timeout', ['c-retry', 'f-fail2']],
  ['error_type = RateLimitError or error_type = Timeout', ['b-fail', 'c-retry', 'f-fail2']],
  ['attempts >= 2', ['c-retry']],
  ['step = gen', ['c-retry']],
  ['step = score', ['d-child']],
  ['not step exists', ['e-bare', 'f-fail2']],
  ['parent = a-done', ['d-child']],
  ['root = a-done', ['a-done', 'd-child']],
  ['parent exists', ['d-child']],
  ['item_id > p-35', fillers((i) => i > 35)],
  // A later batch's tag replaces an earlier one: c-retry's model is now gpt-4.
  ['tag.model = gpt', ['a-done', 'f-fail2']],
  ['tag.model contains gpt', ['a-done', 'c-retry', 'f-fail2']],
  ['tag.model = "gpt-4"', ['c-retry']],
  ['tag.batch = 0 and status = completed', fillers((i) => i % 3 === 0 && i % 5 === 0)],
  ['(status = completed or status = filtered) and not tag.batch exists', ['d-child']],
  ['status != in_progress and tag.batch exists', ['a-done', ...fillers((i) => i % 5 === 0)]],
  // a-done's batch tag is text: it never compares with a number.
  ['tag.batch = one', ['a-done']],
  ['tag.batch < 1', fillers((i) => i % 3 === 0)],
  // An int beyond 2^53 ({$int}) compares as a number.
  ['score > 0.5', ['a-done', 'c-retry', 'f-fail2']],
  ['score < 0.5', ['b-fail']],
  ['score > 9007199254740991', ['c-retry']],
  ['label = cat', ['a-done']],
  ['label contains at', ['a-done', 'd-child']],
  ['words contains y', ['a-done']],
  ['words contains z', []],
  ['not label exists and not n exists', ['c-retry', 'e-bare', 'f-fail2']],
  ['n >= 35 and even = true', fillers((i) => i >= 35 && i % 2 === 0)],
  ['n < 3 or score > 0.5', ['a-done', 'c-retry', 'f-fail2', ...fillers((i) => i < 3)]],
  // Items without `even` are not `!= true`: a missing field compares false.
  ['even != true', fillers((i) => i % 2 === 1)],
  ['not even = true', ['a-done', 'b-fail', 'c-retry', 'd-child', 'e-bare', 'f-fail2', ...fillers((i) => i % 2 === 1)]],
  // A field of another type than the value never matches.
  ['label > 3', []],
];

async function pageThrough(log: CheckpointLog, q: ItemQuery, limit: number): Promise<string[][]> {
  const pages: string[][] = [];
  let after: string | undefined;
  for (let n = 0; n < 200; n++) {
    const page = await log.items({ ...q, limit, ...(after !== undefined ? { after } : {}) });
    pages.push(page.items.map((s) => s.itemId));
    if (page.next === undefined) return pages;
    expect(page.next).toBe(page.items.at(-1)?.itemId);
    after = page.next;
  }
  throw new Error('more than 200 pages');
}

/** Every case, whole and in pages of 1, 2 and 5: exactly its ids, every page but the last full. */
async function checkListings(log: CheckpointLog): Promise<void> {
  for (const [text, ids] of CASES) {
    const where = parseWhere(text);
    expect((await log.items({ where })).items.map((s) => s.itemId), text).toEqual(ids);
    for (const limit of [1, 2, 5]) {
      const pages = await pageThrough(log, { where }, limit);
      expect(pages.flat(), `${text}, pages of ${limit}`).toEqual(ids);
      expect(pages.slice(0, -1).every((p) => p.length === limit), `${text}: pages of ${limit} are full but the last`).toBe(true);
      expect(pages.at(-1)!.length, `${text}: the last page of ${limit}`).toBe(ids.length === 0 ? 0 : ((ids.length - 1) % limit) + 1);
    }
  }
}

let dir: string;
let log: CheckpointLog;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'dgcl-select-'));
  log = await buildSelectLog(path.join(dir, 'root'));
  // The fixture spans the base and an unmerged shard.
  expect((await log.stats()).shards.some((s) => s.rows > 0)).toBe(true);
});

afterAll(async () => {
  await log.close();
});

describe('items({where}) and failures({where})', () => {
  it('select exactly the expected items, whole and paged, when the log is scanned (no projection yet)', async () => {
    expect(await readsOf(log).projected(), 'no projection before the first maintenance').toBeNull();
    await checkListings(log);
  });

  it('decide from the summary first: values are read only for the items it leaves undecided, and only those named', async () => {
    const scans: ScanOptions[] = [];
    const reads = readsOf(log);
    const scanEvents = reads.scanEvents.bind(reads);
    reads.scanEvents = (o, make) => {
      scans.push(o);
      return scanEvents(o, make);
    };
    try {
      const reads = (c: string) => scans.filter((o) => o.columns.includes(c));
      expect((await log.items({ where: parseWhere('status = failed and score < 0.5') })).items.map((s) => s.itemId)).toEqual(['b-fail']);
      expect(reads('value_f64').map((o) => o.filter)).toEqual([`item_id IN ('b-fail', 'f-fail2') AND event_type IN ('FIELD_SET', 'FIELD_APPEND') AND field_name IN ('score')`]);
      expect(reads('query_tags_json')).toEqual([]);
      scans.length = 0;
      expect((await log.items({ where: parseWhere('status = completed and tag.batch = one') })).items.map((s) => s.itemId)).toEqual(['a-done']);
      expect(reads('query_tags_json')).toHaveLength(1);
      expect(reads('query_tags_json')[0]!.filter).toMatch(/^item_id IN \('a-done', 'p-00', 'p-05', .*'p-35'\) AND query_tags_json IS NOT NULL AND \(query_tags_json LIKE '%"batch":%' ESCAPE '\\'\)$/);
      expect(reads('value_f64')).toEqual([]);
      // Decided by summaries alone: no value or tag column is read.
      scans.length = 0;
      expect((await log.items({ where: parseWhere('status = failed or attempts > 1 or parent exists') })).items.map((s) => s.itemId)).toEqual(['b-fail', 'c-retry', 'd-child', 'f-fail2']);
      expect(scans.length).toBeGreaterThanOrEqual(1);
      expect(scans.flatMap((o) => o.columns).filter((c) => c.startsWith('value_') || c === 'query_tags_json')).toEqual([]);
    } finally {
      delete (reads as { scanEvents?: unknown }).scanEvents;
    }
  });

  it('combine with status, tags and lineage: all must hold', async () => {
    const ids = async (q: ItemQuery) => (await log.items(q)).items.map((s) => s.itemId);
    expect(await ids({ status: 'failed', where: parseWhere('tag.model = gpt') })).toEqual(['f-fail2']);
    expect(await ids({ status: 'completed', where: parseWhere('n < 12') })).toEqual(['p-00', 'p-05', 'p-10']);
    expect(await ids({ tags: { model: 'gpt' }, where: parseWhere('score > 0.8') })).toEqual(['a-done']);
    expect(await ids({ tags: { batch: 1 }, where: parseWhere('n > 30') })).toEqual(fillers((i) => i > 30 && i % 3 === 1));
    expect(await ids({ rootItemId: 'a-done', where: parseWhere('label contains C') })).toEqual(['d-child']);
    expect(await ids({ after: 'p-30', where: parseWhere('even = true') })).toEqual(fillers((i) => i > 30 && i % 2 === 0));
    const pages = await pageThrough(log, { status: 'in_progress', where: parseWhere('tag.batch = 2') }, 3);
    expect(pages.flat()).toEqual(fillers((i) => i % 3 === 2 && i % 5 !== 0));
  });

  it('failures({where}) lists the failed items selected, each with its last failure', async () => {
    const failed = async (text: string) => (await log.failures({ where: parseWhere(text) })).map((f) => [f.itemId, f.errorType]);
    expect(await failed('error_type = Timeout')).toEqual([['f-fail2', 'Timeout']]);
    expect(await failed('tag.model = gpt')).toEqual([['f-fail2', 'Timeout']]);
    expect(await failed('tag.model = claude')).toEqual([['b-fail', 'RateLimitError']]);
    expect(await failed('score < 0.5 or not step exists')).toEqual([
      ['b-fail', 'RateLimitError'],
      ['f-fail2', 'Timeout'],
    ]);
    expect(await failed('status = completed')).toEqual([]);
    // Without a filter, every failed item (unchanged).
    expect((await log.failures()).map((f) => f.itemId)).toEqual(['b-fail', 'f-fail2']);
  });

  it('a bad filter object is INVALID_INPUT naming its path, before any read', async () => {
    const bad = { and: [{ cmp: { left: 'attempts', op: '<', value: 'x' } }] } as unknown as Where;
    for (const call of [() => log.items({ where: bad }), () => log.failures({ where: bad })]) {
      const e = await call().catch((x: unknown) => x);
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).field).toBe('where.and[0].cmp.value');
      expect((e as Error).message).toContain('attempts is a number');
    }
    const text = await log.items({ where: 'status = failed' as unknown as Where }).catch((x: unknown) => x);
    expect((text as InvalidInputError).message).toContain('parseWhere');
  });
});

describe('exportItems({where}) and report({where})', () => {
  const exported = async (o: { where: string; status?: 'completed' | 'filtered' | 'any'; fields?: string[] }) => {
    const out = path.join(dir, `export-${Math.random().toString(36).slice(2)}.jsonl`);
    const r = await exportItems(log, { out, where: parseWhere(o.where), ...(o.status ? { status: o.status } : {}), ...(o.fields ? { fields: o.fields } : {}) });
    const rows = readFileSync(out, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(r.rows).toBe(rows.length);
    return rows;
  };

  it('export keeps its status default and exports exactly the items the filter selects among them', async () => {
    expect((await exported({ where: 'n < 20' })).map((r) => r.item_id)).toEqual(fillers((i) => i < 20 && i % 5 === 0));
    expect((await exported({ where: 'tag.model contains gpt', status: 'any' })).map((r) => r.item_id)).toEqual(['a-done', 'c-retry', 'f-fail2']);
    expect((await exported({ where: 'error_type exists', status: 'any' })).map((r) => r.item_id)).toEqual(['b-fail', 'c-retry', 'f-fail2']);
    expect((await exported({ where: 'status = failed' })).map((r) => r.item_id)).toEqual([]);
  });

  it('export reads the fields its filter names without exporting them', async () => {
    const rows = await exported({ where: 'label contains at', status: 'any', fields: ['n'] });
    expect(rows.map((r) => r.item_id)).toEqual(['a-done', 'd-child']);
    expect(Object.keys(rows[0]!)).toEqual(['item_id', 'root_item_id', 'parent_item_id', 'status', 'attempts', 'n']);
  });

  it('a bad filter fails the export before it writes anything', async () => {
    const out = path.join(dir, 'never.jsonl');
    const e = await exportItems(log, { out, where: { not: { cmp: { left: 'status', op: '=', value: 'done' } } } }).catch((x: unknown) => x);
    expect((e as InvalidInputError).field).toBe('where.not.cmp.value');
    expect(existsSync(out)).toBe(false);
  });

  it('the report counts only the selected items and says which filter on the page', async () => {
    const where = parseWhere('status = failed or attempts > 1');
    const r = await report(log, { where, out: path.join(dir, 'report.html') });
    expect(r.data.items.map((i) => i.id).sort()).toEqual(['b-fail', 'c-retry', 'f-fail2']);
    expect(r.data.itemCount).toBe(3);
    expect(r.data.status).toEqual({ in_progress: 1, failed: 2, completed: 0, filtered: 0 });
    let events = 0;
    for (const id of ['b-fail', 'c-retry', 'f-fail2']) events += (await log.trajectory(id)).length;
    expect(r.data.events).toBe(events);
    expect(r.data.where).toBe('status = "failed" or attempts > 1');
    expect(r.html).toContain('<title>dgcl report: p / select (where status = &quot;failed&quot; or attempts &gt; 1)</title>');
    const none = await report(log, { where: parseWhere('tag.model = nobody') });
    expect([none.data.itemCount, none.data.events, none.data.items.length]).toEqual([0, 0, 0]);
    const all = await report(log);
    expect([all.data.where, all.data.itemCount]).toEqual([null, 6 + FILLERS]);
  });
});

describe('through the projection', () => {
  it('after maintenance the same filters select the same items', async () => {
    const m = await log.maintain();
    expect(m.failures).toEqual([]);
    expect(await readsOf(log).projected(), 'a projection describes the base').not.toBeNull();
    await checkListings(log);
    expect((await log.failures({ where: parseWhere('tag.model = gpt') })).map((f) => f.itemId)).toEqual(['f-fail2']);
  });

  it('items written after maintenance (the tail) are selected too', async () => {
    await log.append([{ itemId: 'z-late', runId: 'r', create: {}, step: { name: 'gen', index: 1 }, set: { score: 0.95 }, queryTags: { model: 'gpt' } }]);
    const ids = async (text: string) => (await log.items({ where: parseWhere(text) })).items.map((s) => s.itemId);
    expect(await ids('score > 0.8 and tag.model = gpt')).toEqual(['a-done', 'z-late']);
    expect(await ids('step = gen')).toEqual(['c-retry', 'z-late']);
  });
});

describe('many items: values loaded in chunks, ids matched beyond one IN list', () => {
  it('a filter on a field selects exactly its items among 1,200, whole and paged', async () => {
    const big = await openLog({ root: path.join(dir, 'big'), pipeline: 'p', experiment: 'big' });
    try {
      const id = (i: number) => `m-${String(i).padStart(4, '0')}`;
      await big.append(Array.from({ length: 1200 }, (_, i) => ({ itemId: id(i), runId: 'r', create: {}, set: { n: i }, queryTags: { shard: i % 4 } })));
      const want = (keep: (i: number) => boolean) => Array.from({ length: 1200 }, (_, i) => i).filter(keep).map(id);
      const all = async (text: string) => (await big.items({ where: parseWhere(text) })).items.map((s) => s.itemId);
      // Undecided from summaries: every item's field read (more ids than one IN list holds).
      expect(await all('n >= 1190 or n = 3')).toEqual(want((i) => i >= 1190 || i === 3));
      expect(await all('tag.shard = 3 and n < 20')).toEqual(want((i) => i % 4 === 3 && i < 20));
      // Pages: the first chunks hold no match, later ones do.
      const pages = await pageThrough(big, { where: parseWhere('n >= 1195') }, 2);
      expect(pages).toEqual([want((i) => i === 1195 || i === 1196), want((i) => i === 1197 || i === 1198), [id(1199)]]);
    } finally {
      await big.close();
    }
  });
});
