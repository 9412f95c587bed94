/**
 * Whether an item matches a filter. Three-valued: `decide` answers undefined when the answer
 * depends on tags or fields the subject was built without, so a listing decides most items from
 * their summary alone and loads tags and fields only for the rest (lib/log/read/selected.ts).
 *
 * Rules (docs/usage.md, "Selecting items"):
 *  - a comparison of something the item does not have is false, whatever the operator (so
 *    `not x exists` is how to ask for a missing one);
 *  - numbers compare as numbers (exact for fold's `{$int}` beyond 2^53), text by Unicode code
 *    point (the UTF-8 byte order items are listed in), booleans and null only for (in)equality;
 *  - a value of another type than the literal never matches, `!=` included (`x != 3` is false
 *    when x is text); `!= null` matches any value that is not null;
 *  - `contains`: a substring of text (case-sensitive), or an element of a list (equal as `=`).
 */
import { InternalError } from '../errors.ts';
import type { OutputValue } from '../types.ts';
import type { Subject } from './subject.ts';
import type { Attribute, Literal, ValueOp, Where } from './where.ts';

const MISSING: unique symbol = Symbol('missing');
const UNKNOWN: unique symbol = Symbol('unknown');
type Found = OutputValue | typeof MISSING | typeof UNKNOWN;

/** true / false, or undefined when it depends on tags or fields `s` was built without. */
export function decide(w: Where, s: Subject): boolean | undefined {
  if ('cmp' in w) {
    const v = lookup(s, w.cmp.left);
    if (v === UNKNOWN) return undefined;
    if (v === MISSING) return false;
    return w.cmp.op === 'exists' || compare(v, w.cmp.op, w.cmp.value);
  }
  if ('not' in w) {
    const d = decide(w.not, s);
    return d === undefined ? undefined : !d;
  }
  // `and` stops at a false, `or` at a true; an undecided part leaves the rest undecided.
  const all = 'and' in w;
  let open = false;
  for (const p of all ? w.and : w.or) {
    const d = decide(p, s);
    if (d === undefined) open = true;
    else if (d !== all) return d;
  }
  return open ? undefined : all;
}

/** Whether `s` (with the tags and fields `w` names loaded) matches `w`. */
export function matches(w: Where, s: Subject): boolean {
  const d = decide(w, s);
  if (d === undefined) throw new InternalError(`item ${JSON.stringify(s.itemId)} was judged without the tags or fields its filter names`);
  return d;
}

function lookup(s: Subject, a: Attribute): Found {
  switch (a) {
    case 'item_id':
      return s.itemId;
    case 'status':
      return s.status;
    case 'step':
      return s.step ?? MISSING;
    case 'attempts':
      return s.attempts;
    case 'error_type':
      return s.errorType ?? MISSING;
    case 'parent':
      return s.parentItemId ?? MISSING;
    case 'root':
      return s.rootItemId ?? MISSING;
  }
  const tag = a.startsWith('tag.');
  const from = tag ? s.tags : s.fields;
  if (from === undefined) return UNKNOWN;
  const name = a.slice(tag ? 4 : 6);
  return Object.hasOwn(from, name) ? from[name]! : MISSING;
}

function compare(v: OutputValue, op: ValueOp, lit: Literal): boolean {
  switch (op) {
    case '=':
      return equal(v, lit) === true;
    case '!=':
      return equal(v, lit) === false;
    case 'contains':
      if (typeof v === 'string') return typeof lit === 'string' && v.includes(lit);
      if (Array.isArray(v)) return v.some((e) => equal(e, lit) === true);
      return false;
    default: {
      const c = order(v, lit);
      if (c === null) return false;
      return op === '<' ? c < 0 : op === '<=' ? c <= 0 : op === '>' ? c > 0 : c >= 0;
    }
  }
}

/** Whether `v` equals `lit`; null when their types differ. */
function equal(v: OutputValue, lit: Literal): boolean | null {
  if (lit === null) return v === null;
  if (typeof lit === 'boolean') return typeof v === 'boolean' ? v === lit : null;
  if (typeof lit === 'string') return typeof v === 'string' ? v === lit : null;
  const n = numeric(v);
  return n === null ? null : compareNumbers(n, lit) === 0;
}

/** The sign of `v` - `lit`; null when they have no order (other types, booleans, null). */
function order(v: OutputValue, lit: Literal): number | null {
  if (typeof lit === 'string') return typeof v === 'string' ? compareText(v, lit) : null;
  if (typeof lit !== 'number') return null;
  const n = numeric(v);
  return n === null ? null : compareNumbers(n, lit);
}

/** A number, or fold's `{$int: "..."}` (an integer beyond ±(2^53-1)) exactly; else null. */
function numeric(v: OutputValue): number | bigint | null {
  if (typeof v === 'number') return v;
  if (v !== null && typeof v === 'object' && !Array.isArray(v) && '$int' in v && typeof v.$int === 'string' && /^-?\d+$/.test(v.$int)) return BigInt(v.$int);
  return null;
}

function compareNumbers(a: number | bigint, b: number): number {
  if (typeof a === 'number') return a < b ? -1 : a > b ? 1 : 0;
  if (Number.isInteger(b)) {
    const bb = BigInt(b);
    return a < bb ? -1 : a > bb ? 1 : 0;
  }
  // b has a fraction: a (an integer) is below it exactly when it is at most its floor.
  return a <= BigInt(Math.floor(b)) ? -1 : 1;
}

/** Code point order (= UTF-8 byte order); JavaScript's `<` compares UTF-16 units, which differs past U+FFFF. */
export function compareText(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    if (x < 0xd800 && y < 0xd800) return x - y;
    // From the whole character on (a pair differing in its low half shares the high one).
    const from = i > 0 && x >= 0xdc00 && x < 0xe000 ? i - 1 : i;
    return a.codePointAt(from)! - b.codePointAt(from)!;
  }
  return a.length - b.length;
}
