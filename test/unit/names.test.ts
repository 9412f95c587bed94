import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../lib/errors.ts';
import { validateName } from '../../lib/names.ts';

function rejection(kind: 'pipeline' | 'experiment', v: unknown): InvalidInputError {
  try {
    validateName(kind, v);
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidInputError);
    return e as InvalidInputError;
  }
  throw new Error(`expected ${JSON.stringify(v)} to be rejected`);
}

describe('validateName', () => {
  it('accepts 1-128 chars of [A-Za-z0-9._-] and returns the name', () => {
    for (const v of ['a', 'Z', '0', 'my-pipeline_v2.1', '...', '.hidden', 'a..b', '-', 'x'.repeat(128)]) {
      expect(validateName('pipeline', v)).toBe(v);
      expect(validateName('experiment', v)).toBe(v);
    }
  });

  it('rejects "." and "..", empty, too long, and other characters', () => {
    for (const v of ['.', '..', '', 'x'.repeat(129), 'a/b', 'a\\b', 'a b', 'é', 'a\n', 'a:b', '*', 'a%2f']) {
      expect(() => validateName('pipeline', v)).toThrow(InvalidInputError);
    }
  });

  it('rejects non-strings', () => {
    for (const v of [undefined, null, 5, true, ['a'], { a: 1 }]) expect(() => validateName('experiment', v)).toThrow(InvalidInputError);
  });

  it('names the kind (as the field) and the offending value', () => {
    const e = rejection('experiment', 'bad/name');
    expect(e.field).toBe('experiment');
    expect(e.message).toContain('experiment');
    expect(e.message).toContain('"bad/name"');
    const p = rejection('pipeline', '..');
    expect(p.field).toBe('pipeline');
    expect(p.message).toContain('pipeline');
    expect(p.message).toContain('".."');
  });

  it('agrees with the rule on arbitrary strings', () => {
    const rule = (s: string) => /^[A-Za-z0-9._-]{1,128}$/.test(s) && s !== '.' && s !== '..';
    const allowed = fc.constantFrom(...'abcXYZ019._-'.split(''));
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 140 }), fc.string({ unit: allowed, maxLength: 140 })), (s) => {
        let ok = true;
        try {
          expect(validateName('pipeline', s)).toBe(s);
        } catch (e) {
          expect(e).toBeInstanceOf(InvalidInputError);
          ok = false;
        }
        expect(ok).toBe(rule(s));
      }),
    );
  });
});
