/**
 * The word rules of `search` (docs/api.md, "Search"): a text matches a query when it holds every
 * word of the query as a whole word, in any case. Words are runs of letters and digits (Unicode
 * Alphabetic and Number: what the full-text index's `simple` tokenizer keeps), lowercased one
 * character at a time as the index lowercases them (no final-sigma rule), so that a text the
 * index offers as a candidate and the check made here agree (lib/log/text-index.ts). Pure.
 */
import { InvalidInputError } from './errors.ts';

const WORD = /[\p{Alphabetic}\p{N}]+/gu;
const ASCII = /^[\x00-\x7f]*$/;

/** A word lowercased as the index does it: character by character. */
export function lowerWord(w: string): string {
  if (ASCII.test(w)) return w.toLowerCase();
  let out = '';
  for (const c of w) out += c.toLowerCase();
  return out;
}

/** Most characters one search text may have (a query is a few words, not a document). */
export const MAX_QUERY_CHARS = 1000;

/**
 * The query's words, lowercased, each once, in their order. InvalidInputError (field `text`)
 * when it has none: a search for punctuation alone would match nothing, silently.
 */
export function queryWords(text: unknown): string[] {
  if (typeof text !== 'string') throw new InvalidInputError(`must be a string, got ${text === null ? 'null' : typeof text}`, { field: 'text' });
  if (text.length > MAX_QUERY_CHARS) throw new InvalidInputError(`must be at most ${MAX_QUERY_CHARS} characters, got ${text.length}`, { field: 'text' });
  const words = [...new Set([...text.matchAll(WORD)].map((m) => lowerWord(m[0])))];
  if (words.length === 0) throw new InvalidInputError(`has no word to search for (letters or digits): ${JSON.stringify(text)}`, { field: 'text' });
  return words;
}

/** Where a match starts: the first occurrence in the text of one of the query's words. */
export interface TextMatch {
  start: number;
  end: number;
}

/** The first query word's position in `text` when it holds every word of `words` (lowercased), else null. */
export function matchWords(text: string, words: readonly string[]): TextMatch | null {
  const wanted = new Set(words);
  const missing = new Set(words);
  let first: TextMatch | null = null;
  for (const m of text.matchAll(WORD)) {
    const w = lowerWord(m[0]);
    if (!wanted.has(w)) continue;
    first ??= { start: m.index, end: m.index + m[0].length };
    missing.delete(w);
    if (missing.size === 0) return first;
  }
  return null;
}

/**
 * The string values of a JSON text, in document order: never its keys, numbers, booleans or
 * nulls. A text that is not JSON has none (a stored json value always is; nothing to match).
 */
export function jsonStrings(json: string): string[] {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return [];
  }
  const out: string[] = [];
  const walk = (x: unknown): void => {
    if (typeof x === 'string') out.push(x);
    else if (Array.isArray(x)) for (const e of x) walk(e);
    else if (x !== null && typeof x === 'object') for (const e of Object.values(x)) walk(e);
  };
  walk(v);
  return out;
}

/** Characters a snippet keeps before the match. */
const BEFORE = 40;
/** Characters of a snippet at most (before the ellipses). */
export const SNIPPET_CHARS = 120;

/**
 * The text around `m`, on one line: whitespace runs as one space, at most SNIPPET_CHARS
 * characters, `…` where it was cut. Never splits a surrogate pair.
 */
export function snippet(text: string, m: TextMatch): string {
  let from = Math.max(0, m.start - BEFORE);
  let to = Math.min(text.length, from + SNIPPET_CHARS);
  if (to - from < SNIPPET_CHARS) from = Math.max(0, to - SNIPPET_CHARS);
  if (from > 0 && isLowSurrogate(text.charCodeAt(from))) from--;
  if (to < text.length && isLowSurrogate(text.charCodeAt(to))) to++;
  const body = text.slice(from, to).replace(/\s+/g, ' ');
  return `${from > 0 ? '…' : ''}${from > 0 ? body.trimStart() : body}${to < text.length ? '…' : ''}`;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/**
 * Characters whose lowercase form is a character with fewer UTF-8 bytes than they have (the
 * Kelvin sign is 3 bytes, its lowercase `k` one), by that lowercase character: the most bytes a
 * stored word may have for a query word of that character (test/unit/text-match.test.ts derives
 * this table from the runtime's Unicode data).
 */
export const LONGER_UPPERCASE: ReadonlyMap<number, number> = new Map([
  [0x69, 2], [0x6b, 3], [0xdf, 3], [0xe5, 3], [0x19b, 3], [0x23f, 3], [0x240, 3], [0x250, 3], [0x251, 3],
  [0x252, 3], [0x25c, 3], [0x261, 3], [0x264, 3], [0x265, 3], [0x266, 3], [0x26a, 3], [0x26b, 3], [0x26c, 3],
  [0x271, 3], [0x27d, 3], [0x282, 3], [0x287, 3], [0x29d, 3], [0x29e, 3], [0x3c9, 3],
]);

/**
 * The most UTF-8 bytes a stored word that lowercases to `word` can have. The index drops words
 * of MAX_TOKEN_BYTES bytes or more as they are stored, before lowercasing them, so a query word
 * is found through the index only while this stays below that.
 */
export function storedBytesAtMost(word: string): number {
  let n = 0;
  for (const c of word) {
    const cp = c.codePointAt(0)!;
    const own = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    n += Math.max(own, LONGER_UPPERCASE.get(cp) ?? 0);
  }
  return n;
}
