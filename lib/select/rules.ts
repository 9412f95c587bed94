/**
 * What the text form and the object form of a filter both check: which names are attributes,
 * and comparisons that can never match because the attribute's type is known (`attempts =
 * abc`, `status = done`, `step < 3`). Comparisons of tags and fields, whose types only the
 * data knows, are checked when they run (a mismatch there is false).
 */
import { isWellFormed } from '../codec.ts';
import { ITEM_STATUSES } from '../types.ts';
import { shown } from './syntax-error.ts';
import { ITEM_ATTRIBUTES, type Attribute, type ItemAttribute, type Literal, type ValueOp } from './where.ts';

const TEXT_ATTRIBUTES: ReadonlySet<string> = new Set<ItemAttribute>(['item_id', 'step', 'error_type', 'parent', 'root']);

export function isItemAttribute(name: string): name is ItemAttribute {
  return (ITEM_ATTRIBUTES as readonly string[]).includes(name);
}

/** The attribute `name` names in the object form (`status`, `tag.NAME`, `field.NAME`), or null. */
export function attributeOf(name: string): Attribute | null {
  if (isItemAttribute(name)) return name;
  for (const prefix of ['tag.', 'field.'] as const) {
    if (name.startsWith(prefix) && name.length > prefix.length) return name as Attribute;
  }
  return null;
}

/**
 * Why a tag or field name cannot be looked up, or null. A lone UTF-16 surrogate reaches Lance's
 * filter as U+FFFD, so the base and the unmerged shards would be asked for different names; no
 * stored name holds one (lib/batch.ts), so nothing readable is refused.
 */
export function nameProblem(a: Attribute): string | null {
  return isWellFormed(a) ? null : `${JSON.stringify(a)} is not valid Unicode (it has a lone UTF-16 surrogate)`;
}

/** A literal as a message shows it. */
export function literalText(v: Literal): string {
  return typeof v === 'string' ? shown(v) : String(v);
}

const ORDERING: ReadonlySet<ValueOp> = new Set(['<', '<=', '>', '>=']);

/** Why `left op value` can never match (the message names the fix), or null when it may. */
export function comparisonProblem(left: Attribute, op: ValueOp, value: Literal): string | null {
  const got = literalText(value);
  if (left === 'attempts') {
    if (op === 'contains') return "attempts is a number: 'contains' applies to text and lists";
    if (typeof value !== 'number') return `attempts is a number: expected a number after '${op}', got ${got}`;
    return null;
  }
  if (left === 'status') {
    if (typeof value !== 'string') return `status is text: expected a status after '${op}', got ${got}`;
    if ((op === '=' || op === '!=') && !(ITEM_STATUSES as readonly string[]).includes(value)) {
      return `status is one of ${ITEM_STATUSES.join(', ')}; got ${got}`;
    }
    return null;
  }
  if (TEXT_ATTRIBUTES.has(left)) {
    if (typeof value === 'string') return null;
    const hint = typeof value === 'number' ? ` (quote it: '${value}')` : value === null ? ` (a missing ${left}: 'not ${left} exists')` : '';
    return `${left} is text: expected text after '${op}', got ${got}${hint}`;
  }
  // A tag or a field: any type, but order is only defined on numbers and text.
  if (ORDERING.has(op) && typeof value !== 'number' && typeof value !== 'string') return `'${op}' compares numbers or text, not ${got}`;
  return null;
}
