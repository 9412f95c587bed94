/**
 * `checkWhere(w)`: a `Where` built in code (or arrived as JSON) checked before any read: its
 * shape, its attributes and operators, and the comparisons lib/select/rules.ts knows can never
 * match. Errors are INVALID_INPUT naming the path (`where.and[1].cmp.value`).
 */
import { isPlainObject } from '../codec.ts';
import { InvalidInputError } from '../errors.ts';
import { attributeOf, comparisonProblem, nameProblem } from './rules.ts';
import { ITEM_ATTRIBUTES, MAX_WHERE_DEPTH, VALUE_OPS, type ValueOp, type Where } from './where.ts';

const KINDS = ['and', 'or', 'not', 'cmp'] as const;

/** `w` if it is a valid Where; throws InvalidInputError (field: the path of the problem) otherwise. */
export function checkWhere(w: unknown, field = 'where'): Where {
  node(w, field, 0);
  return w as Where;
}

function fail(field: string, message: string): never {
  throw new InvalidInputError(message, { field });
}

function node(w: unknown, at: string, depth: number): void {
  if (depth > MAX_WHERE_DEPTH) fail(at, `nesting deeper than ${MAX_WHERE_DEPTH} levels`);
  if (typeof w === 'string') fail(at, 'must be a Where object, not text: parse text with parseWhere()');
  if (!isPlainObject(w)) fail(at, `must be an object with one of ${KINDS.join(', ')}`);
  const keys = Object.keys(w);
  if (keys.length !== 1 || !(KINDS as readonly string[]).includes(keys[0]!)) {
    fail(at, `must have exactly one of ${KINDS.join(', ')}; got ${keys.length === 0 ? 'no key' : keys.map((k) => JSON.stringify(k)).join(', ')}`);
  }
  const kind = keys[0] as (typeof KINDS)[number];
  const inner = w[kind];
  if (kind === 'and' || kind === 'or') {
    if (!Array.isArray(inner)) fail(`${at}.${kind}`, 'must be an array of Where objects');
    inner.forEach((x, i) => node(x, `${at}.${kind}[${i}]`, depth + 1));
  } else if (kind === 'not') {
    node(inner, `${at}.not`, depth + 1);
  } else {
    comparison(inner, `${at}.cmp`);
  }
}

function comparison(c: unknown, at: string): void {
  if (!isPlainObject(c)) fail(at, 'must be an object {left, op, value}');
  for (const k of Object.keys(c)) if (k !== 'left' && k !== 'op' && k !== 'value') fail(at, `unknown key ${JSON.stringify(k)} (a comparison has left, op, value)`);
  const left = typeof c.left === 'string' ? attributeOf(c.left) : null;
  if (left === null) fail(`${at}.left`, `must be one of ${ITEM_ATTRIBUTES.join(', ')}, tag.NAME or field.NAME; got ${JSON.stringify(c.left)}`);
  const bad = nameProblem(left);
  if (bad !== null) fail(`${at}.left`, bad);
  if (c.op === 'exists') {
    if (Object.hasOwn(c, 'value')) fail(`${at}.value`, "must be absent: 'exists' takes no value");
    return;
  }
  if (!(VALUE_OPS as readonly unknown[]).includes(c.op)) fail(`${at}.op`, `must be one of ${[...VALUE_OPS, 'exists'].join(', ')}; got ${JSON.stringify(c.op)}`);
  if (!Object.hasOwn(c, 'value')) fail(`${at}.value`, `is required with '${String(c.op)}'`);
  const v = c.value;
  const ok = v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
  if (!ok) fail(`${at}.value`, `must be text, a finite number, a boolean or null; got ${typeof v === 'number' ? String(v) : Array.isArray(v) ? 'an array' : typeof v}`);
  const problem = comparisonProblem(left, c.op as ValueOp, v);
  if (problem !== null) fail(`${at}.value`, problem);
}
