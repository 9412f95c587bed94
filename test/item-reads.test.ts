/**
 * fields(), latestEvents() and blob inlining take an item's rows of an unmerged shard
 * generation by offset and keep them by a JS restatement of the Lance filter the base gets
 * (ItemFilter in lib/log/read/item-reads.ts). Both must select the same rows, or a read answers
 * differently before and after maintenance merges the item (I3). On real Lance: the same reads
 * with the item's rows in a live writer's shard (a base exists, holding another item, so every
 * filter is also run as SQL), then after everything is merged.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { createBatch, stepBatch } from './support/batches.ts';

/** Field names where SQL and JS string handling could part: quoting, LIKE wildcards, escapes, Unicode. */
const NAMES = ['a\\b', 'a\\', '\\', "it's", "'", 'a%b', 'a_b', 'a%', '%', '_', '\uFFFD', '😀x', 'e\u0301', 'é', '\\\\x', 'a.x', 'A.X', 'a\\u0041', 'a\\n', 'ß', 'ﬀ', 'x y', 'K', '\u212A'];
const ITEMS = ['plain', "it's", '\uFFFD', 'x\\'];
/** Inputs with a lone UTF-16 surrogate: Lance gets them as U+FFFD, JS compares them as they are. */
const LONE: [string, Record<string, unknown>][] = [
  ['names', { names: ['\uD800'] }],
  ['names', { names: ['ok', '\uDFFF'] }],
  ['prefix', { prefix: '\uD83D' }],
];

type Outcome = unknown;

function outcome(e: unknown): Outcome {
  const err = e as { name?: string; code?: string; field?: string };
  return { error: err.name, code: err.code, field: err.field };
}

const blob = (s: string) => ({ $blob: Buffer.from(s).toString('base64') });

describe('reads of an item in a live shard (rows kept in JS) equal the same reads of the merged base (SQL)', () => {
  const probes: [string, (log: Awaited<ReturnType<typeof openLog>>) => Promise<unknown>][] = [];
  for (const id of ITEMS) {
    const fq: Record<string, unknown>[] = [
      {},
      { inlineBytes: 64 },
      { names: [] },
      { names: [], prefix: 'a' },
      { names: NAMES },
      ...NAMES.map((n) => ({ names: [n] })),
      ...NAMES.map((n) => ({ prefix: n })),
      ...NAMES.map((n) => ({ prefix: n, names: [n] })),
      { prefix: 'e' },
      { prefix: 'a' },
      { prefix: 'a\\' },
      { names: ['a\\\\'] },
      { names: ['a\u0000'] },
      { prefix: '\u0000' },
      { names: ['bl', 'b1'], inlineBytes: 4 },
      ...LONE.map(([, q]) => q),
    ];
    for (const q of fq) probes.push([`${JSON.stringify(id)} fields ${JSON.stringify(q)}`, (log) => log.fields(id, q as never)]);
    const lq: Record<string, unknown>[] = [{ limit: 3 }, { limit: 1 }, { limit: 10_000 }, { limit: 10_000, inlineBytes: 64 }];
    for (const b of [1, 2, 3, 26, 27, 28, 50, 51, 52, 53, 54, 1000, 2 ** 53 - 1]) {
      lq.push({ limit: 2, beforeSeq: b }, { limit: 10_000, beforeSeq: b, eventTypes: ['FIELD_APPEND', 'ITEM_CREATED'], inlineBytes: 8 });
    }
    for (const t of ['ITEM_CREATED', 'FIELD_SET', 'FIELD_APPEND', 'STEP_COMPLETED', 'FAILED']) lq.push({ limit: 10_000, eventTypes: [t] }, { limit: 1, eventTypes: [t], inlineBytes: 4 });
    for (const q of lq) probes.push([`${JSON.stringify(id)} latest ${JSON.stringify(q)}`, (log) => log.latestEvents(id, q as never)]);
  }
  // An id with a lone surrogate: the base's SQL reads item '\uFFFD', a shard's index item '\uD800'.
  probes.push(['"\\ud800" fields', (log) => log.fields('\uD800')]);
  probes.push(['"\\ud800" latest', (log) => log.latestEvents('\uD800', { limit: 3 })]);
  probes.push(['"\\ud800" fold', (log) => log.fold('\uD800')]);

  let live: Record<string, Outcome> = {};
  let merged: Record<string, Outcome> = {};

  beforeAll(async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-item-reads-'));
    const at = { root, pipeline: 'p', experiment: 'e' };
    const first = await openLog({ ...at, slot: 9 });
    await first.append([createBatch('in-the-base')]);
    await first.close();
    const w = await openLog({ ...at, slot: 0, mergeEveryCommits: 1000 });
    await w.maintain();
    for (const id of ITEMS) {
      await w.append([createBatch(id, { set: Object.fromEntries(NAMES.map((n, k) => [n, k])) })]);
      await w.append([stepBatch(id, 1, { append: Object.fromEntries(NAMES.map((n) => [n, [n]])) })]);
      await w.append([stepBatch(id, 2, { set: { b1: blob('b1') }, append: { bl: [blob('one'), blob('two two two')] } })]);
    }
    const reader = await openLog(at);
    const run = async () => {
      const out: Record<string, Outcome> = {};
      for (const [k, f] of probes) out[k] = await f(reader).catch(outcome);
      return out;
    };
    const before = await reader.stats();
    expect(before.shards, 'the items are in one live generation').toHaveLength(1);
    expect(before.base.rows, 'a base holds the other item, so every filter also runs as SQL').toBe((await reader.latestEvents('in-the-base', { limit: 10_000 })).length);
    expect(before.base.rows).not.toBe(0);
    live = await run();
    await w.close();
    await reader.maintain();
    expect((await reader.stats()).shards, 'all merged').toHaveLength(0);
    merged = await run();
    await reader.close();
  }, 300_000);

  it('every probe answers the same live and merged', () => {
    const differ = Object.keys(live).filter((k) => JSON.stringify(live[k]) !== JSON.stringify(merged[k]));
    expect(differ).toEqual([]);
    // The probes read real data: all of ITEMS exist, so only the rejected inputs are errors.
    const errors = Object.keys(merged).filter((k) => (merged[k] as { error?: string }).error !== undefined);
    expect(errors).toHaveLength(ITEMS.length * LONE.length + 3);
  });

  it('a lone surrogate in itemId, names or prefix is an InvalidInputError naming the field', () => {
    for (const id of ITEMS) {
      for (const [field, q] of LONE) expect(merged[`${JSON.stringify(id)} fields ${JSON.stringify(q)}`]).toEqual({ error: 'InvalidInputError', code: 'INVALID_INPUT', field });
    }
    for (const k of ['"\\ud800" fields', '"\\ud800" latest', '"\\ud800" fold']) expect(merged[k], k).toEqual({ error: 'InvalidInputError', code: 'INVALID_INPUT', field: 'itemId' });
  });
});

it('deleteItem refuses an id with a lone surrogate (SQL would read the item named U+FFFD) and deletes nothing', async () => {
  const log = await openLog({ root: mkdtempSync(path.join(tmpdir(), 'dgcl-item-reads-del-')), pipeline: 'p', experiment: 'e' });
  const [ack] = await log.append([createBatch('\uFFFD')]);
  await expect(log.deleteItem('\uD800')).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'itemId' });
  expect((await log.fold('\uFFFD')).lastSeq, 'the item named U+FFFD is untouched').toBe(ack!.lastSeq);
  expect((await log.trajectory('\uFFFD')).map((e) => e.eventId)).toEqual(ack!.eventIds);
  await log.close();
});
