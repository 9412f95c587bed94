/**
 * A `Where` as filter text that parses back to it (`parseWhere(formatWhere(w))` equals `w`, but
 * for an empty `and`/`or`, which the text cannot say and is written as a comparison always true
 * or always false). The report prints it, and messages use it.
 */
import { LITERAL_WORDS, NAME_KEYWORDS, NUMBER } from './parse.ts';
import { isItemAttribute } from './rules.ts';
import { isWord } from './tokens.ts';
import type { Attribute, Literal, Where } from './where.ts';

export function formatWhere(w: Where): string {
  return part(w, null);
}

type Parent = 'and' | 'or' | 'not' | null;

function part(w: Where, parent: Parent): string {
  if ('cmp' in w) {
    const c = w.cmp;
    return c.op === 'exists' ? `${attributeText(c.left)} exists` : `${attributeText(c.left)} ${c.op} ${literalSource(c.value)}`;
  }
  if ('not' in w) return `not ${part(w.not, 'not')}`;
  const kind = 'and' in w ? 'and' : 'or';
  const parts = 'and' in w ? w.and : w.or;
  // Every item has an id: `item_id exists` is always true.
  if (parts.length === 0) return kind === 'and' ? 'item_id exists' : 'not item_id exists';
  const text = parts.map((p) => part(p, kind)).join(` ${kind} `);
  // Parentheses where the text would otherwise group differently: `or` binds loosest, and a
  // nested list of the same kind keeps its own level.
  const bare = parts.length === 1 || parent === null || (kind === 'and' && parent === 'or');
  return bare ? text : `(${text})`;
}

function attributeText(a: Attribute): string {
  if (isItemAttribute(a)) return a;
  const dot = a.indexOf('.');
  const kind = a.slice(0, dot);
  const name = a.slice(dot + 1);
  if (!isWord(name)) return `${kind}.${JSON.stringify(name)}`;
  // A bare word reads as a field unless it means something else.
  const plain = kind === 'field' && !isItemAttribute(name) && !NAME_KEYWORDS.has(name.toLowerCase()) && !LITERAL_WORDS.has(name) && !NUMBER.test(name) && !name.startsWith('tag.') && !name.startsWith('field.');
  return plain ? name : `${kind}.${name}`;
}

/** A literal as the text form writes it: strings quoted, unsafe integers in exponent form. */
export function literalSource(v: Literal): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v)) return v.toExponential();
  if (Object.is(v, -0)) return '-0';
  return String(v);
}
