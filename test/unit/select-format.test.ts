/**
 * formatWhere (lib/select/format.ts): the text it writes parses back to the same Where, for any
 * names and values (keywords, quotes, blanks, escapes, every plane of Unicode, big numbers).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatWhere } from '../../lib/select/format.ts';
import { parseWhere } from '../../lib/select/parse.ts';
import { comparisonProblem } from '../../lib/select/rules.ts';
import { ITEM_ATTRIBUTES, VALUE_OPS, type Attribute, type Comparison, type Literal, type Where } from '../../lib/select/where.ts';

const TRICKY = ['and', 'OR', 'not', 'contains', 'exists', 'true', 'null', 'status', 'tag.x', 'field.y', '3', '-1.5e3', 'a b', '"', "'", '\\', '(', ')', '=', '!', '<>', '😀', '\uFFFD', '\n\t\b\f\r', 'é'];
const text = fc.oneof(fc.constantFrom(...TRICKY), fc.string({ unit: 'grapheme', maxLength: 6 }), fc.string({ maxLength: 6 }));
const name = text.filter((s) => s !== '');
const attribute: fc.Arbitrary<Attribute> = fc.oneof(fc.constantFrom(...ITEM_ATTRIBUTES), name.map((n) => `field.${n}` as const), name.map((n) => `tag.${n}` as const));
const literal: fc.Arbitrary<Literal> = fc.oneof(text, fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.constantFrom(true, false, null, 2 ** 60, -(2 ** 53) - 2, -0));
const comparison: fc.Arbitrary<Comparison> = fc
  .tuple(attribute, fc.constantFrom(...VALUE_OPS, 'exists' as const), literal)
  .map(([left, op, value]): Comparison => (op === 'exists' ? { left, op } : { left, op, value }))
  .filter((c) => c.op === 'exists' || comparisonProblem(c.left, c.op, c.value) === null);

// Lists of two or more: the text has no form of its own for one- or zero-element lists.
const { where } = fc.letrec<{ where: Where }>((tie) => ({
  where: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    comparison.map((cmp) => ({ cmp })),
    tie('where').map((w) => ({ not: w })),
    fc.array(tie('where'), { minLength: 2, maxLength: 3 }).map((and) => ({ and })),
    fc.array(tie('where'), { minLength: 2, maxLength: 3 }).map((or) => ({ or })),
  ),
}));

describe('formatWhere', () => {
  it('parseWhere(formatWhere(w)) equals w', () => {
    fc.assert(
      fc.property(where, (w) => {
        expect(parseWhere(formatWhere(w))).toEqual(w);
      }),
      { numRuns: 500 },
    );
  });

  it('writes bare field names where they read back as fields, and quotes values', () => {
    expect(formatWhere(parseWhere("score > 0.5 and (tag.model = 'gpt' or not label exists)"))).toBe('score > 0.5 and (tag.model = "gpt" or not label exists)');
    expect(formatWhere({ cmp: { left: 'field.status', op: 'exists' } })).toBe('field.status exists');
    expect(formatWhere({ cmp: { left: 'field.a b', op: '=', value: 'x"y' } })).toBe('field."a b" = "x\\"y"');
    expect(formatWhere({ cmp: { left: 'field.x', op: '=', value: 2 ** 60 } })).toBe('x = 1.152921504606847e+18');
  });

  it('an empty and/or is written as a comparison always true / always false', () => {
    expect(formatWhere({ and: [] })).toBe('item_id exists');
    expect(formatWhere({ not: { or: [] } })).toBe('not not item_id exists');
  });
});
