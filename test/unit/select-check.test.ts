/**
 * checkWhere (lib/select/check.ts): a Where built in code is checked before any read, and each
 * problem is INVALID_INPUT naming its path.
 */
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../lib/errors.ts';
import { checkWhere } from '../../lib/select/check.ts';
import { MAX_WHERE_DEPTH, type Where } from '../../lib/select/where.ts';

function problem(w: unknown): { field: string | undefined; message: string } {
  try {
    checkWhere(w);
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidInputError);
    const x = e as InvalidInputError;
    expect(x.code).toBe('INVALID_INPUT');
    return { field: x.field, message: x.message.slice(`${x.field}: `.length) };
  }
  throw new Error(`${JSON.stringify(w)} passed`);
}

describe('checkWhere', () => {
  it('accepts every form and returns it unchanged', () => {
    const w: Where = {
      or: [
        { and: [{ cmp: { left: 'status', op: '=', value: 'failed' } }, { not: { cmp: { left: 'field.score', op: 'exists' } } }] },
        { cmp: { left: 'tag.model', op: 'contains', value: 'gpt' } },
        { cmp: { left: 'attempts', op: '>=', value: 2 } },
        { cmp: { left: 'field.flag', op: '!=', value: null } },
        { cmp: { left: 'field.ok', op: '=', value: false } },
        { and: [] },
        { or: [] },
      ],
    };
    expect(checkWhere(w)).toBe(w);
  });

  it('names the path of a bad shape', () => {
    expect(problem(null)).toEqual({ field: 'where', message: 'must be an object with one of and, or, not, cmp' });
    expect(problem('status = failed')).toEqual({ field: 'where', message: 'must be a Where object, not text: parse text with parseWhere()' });
    expect(problem([])).toMatchObject({ field: 'where' });
    expect(problem({})).toEqual({ field: 'where', message: 'must have exactly one of and, or, not, cmp; got no key' });
    expect(problem({ and: [], or: [] })).toEqual({ field: 'where', message: 'must have exactly one of and, or, not, cmp; got "and", "or"' });
    expect(problem({ xor: [] })).toEqual({ field: 'where', message: 'must have exactly one of and, or, not, cmp; got "xor"' });
    expect(problem({ and: {} })).toEqual({ field: 'where.and', message: 'must be an array of Where objects' });
    expect(problem({ or: [{ not: 3 }] })).toMatchObject({ field: 'where.or[0].not' });
    expect(problem({ cmp: 'a = 1' })).toEqual({ field: 'where.cmp', message: 'must be an object {left, op, value}' });
    expect(problem({ cmp: { left: 'status', op: '=', value: 'failed', extra: 1 } })).toEqual({ field: 'where.cmp', message: 'unknown key "extra" (a comparison has left, op, value)' });
  });

  it('names a bad attribute, operator or value', () => {
    expect(problem({ cmp: { left: 'score', op: 'exists' } })).toEqual({ field: 'where.cmp.left', message: 'must be one of item_id, status, step, attempts, error_type, parent, root, tag.NAME or field.NAME; got "score"' });
    expect(problem({ cmp: { left: 'field.', op: 'exists' } })).toMatchObject({ field: 'where.cmp.left' });
    expect(problem({ cmp: { left: 3, op: 'exists' } })).toMatchObject({ field: 'where.cmp.left' });
    expect(problem({ cmp: { left: 'tag.\ud800', op: 'exists' } })).toEqual({ field: 'where.cmp.left', message: '"tag.\\ud800" is not valid Unicode (it has a lone UTF-16 surrogate)' });
    expect(problem({ cmp: { left: 'status', op: '==', value: 'failed' } })).toEqual({ field: 'where.cmp.op', message: 'must be one of =, !=, <, <=, >, >=, contains, exists; got "=="' });
    expect(problem({ cmp: { left: 'status', op: '=' } })).toEqual({ field: 'where.cmp.value', message: "is required with '='" });
    expect(problem({ cmp: { left: 'field.x', op: 'exists', value: 1 } })).toEqual({ field: 'where.cmp.value', message: "must be absent: 'exists' takes no value" });
    expect(problem({ cmp: { left: 'field.x', op: '=', value: [1] } })).toEqual({ field: 'where.cmp.value', message: 'must be text, a finite number, a boolean or null; got an array' });
    expect(problem({ cmp: { left: 'field.x', op: '=', value: NaN } })).toEqual({ field: 'where.cmp.value', message: 'must be text, a finite number, a boolean or null; got NaN' });
    expect(problem({ cmp: { left: 'field.x', op: '=', value: undefined } })).toMatchObject({ field: 'where.cmp.value' });
    expect(problem({ not: { cmp: { left: 'status', op: '=', value: 'done' } } })).toEqual({ field: 'where.not.cmp.value', message: "status is one of in_progress, failed, completed, filtered; got 'done'" });
    expect(problem({ and: [{ cmp: { left: 'attempts', op: 'contains', value: 1 } }] })).toEqual({ field: 'where.and[0].cmp.value', message: "attempts is a number: 'contains' applies to text and lists" });
    expect(problem({ cmp: { left: 'field.x', op: '<', value: false } })).toEqual({ field: 'where.cmp.value', message: "'<' compares numbers or text, not false" });
  });

  it('bounds nesting (a cycle too)', () => {
    let deep: Where = { cmp: { left: 'status', op: 'exists' } };
    for (let i = 0; i < MAX_WHERE_DEPTH; i++) deep = { not: deep };
    expect(checkWhere(deep)).toBe(deep);
    expect(problem({ not: deep }).message).toBe(`nesting deeper than ${MAX_WHERE_DEPTH} levels`);
    const cyc: { and: unknown[] } = { and: [] };
    cyc.and.push(cyc);
    expect(problem(cyc).message).toBe(`nesting deeper than ${MAX_WHERE_DEPTH} levels`);
  });

  it('a field path names where the filter sits', () => {
    expect(() => checkWhere({ cmp: { left: 'status', op: '=', value: 1 } }, 'options.where')).toThrow('options.where.cmp.value: status is text');
  });
});
