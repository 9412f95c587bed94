/**
 * The filter over folded items (`Where`) that `items`, `failures`, `export` and `report` accept:
 * its shape only. Text becomes a `Where` by `parseWhere` (lib/select/parse.ts); a `Where` built in
 * code is checked by `checkWhere` (lib/select/check.ts); `decide` (lib/select/evaluate.ts) says
 * whether an item matches. Imports nothing, so lib/types.ts can name it.
 */

/** What an item exposes besides its tags and fields (docs/usage.md, "Selecting items"). */
export const ITEM_ATTRIBUTES = ['item_id', 'status', 'step', 'attempts', 'error_type', 'parent', 'root'] as const;
export type ItemAttribute = (typeof ITEM_ATTRIBUTES)[number];

/**
 * What a comparison reads: an item attribute, `tag.NAME` (the item's merged query tag NAME) or
 * `field.NAME` (the item's field NAME, as fold shows it). The text form accepts a bare field name
 * too; the object form always says `field.`.
 */
export type Attribute = ItemAttribute | `tag.${string}` | `field.${string}`;

/** Operators taking a value; `exists` takes none. */
export const VALUE_OPS = ['=', '!=', '<', '<=', '>', '>=', 'contains'] as const;
export type ValueOp = (typeof VALUE_OPS)[number];
export type CompareOp = ValueOp | 'exists';

/** A value a comparison compares with: text, a number, a boolean, or null. */
export type Literal = string | number | boolean | null;

export type Comparison = { left: Attribute; op: ValueOp; value: Literal } | { left: Attribute; op: 'exists' };

/**
 * A filter: all of (`and`; empty: every item), any of (`or`; empty: none), the negation of one,
 * or one comparison.
 */
export type Where = { and: Where[] } | { or: Where[] } | { not: Where } | { cmp: Comparison };

/** Deepest nesting of `and`/`or`/`not` (and parentheses) accepted: deeper is refused, not a stack overflow. */
export const MAX_WHERE_DEPTH = 64;
