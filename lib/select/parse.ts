/**
 * `parseWhere(text)`: the filter text as a `Where` (docs/usage.md, "Selecting items"). A
 * recursive-descent parser over lib/select/tokens.ts, one function per level of precedence
 * (`not` binds tighter than `and`, `and` tighter than `or`):
 *
 *   where      := or END
 *   or         := and ('or' and)*
 *   and        := unary ('and' unary)*
 *   unary      := 'not' unary | '(' or ')' | comparison
 *   comparison := name 'exists' | name ('=' | '!=' | '<' | '<=' | '>' | '>=' | 'contains') value
 *   name       := status | step | attempts | error_type | parent | root | item_id
 *               | tag.NAME | field.NAME | NAME          (NAME: a word; tag."..." / field."..." quoted)
 *   value      := 'quoted' | "quoted" | number | true | false | null | word
 *
 * Keywords (`and`, `or`, `not`, `contains`, `exists`) are case-insensitive; attribute names and
 * `true`/`false`/`null` are lower case. Every error is a WhereSyntaxError naming the column and
 * what was expected there.
 */
import { comparisonProblem, isItemAttribute, nameProblem } from './rules.ts';
import { WhereSyntaxError, shown } from './syntax-error.ts';
import { tokenize, type Token } from './tokens.ts';
import { MAX_WHERE_DEPTH, type Attribute, type Comparison, type Literal, type ValueOp, type Where } from './where.ts';

/** Words that are never a name or a bare value (any case). */
export const NAME_KEYWORDS: ReadonlySet<string> = new Set(['and', 'or', 'not', 'contains', 'exists']);
const KEYWORDS = NAME_KEYWORDS;
const LITERALS: ReadonlyMap<string, Literal> = new Map<string, Literal>([
  ['true', true],
  ['false', false],
  ['null', null],
]);
/** Words that are literals, not text (lower case only). */
export const LITERAL_WORDS: ReadonlySet<string> = new Set(LITERALS.keys());
/** A word that is a number. */
export const NUMBER = /^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/;
const COMPARISONS = "'=', '!=', '<', '<=', '>', '>=', 'contains' or 'exists'";

/**
 * The filter `text` as a `Where`. `source` names the text in errors (`where`; the CLI passes
 * `--where`). Throws WhereSyntaxError (INVALID_INPUT) at the first problem.
 */
export function parseWhere(text: string, source = 'where'): Where {
  if (typeof text !== 'string') throw new WhereSyntaxError(source, 1, `expected the filter as text, got ${typeof text}`);
  return new Parser(tokenize(text, source), source).where();
}

const isKeyword = (t: Token, k: string): boolean => t.kind === 'word' && t.text.toLowerCase() === k;

function got(t: Token): string {
  return t.kind === 'end' ? '' : `, got ${shown(t.raw)}`;
}

class Parser {
  private at = 0;
  private depth = 0;

  constructor(
    private readonly tokens: Token[],
    private readonly source: string,
  ) {}

  private peek(): Token {
    return this.tokens[this.at]!;
  }

  private take(): Token {
    return this.tokens[this.at++]!;
  }

  private fail(t: Token, what: string): never {
    throw new WhereSyntaxError(this.source, t.col, what);
  }

  where(): Where {
    const first = this.peek();
    if (first.kind === 'end') this.fail(first, "expected a comparison, 'not' or '(' (the filter is empty)");
    const w = this.or();
    const t = this.peek();
    if (t.kind !== 'end') this.fail(t, `expected 'and', 'or' or the end${got(t)}`);
    return w;
  }

  private or(): Where {
    const parts = [this.and()];
    while (isKeyword(this.peek(), 'or')) {
      this.take();
      parts.push(this.and());
    }
    return parts.length === 1 ? parts[0]! : { or: parts };
  }

  private and(): Where {
    const parts = [this.unary()];
    while (isKeyword(this.peek(), 'and')) {
      this.take();
      parts.push(this.unary());
    }
    return parts.length === 1 ? parts[0]! : { and: parts };
  }

  private unary(): Where {
    const t = this.peek();
    if (isKeyword(t, 'not') || t.kind === '(') {
      if (++this.depth > MAX_WHERE_DEPTH) this.fail(t, `nesting deeper than ${MAX_WHERE_DEPTH} levels`);
      this.take();
      let w: Where;
      if (t.kind === '(') {
        w = this.or();
        const close = this.peek();
        if (close.kind !== ')') this.fail(close, `expected ')' to close the '(' at column ${t.col}${got(close)}`);
        this.take();
      } else {
        w = { not: this.unary() };
      }
      this.depth--;
      return w;
    }
    return { cmp: this.comparison() };
  }

  private comparison(): Comparison {
    const nameToken = this.peek();
    const left = this.name();
    const bad = nameProblem(left);
    if (bad !== null) this.fail(nameToken, bad);
    const leftRaw = this.tokens.slice(this.tokens.indexOf(nameToken), this.at).map((x) => x.raw).join('');
    const t = this.take();
    if (isKeyword(t, 'exists')) return { left, op: 'exists' };
    let op: ValueOp;
    if (t.kind === 'op') op = t.text as ValueOp;
    else if (isKeyword(t, 'contains')) op = 'contains';
    else return this.fail(t, `expected ${COMPARISONS} after ${shown(leftRaw)}${got(t)}`);
    const valueToken = this.peek();
    const value = this.value(op === 'contains' ? 'contains' : op);
    const problem = comparisonProblem(left, op, value);
    if (problem !== null) this.fail(valueToken, problem);
    return { left, op, value };
  }

  /** An attribute: the word (or `tag.`/`field.` and the quoted name right after it). */
  private name(): Attribute {
    const t = this.take();
    const expected = "expected a comparison, 'not' or '('";
    if (t.kind === 'string') this.fail(t, `${expected}${got(t)} (a quoted name needs its kind: field.${t.raw} or tag.${t.raw})`);
    if (t.kind !== 'word') this.fail(t, `${expected}${got(t)}`);
    const w = t.text;
    if (KEYWORDS.has(w.toLowerCase()) || LITERALS.has(w)) this.fail(t, `${expected}${got(t)}`);
    if (NUMBER.test(w)) this.fail(t, `${expected}${got(t)} (a field named so is field.${w})`);
    if (isItemAttribute(w)) return w;
    for (const prefix of ['tag.', 'field.'] as const) {
      if (!w.startsWith(prefix)) continue;
      if (w.length > prefix.length) return w as Attribute;
      const quoted = this.peek();
      // `field."a name"`: the quote must follow the dot directly.
      if (quoted.kind === 'string' && quoted.col === t.next && quoted.text !== '') {
        this.take();
        return `${prefix}${quoted.text}` as Attribute;
      }
      this.fail(quoted, `expected a ${prefix.slice(0, -1)} name right after '${prefix}'${got(quoted)}`);
    }
    return `field.${w}`;
  }

  private value(after: string): Literal {
    const t = this.take();
    if (t.kind === 'string') return t.text;
    if (t.kind !== 'word' || KEYWORDS.has(t.text.toLowerCase())) {
      const hint = t.kind === 'word' ? ` (quote it to compare with the word: '${t.text}')` : '';
      return this.fail(t, `expected a value after '${after}'${got(t)}${hint}`);
    }
    if (LITERALS.has(t.text)) return LITERALS.get(t.text)!;
    if (!NUMBER.test(t.text)) return t.text;
    const n = Number(t.text);
    if (!Number.isFinite(n)) this.fail(t, `number ${shown(t.text)} is out of range`);
    if (/^[-+]?\d+$/.test(t.text) && !Number.isSafeInteger(n)) {
      this.fail(t, `integer ${shown(t.text)} is beyond ±(2^53-1), where numbers stop being exact (quote it to compare as text)`);
    }
    return n;
  }
}
