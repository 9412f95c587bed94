/**
 * The filter text as tokens, each with the column it starts at (1-based, in code points, so a
 * column points at the character a person sees). Words are maximal runs of characters that are
 * not blanks, quotes, parentheses or comparison signs; the parser decides what a word is (a
 * keyword, a name, a number or a bare value). Strings are quoted with ' or " and take the
 * escapes \\ \' \" \n \r \t \b \f \uXXXX (those JSON writes).
 */
import { WhereSyntaxError, shown } from './syntax-error.ts';

export type TokenKind = 'word' | 'string' | 'op' | '(' | ')' | 'end';

export interface Token {
  kind: TokenKind;
  /** A string's value (escapes resolved); otherwise the text as typed. */
  text: string;
  /** The text as typed (a string with its quotes), for messages. */
  raw: string;
  /** Column of its first character (1-based); `end`: one past the last character. */
  col: number;
  /** Column just after its last character. */
  next: number;
}

const OPS = new Set(['=', '!=', '<', '<=', '>', '>=']);
/** Characters that end a word. */
const BREAKS = new Set(["'", '"', '(', ')', '=', '!', '<', '>']);
const ESCAPES: Record<string, string> = { '\\': '\\', "'": "'", '"': '"', n: '\n', r: '\r', t: '\t', b: '\b', f: '\f' };

const isBlank = (c: string): boolean => /^\s$/u.test(c);

export function tokenize(text: string, source: string): Token[] {
  const cs = Array.from(text);
  const out: Token[] = [];
  const fail = (i: number, what: string): never => {
    throw new WhereSyntaxError(source, i + 1, what);
  };
  let i = 0;
  while (i < cs.length) {
    const c = cs[i]!;
    if (isBlank(c)) {
      i++;
      continue;
    }
    const start = i;
    if (c === '(' || c === ')') {
      out.push({ kind: c, text: c, raw: c, col: i + 1, next: i + 2 });
      i++;
    } else if (c === '=' || c === '!' || c === '<' || c === '>') {
      const two = c + (cs[i + 1] ?? '');
      const op = OPS.has(two) ? two : c;
      if (!OPS.has(op)) fail(i, "unexpected '!': negate with 'not', compare with '!='");
      i += op.length;
      out.push({ kind: 'op', text: op, raw: op, col: start + 1, next: i + 1 });
    } else if (c === "'" || c === '"') {
      i++;
      let value = '';
      for (;;) {
        if (i >= cs.length) fail(start, `unterminated string: the ${c} here is never closed`);
        const d = cs[i]!;
        if (d === c) break;
        if (d !== '\\') {
          value += d;
          i++;
          continue;
        }
        const e = cs[i + 1];
        if (e === undefined) fail(start, `unterminated string: the ${c} here is never closed`);
        if (e === 'u') {
          const hex = cs.slice(i + 2, i + 6).join('');
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail(i, `expected 4 hex digits after \\u, got ${shown(hex)}`);
          value += String.fromCharCode(parseInt(hex, 16));
          i += 6;
        } else if (Object.hasOwn(ESCAPES, e!)) {
          value += ESCAPES[e!];
          i += 2;
        } else {
          fail(i, `unknown escape ${shown(`\\${e}`)} (escapes: \\\\ \\' \\" \\n \\r \\t \\b \\f \\uXXXX)`);
        }
      }
      i++;
      out.push({ kind: 'string', text: value, raw: cs.slice(start, i).join(''), col: start + 1, next: i + 1 });
    } else {
      while (i < cs.length && !isBlank(cs[i]!) && !BREAKS.has(cs[i]!)) i++;
      const word = cs.slice(start, i).join('');
      out.push({ kind: 'word', text: word, raw: word, col: start + 1, next: i + 1 });
    }
  }
  out.push({ kind: 'end', text: '', raw: '', col: cs.length + 1, next: cs.length + 1 });
  return out;
}

/** Whether `s` reads back as one word (no blanks, quotes, parentheses or comparison signs). */
export function isWord(s: string): boolean {
  if (s === '') return false;
  for (const c of s) if (isBlank(c) || BREAKS.has(c)) return false;
  return true;
}
