/**
 * parseWhere (lib/select/parse.ts, tokens.ts): the grammar of `--where`. Precedence, quoting and
 * escapes, every operator and name form, the values, and every error with its column.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../lib/errors.ts';
import { checkWhere } from '../../lib/select/check.ts';
import { parseWhere } from '../../lib/select/parse.ts';
import { WhereSyntaxError } from '../../lib/select/syntax-error.ts';
import type { Attribute, Literal, ValueOp, Where } from '../../lib/select/where.ts';
import { MAX_WHERE_DEPTH } from '../../lib/select/where.ts';

const cmp = (left: Attribute, op: ValueOp, value: Literal): Where => ({ cmp: { left, op, value } });
const exists = (left: Attribute): Where => ({ cmp: { left, op: 'exists' } });
const a = cmp('field.a', '=', 1);
const b = cmp('field.b', '=', 2);
const c = cmp('field.c', '=', 3);

/** The error of `text`: its column and message (without the `where: column N: ` prefix). */
function error(text: string, source?: string): { column: number; message: string; field: string | undefined } {
  try {
    parseWhere(text, source);
  } catch (e) {
    expect(e).toBeInstanceOf(WhereSyntaxError);
    expect(e).toBeInstanceOf(InvalidInputError);
    const w = e as WhereSyntaxError;
    expect(w.code).toBe('INVALID_INPUT');
    const prefix = `${source ?? 'where'}: column ${w.column}: `;
    expect(w.message.startsWith(prefix), w.message).toBe(true);
    return { column: w.column, message: w.message.slice(prefix.length), field: w.field };
  }
  throw new Error(`${JSON.stringify(text)} parsed`);
}

describe('precedence: not > and > or, parentheses first', () => {
  it('and binds tighter than or, on either side', () => {
    expect(parseWhere('a = 1 or b = 2 and c = 3')).toEqual({ or: [a, { and: [b, c] }] });
    expect(parseWhere('a = 1 and b = 2 or c = 3')).toEqual({ or: [{ and: [a, b] }, c] });
  });

  it('not binds tighter than and', () => {
    expect(parseWhere('not a = 1 and b = 2')).toEqual({ and: [{ not: a }, b] });
    expect(parseWhere('a = 1 or not b = 2')).toEqual({ or: [a, { not: b }] });
    expect(parseWhere('not not a = 1')).toEqual({ not: { not: a } });
  });

  it('parentheses group, and chains of one operator are one list', () => {
    expect(parseWhere('(a = 1 or b = 2) and c = 3')).toEqual({ and: [{ or: [a, b] }, c] });
    expect(parseWhere('not (a = 1 or b = 2)')).toEqual({ not: { or: [a, b] } });
    expect(parseWhere('a = 1 and b = 2 and c = 3')).toEqual({ and: [a, b, c] });
    expect(parseWhere('a = 1 or b = 2 or c = 3')).toEqual({ or: [a, b, c] });
    expect(parseWhere('((a = 1))')).toEqual(a);
    expect(parseWhere('a = 1 and (b = 2 and c = 3)')).toEqual({ and: [a, { and: [b, c] }] });
  });

  it('keywords in any case; no blanks needed around signs and parentheses', () => {
    expect(parseWhere('a = 1 AND NOT b = 2 Or c = 3')).toEqual({ or: [{ and: [a, { not: b }] }, c] });
    expect(parseWhere('(a=1)or(b=2)')).toEqual({ or: [a, b] });
    expect(parseWhere('x CONTAINS y')).toEqual(cmp('field.x', 'contains', 'y'));
    expect(parseWhere('x Exists')).toEqual(exists('field.x'));
    expect(parseWhere('\t a = 1 \n')).toEqual(a);
  });
});

describe('comparisons', () => {
  it('every operator', () => {
    for (const op of ['=', '!=', '<', '<=', '>', '>='] as const) expect(parseWhere(`score ${op} 3`)).toEqual(cmp('field.score', op, 3));
    expect(parseWhere('score<=3')).toEqual(cmp('field.score', '<=', 3));
    expect(parseWhere('score!=3')).toEqual(cmp('field.score', '!=', 3));
    expect(parseWhere('tags contains red')).toEqual(cmp('field.tags', 'contains', 'red'));
    expect(parseWhere('score exists')).toEqual(exists('field.score'));
    expect(parseWhere('not score exists')).toEqual({ not: exists('field.score') });
  });

  it('item attributes, tags, fields: bare, field.NAME, quoted names', () => {
    expect(parseWhere('status = failed')).toEqual(cmp('status', '=', 'failed'));
    expect(parseWhere('step = gen')).toEqual(cmp('step', '=', 'gen'));
    expect(parseWhere('attempts > 2')).toEqual(cmp('attempts', '>', 2));
    expect(parseWhere('error_type = RateLimitError')).toEqual(cmp('error_type', '=', 'RateLimitError'));
    expect(parseWhere('parent = doc-1')).toEqual(cmp('parent', '=', 'doc-1'));
    expect(parseWhere('root = doc-1')).toEqual(cmp('root', '=', 'doc-1'));
    expect(parseWhere('item_id >= doc-5')).toEqual(cmp('item_id', '>=', 'doc-5'));
    expect(parseWhere('tag.model = gpt')).toEqual(cmp('tag.model', '=', 'gpt'));
    expect(parseWhere('tag.a.b = 1')).toEqual(cmp('tag.a.b', '=', 1));
    // A field named like a keyword or an attribute: field.NAME.
    expect(parseWhere('field.status = x')).toEqual(cmp('field.status', '=', 'x'));
    expect(parseWhere('field.and exists')).toEqual(exists('field.and'));
    expect(parseWhere('field.3 = 1')).toEqual(cmp('field.3', '=', 1));
    expect(parseWhere('field."my field" = 1')).toEqual(cmp('field.my field', '=', 1));
    expect(parseWhere("tag.'a b' exists")).toEqual(exists('tag.a b'));
    // Attribute names are lower case: another case is a field.
    expect(parseWhere('Status = x')).toEqual(cmp('field.Status', '=', 'x'));
    expect(parseWhere('résumé-score > 1')).toEqual(cmp('field.résumé-score', '>', 1));
  });

  it('values: numbers are numbers, true/false/null literals, everything else text', () => {
    const v = (text: string) => (parseWhere(`x = ${text}`) as { cmp: { value: Literal } }).cmp.value;
    expect(v('3')).toBe(3);
    expect(v('-3')).toBe(-3);
    expect(v('+3')).toBe(3);
    expect(v('0.5')).toBe(0.5);
    expect(v('.5')).toBe(0.5);
    expect(v('5.')).toBe(5);
    expect(v('1e3')).toBe(1000);
    expect(v('-2.5E-2')).toBe(-0.025);
    expect(v('9007199254740991')).toBe(9007199254740991);
    expect(v('true')).toBe(true);
    expect(v('false')).toBe(false);
    expect(v('null')).toBe(null);
    expect(v('True')).toBe('True');
    expect(v('2024-01-02')).toBe('2024-01-02');
    expect(v('3abc')).toBe('3abc');
    expect(v('0x10')).toBe('0x10');
    expect(v('Infinity')).toBe('Infinity');
    expect(v('a.b/c:d@e')).toBe('a.b/c:d@e');
    expect(v('"3"')).toBe('3');
    expect(v("'true'")).toBe('true');
    expect(v('""')).toBe('');
    expect(v('日本')).toBe('日本');
  });
});

describe('quoting and escapes', () => {
  const s = (text: string) => (parseWhere(`x = ${text}`) as { cmp: { value: Literal } }).cmp.value;

  it('either quote; the other quote and blanks, signs and keywords inside are plain text', () => {
    expect(s(`'it"s'`)).toBe('it"s');
    expect(s(`"it's"`)).toBe("it's");
    expect(s(`"a and b or (c = d)"`)).toBe('a and b or (c = d)');
  });

  it('every escape', () => {
    expect(s(String.raw`"a\"b"`)).toBe('a"b');
    expect(s(String.raw`'a\'b'`)).toBe("a'b");
    expect(s(String.raw`"a\\b"`)).toBe('a\\b');
    expect(s(String.raw`"\n\r\t\b\f"`)).toBe('\n\r\t\b\f');
    expect(s(String.raw`"\u00e9\u65E5"`)).toBe('é日');
    expect(s(String.raw`"\ud83d\ude00"`)).toBe('😀');
  });
});

describe('errors name the column and what was expected', () => {
  it('the CLI names its option; the library says where', () => {
    expect(error('attempts < ', '--where')).toEqual({ column: 12, message: "expected a value after '<'", field: '--where' });
    expect(error('attempts <').field).toBe('where');
  });

  it('a missing or wrong value', () => {
    expect(error('a =')).toMatchObject({ column: 4, message: "expected a value after '='" });
    expect(error('a = and b = 1')).toMatchObject({ column: 5, message: "expected a value after '=', got 'and' (quote it to compare with the word: 'and')" });
    expect(error('a contains )')).toMatchObject({ column: 12, message: "expected a value after 'contains', got ')'" });
    expect(error('a = (1)')).toMatchObject({ column: 5 });
    expect(error('a = = 1')).toMatchObject({ column: 5, message: "expected a value after '=', got '='" });
  });

  it('a missing or wrong name', () => {
    expect(error('')).toMatchObject({ column: 1, message: "expected a comparison, 'not' or '(' (the filter is empty)" });
    expect(error('   ')).toMatchObject({ column: 4 });
    expect(error('= 3')).toMatchObject({ column: 1, message: "expected a comparison, 'not' or '(', got '='" });
    expect(error('a = 1 and')).toMatchObject({ column: 10, message: "expected a comparison, 'not' or '('" });
    expect(error('a = 1 and or b = 1')).toMatchObject({ column: 11, message: "expected a comparison, 'not' or '(', got 'or'" });
    expect(error('not')).toMatchObject({ column: 4 });
    expect(error('3 = 3')).toMatchObject({ column: 1, message: "expected a comparison, 'not' or '(', got '3' (a field named so is field.3)" });
    expect(error('true = 1')).toMatchObject({ column: 1 });
    expect(error('"a b" = 1')).toMatchObject({ column: 1, message: `expected a comparison, 'not' or '(', got '"a b"' (a quoted name needs its kind: field."a b" or tag."a b")` });
    expect(error('tag. = 1')).toMatchObject({ column: 6, message: "expected a tag name right after 'tag.', got '='" });
    expect(error('field. "x" = 1')).toMatchObject({ column: 8, message: `expected a field name right after 'field.', got '"x"'` });
    expect(error('field."" = 1')).toMatchObject({ column: 7 });
    expect(error(String.raw`field."\ud800" = 1`)).toMatchObject({ column: 1, message: '"field.\\ud800" is not valid Unicode (it has a lone UTF-16 surrogate)' });
  });

  it('a missing or wrong operator', () => {
    expect(error('score')).toMatchObject({ column: 6, message: "expected '=', '!=', '<', '<=', '>', '>=', 'contains' or 'exists' after 'score'" });
    expect(error('score 3')).toMatchObject({ column: 7, message: "expected '=', '!=', '<', '<=', '>', '>=', 'contains' or 'exists' after 'score', got '3'" });
    expect(error('field."a b" is 3')).toMatchObject({ column: 13, message: `expected '=', '!=', '<', '<=', '>', '>=', 'contains' or 'exists' after 'field."a b"', got 'is'` });
    expect(error('score ! 3')).toMatchObject({ column: 7, message: "unexpected '!': negate with 'not', compare with '!='" });
    expect(error('score == 3')).toMatchObject({ column: 8, message: "expected a value after '=', got '='" });
  });

  it('what follows a whole expression, and parentheses', () => {
    expect(error('a = 1 b = 2')).toMatchObject({ column: 7, message: "expected 'and', 'or' or the end, got 'b'" });
    expect(error('a = 1)')).toMatchObject({ column: 6, message: "expected 'and', 'or' or the end, got ')'" });
    expect(error('(a = 1')).toMatchObject({ column: 7, message: "expected ')' to close the '(' at column 1" });
    expect(error('x = 1 and ((a = 1) or b = 2')).toMatchObject({ column: 28, message: "expected ')' to close the '(' at column 11" });
    expect(error('()')).toMatchObject({ column: 2, message: "expected a comparison, 'not' or '(', got ')'" });
  });

  it('strings and escapes', () => {
    expect(error('a = "abc')).toMatchObject({ column: 5, message: 'unterminated string: the " here is never closed' });
    expect(error("a = 'abc\\'")).toMatchObject({ column: 5, message: "unterminated string: the ' here is never closed" });
    expect(error('a = "ab\\')).toMatchObject({ column: 5 });
    expect(error('a = "x\\qy"')).toMatchObject({ column: 7, message: `unknown escape '\\q' (escapes: \\\\ \\' \\" \\n \\r \\t \\b \\f \\uXXXX)` });
    expect(error('a = "\\u12G4"')).toMatchObject({ column: 6, message: "expected 4 hex digits after \\u, got '12G4'" });
    expect(error('a = "\\u12"')).toMatchObject({ column: 6 });
  });

  it('columns count characters, not UTF-16 units', () => {
    expect(error('😀 = "x')).toMatchObject({ column: 5 });
    expect(error('"😀😀" = 1 x')).toMatchObject({ column: 1 });
    expect(error('a = "😀😀" x')).toMatchObject({ column: 10, message: "expected 'and', 'or' or the end, got 'x'" });
  });

  it('numbers out of range', () => {
    expect(error('a = 9007199254740992')).toMatchObject({ column: 5, message: "integer '9007199254740992' is beyond ±(2^53-1), where numbers stop being exact (quote it to compare as text)" });
    expect(error('a = -9007199254740992')).toMatchObject({ column: 5 });
    expect(error('a = 1e999')).toMatchObject({ column: 5, message: "number '1e999' is out of range" });
  });

  it('comparisons that can never match, at the value', () => {
    expect(error('attempts = abc')).toMatchObject({ column: 12, message: "attempts is a number: expected a number after '=', got 'abc'" });
    expect(error('attempts > "2"')).toMatchObject({ column: 12, message: `attempts is a number: expected a number after '>', got '2'` });
    expect(error('attempts contains 2')).toMatchObject({ column: 19, message: "attempts is a number: 'contains' applies to text and lists" });
    expect(error('status = done')).toMatchObject({ column: 10, message: "status is one of in_progress, failed, completed, filtered; got 'done'" });
    expect(error('status != 1')).toMatchObject({ column: 11, message: "status is text: expected a status after '!=', got 1" });
    expect(error('step = 3')).toMatchObject({ column: 8, message: "step is text: expected text after '=', got 3 (quote it: '3')" });
    expect(error('parent = null')).toMatchObject({ column: 10, message: "parent is text: expected text after '=', got null (a missing parent: 'not parent exists')" });
    expect(error('error_type = true')).toMatchObject({ column: 14 });
    expect(error('score < true')).toMatchObject({ column: 9, message: "'<' compares numbers or text, not true" });
    expect(error('tag.x >= null')).toMatchObject({ column: 10, message: "'>=' compares numbers or text, not null" });
  });

  it('the same expression with the type fixed parses', () => {
    expect(parseWhere('step = "3"')).toEqual(cmp('step', '=', '3'));
    expect(parseWhere('status < f')).toEqual(cmp('status', '<', 'f'));
    expect(parseWhere('score = true')).toEqual(cmp('field.score', '=', true));
    expect(parseWhere('x contains null')).toEqual(cmp('field.x', 'contains', null));
  });

  it('nesting is bounded: deeper is an error, not a stack overflow', () => {
    const deep = (n: number) => `${'('.repeat(n)}a = 1${')'.repeat(n)}`;
    expect(parseWhere(deep(MAX_WHERE_DEPTH))).toEqual(a);
    expect(error(deep(MAX_WHERE_DEPTH + 1))).toMatchObject({ column: MAX_WHERE_DEPTH + 1, message: `nesting deeper than ${MAX_WHERE_DEPTH} levels` });
    expect(error(`${'not '.repeat(MAX_WHERE_DEPTH + 1)}a = 1`)).toMatchObject({ column: 4 * MAX_WHERE_DEPTH + 1 });
    expect(error('('.repeat(100_000)).column).toBe(MAX_WHERE_DEPTH + 1);
  });

  it('text is required', () => {
    expect(error(3 as unknown as string)).toMatchObject({ column: 1, message: 'expected the filter as text, got number' });
  });
});

describe('any text', () => {
  it('parses to a Where that checkWhere accepts, or fails with a WhereSyntaxError inside the text', () => {
    const piece = fc.constantFrom('a', 'status', 'tag.m', 'field.', '"x"', "'y", '\\', '=', '!=', '<', '>=', '!', 'and', 'or', 'not', 'contains', 'exists', '(', ')', ' ', '3', '-1e2', 'true', 'null', 'failed', '😀');
    fc.assert(
      fc.property(fc.oneof(fc.array(piece, { maxLength: 12 }).map((p) => p.join('')), fc.string({ unit: 'binary', maxLength: 30 })), (text) => {
        let w: Where;
        try {
          w = parseWhere(text);
        } catch (e) {
          expect(e).toBeInstanceOf(WhereSyntaxError);
          const col = (e as WhereSyntaxError).column;
          expect(col).toBeGreaterThanOrEqual(1);
          expect(col).toBeLessThanOrEqual(Array.from(text).length + 1);
          return;
        }
        expect(checkWhere(w)).toBe(w);
      }),
      { numRuns: 2000 },
    );
  });
});
