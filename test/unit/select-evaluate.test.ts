/**
 * decide / matches (lib/select/evaluate.ts): every operator on every kind of value, missing
 * values, the three-valued answer for tags and fields not loaded, and exact big ints.
 */
import { describe, expect, it } from 'vitest';
import { InternalError } from '../../lib/errors.ts';
import { compareText, decide, matches } from '../../lib/select/evaluate.ts';
import { parseWhere } from '../../lib/select/parse.ts';
import { needsOf, subjectOfState, tagsOfRows, type Subject } from '../../lib/select/subject.ts';
import type { EventRow, ItemState } from '../../lib/types.ts';

const subject: Subject = {
  itemId: 'doc-7',
  status: 'failed',
  step: 'gen',
  attempts: 3,
  errorType: 'RateLimitError',
  rootItemId: 'doc-1',
  parentItemId: 'doc-1',
  tags: { model: 'gpt-4', batch: 2, flags: ['a', 'b'], nothing: null },
  fields: {
    score: 0.75,
    n: 10,
    big: { $int: '9007199254740993' },
    neg: { $int: '-9007199254740993' },
    five: { $int: '5' },
    minusFive: { $int: '-5' },
    title: 'Hello World',
    ok: true,
    empty: null,
    list: ['x', 2, true, null, { $int: '9007199254740993' }],
    obj: { a: 1 },
    image: { $blobRef: { eventId: 'e', size: 3, checksum: 'c' } },
    astral: '\u{1F600}',
    high: '\uFFFD',
  },
};

const is = (text: string, s: Subject = subject) => matches(parseWhere(text), s);

describe('item attributes', () => {
  it('status, step, attempts, error type, lineage, id', () => {
    expect(is('status = failed')).toBe(true);
    expect(is('status != failed')).toBe(false);
    expect(is('status = completed')).toBe(false);
    expect(is('step = gen')).toBe(true);
    expect(is('step contains e')).toBe(true);
    expect(is('attempts = 3')).toBe(true);
    expect(is('attempts > 2 and attempts < 4 and attempts >= 3 and attempts <= 3')).toBe(true);
    expect(is('attempts != 3')).toBe(false);
    expect(is('error_type = RateLimitError')).toBe(true);
    expect(is('parent = doc-1 and root = doc-1')).toBe(true);
    expect(is('item_id = doc-7')).toBe(true);
    expect(is('item_id < doc-8 and item_id > doc-10')).toBe(true);
  });

  it('an absent step, error type or parent compares false, every operator; exists says so', () => {
    const bare: Subject = { itemId: 'r', status: 'in_progress', step: null, attempts: 1, errorType: null, rootItemId: 'r', parentItemId: null, tags: {}, fields: {} };
    for (const name of ['step', 'error_type', 'parent']) {
      for (const op of ['=', '!=', '<', '<=', '>', '>=', 'contains']) expect(is(`${name} ${op} x`, bare), `${name} ${op} x`).toBe(false);
      expect(is(`${name} exists`, bare)).toBe(false);
      expect(is(`not ${name} exists`, bare)).toBe(true);
      expect(is(`${name} exists`)).toBe(true);
    }
  });
});

describe('fields and tags', () => {
  it('numbers compare as numbers', () => {
    expect(is('score = 0.75')).toBe(true);
    expect(is('n = 10.0')).toBe(true);
    expect(is('n = 1e1')).toBe(true);
    expect(is('n > 9')).toBe(true);
    expect(is('n < 9')).toBe(false);
    expect(is('n >= 10 and n <= 10')).toBe(true);
    expect(is('n != 11')).toBe(true);
    // Numerically, not as text: "10" < "9" as text.
    expect(is('n > 9.5')).toBe(true);
    expect(is('tag.batch = 2')).toBe(true);
  });

  it('ints beyond 2^53 compare exactly', () => {
    expect(is('big > 9007199254740991')).toBe(true);
    expect(is('big = 9007199254740991')).toBe(false);
    expect(is('big != 9007199254740991')).toBe(true);
    expect(is('big > 1e16')).toBe(false);
    expect(is('big < 1e16')).toBe(true);
    expect(is('big > 9007199254740991.5')).toBe(true);
    expect(is('neg < -9007199254740991')).toBe(true);
    expect(is('neg > -1e16')).toBe(true);
    expect(is('neg < -9007199254740991.5')).toBe(true);
    expect(is('big > -0.5 and neg < 0.5')).toBe(true);
    // {$int} against a fraction next to it.
    expect(is('five < 5.5 and five > 4.5 and not five > 5.5 and five = 5 and five <= 5')).toBe(true);
    expect(is('minusFive < -4.5 and minusFive > -5.5 and not minusFive < -5.5')).toBe(true);
    expect(matches({ cmp: { left: 'field.big', op: '=', value: 9007199254740992 } }, subject)).toBe(false);
    expect(matches({ cmp: { left: 'field.big', op: '>', value: 9007199254740992 } }, subject)).toBe(true);
    expect(matches({ cmp: { left: 'field.big', op: '<', value: 9007199254740994 } }, subject)).toBe(true);
  });

  it('text compares by code point, case-sensitive', () => {
    expect(is('title = "Hello World"')).toBe(true);
    expect(is('title = "hello world"')).toBe(false);
    expect(is('title > Hello')).toBe(true);
    expect(is('title < Hi')).toBe(true);
    expect(is('title >= "Hello World" and title <= "Hello World"')).toBe(true);
    expect(is('title != x')).toBe(true);
    // U+1F600 sorts after U+FFFD by code point (UTF-16 units would say before).
    expect(is('astral > "\\uFFFD"')).toBe(true);
    expect(is('high < "\\ud83d\\ude00"')).toBe(true);
  });

  it('contains: a substring of text, case-sensitive; an element of a list', () => {
    expect(is('title contains "o W"')).toBe(true);
    expect(is('title contains world')).toBe(false);
    expect(is('title contains ""')).toBe(true);
    expect(is('list contains x')).toBe(true);
    expect(is('list contains 2')).toBe(true);
    expect(is('list contains 2.0')).toBe(true);
    expect(is('list contains "2"')).toBe(false);
    expect(is('list contains true')).toBe(true);
    expect(is('list contains null')).toBe(true);
    expect(is('list contains 9007199254740991')).toBe(false);
    expect(matches({ cmp: { left: 'field.list', op: 'contains', value: 9007199254740992 } }, subject)).toBe(false);
    expect(is('tag.flags contains b')).toBe(true);
    expect(is('tag.flags contains c')).toBe(false);
    // Not text, not a list.
    expect(is('n contains 1')).toBe(false);
    expect(is('obj contains a')).toBe(false);
  });

  it('booleans and null: equality only', () => {
    expect(is('ok = true')).toBe(true);
    expect(is('ok != false')).toBe(true);
    expect(is('ok = false')).toBe(false);
    expect(is('empty = null')).toBe(true);
    expect(is('empty != null')).toBe(false);
    expect(is('empty exists')).toBe(true);
    expect(is('score != null')).toBe(true);
    expect(is('tag.nothing = null')).toBe(true);
    expect(is('ok > "a"')).toBe(false);
  });

  it('another type than the value never matches, != included', () => {
    expect(is('title = 3')).toBe(false);
    expect(is('title != 3')).toBe(false);
    expect(is('n = "10"')).toBe(false);
    expect(is('n != "10"')).toBe(false);
    expect(is('n > a')).toBe(false);
    expect(is('ok = "true"')).toBe(false);
    expect(is('ok != 1')).toBe(false);
    expect(is('empty = 0')).toBe(false);
    expect(is('list = x')).toBe(false);
    expect(is('obj = 1')).toBe(false);
    expect(is('image = x')).toBe(false);
    expect(is('image exists')).toBe(true);
  });

  it('a missing field or tag compares false; not ... exists is true', () => {
    for (const op of ['=', '!=', '<', '<=', '>', '>=', 'contains']) {
      expect(is(`nope ${op} 1`), op).toBe(false);
      expect(is(`tag.nope ${op} 1`), op).toBe(false);
    }
    expect(is('nope exists')).toBe(false);
    expect(is('not nope exists')).toBe(true);
    expect(is('not tag.nope exists')).toBe(true);
    expect(is('not nope = 1')).toBe(true);
  });
});

describe('logic', () => {
  it('and, or, not, and empty lists', () => {
    expect(is('n = 10 and score = 0.75')).toBe(true);
    expect(is('n = 10 and score = 1')).toBe(false);
    expect(is('n = 1 or score = 0.75')).toBe(true);
    expect(is('n = 1 or score = 1')).toBe(false);
    expect(is('not (n = 1 or score = 1)')).toBe(true);
    expect(is('n = 1 or n = 10 and score = 1')).toBe(false);
    expect(is('(n = 1 or n = 10) and score = 0.75')).toBe(true);
    expect(matches({ and: [] }, subject)).toBe(true);
    expect(matches({ or: [] }, subject)).toBe(false);
  });

  it('undecided while the tags or fields it reads are not loaded: and/or still decide when they can', () => {
    const summary: Subject = { ...subject };
    delete summary.tags;
    delete summary.fields;
    const d = (text: string) => decide(parseWhere(text), summary);
    expect(d('score > 0.5')).toBeUndefined();
    expect(d('tag.model = gpt-4')).toBeUndefined();
    expect(d('not score exists')).toBeUndefined();
    expect(d('status = failed')).toBe(true);
    expect(d('status = completed and score > 0.5')).toBe(false);
    expect(d('score > 0.5 and status = completed')).toBe(false);
    expect(d('status = failed and score > 0.5')).toBeUndefined();
    expect(d('status = failed or score > 0.5')).toBe(true);
    expect(d('score > 0.5 or status = failed')).toBe(true);
    expect(d('status = completed or score > 0.5')).toBeUndefined();
    expect(d('not (status = completed and score > 0.5)')).toBe(true);
    // Fields loaded, tags not: a tag comparison stays undecided.
    expect(decide(parseWhere('score > 0.5 and tag.batch = 2'), { ...summary, fields: subject.fields! })).toBeUndefined();
    expect(decide(parseWhere('score > 0.9 and tag.batch = 2'), { ...summary, fields: subject.fields! })).toBe(false);
    expect(() => matches(parseWhere('score > 0.5'), summary)).toThrow(InternalError);
  });
});

describe('what a filter reads', () => {
  it('needsOf names each tag and field once', () => {
    expect(needsOf(parseWhere('status = failed and attempts > 1'))).toEqual({ tags: [], fields: [] });
    expect(needsOf(parseWhere('a = 1 or not (tag.m = x and a > 2 and field.b exists) or tag.m exists'))).toEqual({ tags: ['m'], fields: ['a', 'b'] });
  });

  it('subjectOfState: the cursor step, the latest failure, fold fields', () => {
    const state: ItemState = {
      itemId: 'i',
      rootItemId: 'r',
      parentItemId: null,
      status: 'in_progress',
      fields: { a: 1 },
      cursor: { stepName: 'gen', stepIndex: 1, stepInstanceId: null, iteration: null, attempt: 2, checkpointId: 'c' },
      lastSeq: 5,
      attempts: 2,
      failures: [
        { stepName: 'gen', attempt: 1, errorType: 'First', errorDump: null, traceback: null, seq: 2 },
        { stepName: 'gen', attempt: 1, errorType: 'Latest', errorDump: null, traceback: null, seq: 3 },
      ],
      violations: [],
    };
    const s = subjectOfState(state);
    expect(s).toEqual({ itemId: 'i', status: 'in_progress', step: 'gen', attempts: 2, errorType: 'Latest', rootItemId: 'r', parentItemId: null, fields: { a: 1 } });
    expect(is('error_type = Latest and step = gen and not parent exists and a = 1', s)).toBe(true);
    expect(subjectOfState({ ...state, cursor: null, failures: [] }, { m: 1 })).toMatchObject({ step: null, errorType: null, tags: { m: 1 } });
  });

  it('tagsOfRows merges tags in seq order: a later batch replaces a key, others stay', () => {
    const row = (seq: number, tags: unknown) => ({ item_id: 'i', item_seq: seq, query_tags_json: tags === null ? null : JSON.stringify(tags) }) as Pick<EventRow, 'item_id' | 'item_seq' | 'query_tags_json'>;
    const rows = [row(3, { m: 'new' }), row(1, { m: 'old', k: 1 }), row(2, null), row(4, { other: true })];
    expect(tagsOfRows(rows, ['m', 'k', 'absent'])).toEqual({ m: 'new', k: 1 });
    expect(() => tagsOfRows([row(1, [1])], ['m'])).toThrow(/not a JSON object/);
    expect(() => tagsOfRows([{ item_id: 'i', item_seq: 1, query_tags_json: '{' }], ['m'])).toThrow(/not valid JSON/);
  });
});

describe('compareText', () => {
  it('agrees with UTF-8 byte order on characters of every plane', () => {
    const words = ['', 'a', 'ab', 'b', 'Z', 'é', '\uE000', '\uFFFD', '\u{1F600}', '\u{1F601}', '\u{10FFFF}', 'a\u{1F600}', 'a\uFFFF', '日本'];
    for (const x of words) {
      for (const y of words) {
        const bytes = Math.sign(Buffer.compare(Buffer.from(x, 'utf8'), Buffer.from(y, 'utf8')));
        expect(Math.sign(compareText(x, y)), `${JSON.stringify(x)} vs ${JSON.stringify(y)}`).toBe(bytes);
      }
    }
  });
});
