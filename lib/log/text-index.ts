/**
 * The base's full-text indexes (LanceDB's inverted index, one per column in 0.39): which columns,
 * their names, and the tokenizer, which must split and lowercase words as lib/text-match.ts does
 * (`simple` splitting, lowercase, no stemming, stop words or folding). Maintenance creates them
 * and its optimize folds new rows into them; `search` (lib/log/read/search.ts) queries them.
 */
import { Index, MatchQuery, Operator, BooleanQuery, Occur, type FullTextQuery } from '@lancedb/lancedb';
import { storedBytesAtMost } from '../text-match.ts';

/** The text columns searched: string values, JSON values (their strings), error dumps, tracebacks. */
export const TEXT_COLUMNS = ['value_str', 'value_json', 'error_dump', 'traceback'] as const;
export type TextColumn = (typeof TEXT_COLUMNS)[number];

/** Stored words of this many UTF-8 bytes or more are left out of the index (they are checked by a scan). */
export const MAX_TOKEN_BYTES = 64;

const OPTIONS = {
  baseTokenizer: 'simple',
  lowercase: true,
  stem: false,
  removeStopWords: false,
  asciiFolding: false,
  withPosition: false,
  maxTokenLength: MAX_TOKEN_BYTES,
} as const;

/** The name of a column's full-text index (`dgcl stats` lists it). */
export function textIndexName(column: TextColumn): string {
  return `${column}_fts`;
}

export function isTextIndexName(name: string): boolean {
  return TEXT_COLUMNS.some((c) => textIndexName(c) === name);
}

export function textIndexConfig(): Index {
  return Index.fts(OPTIONS);
}

/**
 * Whether an index LanceDB lists is this column's full-text index with the tokenizer above (an
 * index made some other way could split or drop words differently: the column is scanned then).
 */
export function isTextIndexOf(column: TextColumn, ix: { name: string; indexType: string; columns: string[]; indexDetails?: unknown }): boolean {
  if (ix.name !== textIndexName(column) || ix.indexType !== 'FTS' || ix.columns.length !== 1 || ix.columns[0] !== column) return false;
  const d = ix.indexDetails as Record<string, unknown> | undefined;
  if (!d) return false;
  return (
    d.base_tokenizer === OPTIONS.baseTokenizer &&
    d.lower_case === OPTIONS.lowercase &&
    d.stem === OPTIONS.stem &&
    d.remove_stop_words === OPTIONS.removeStopWords &&
    d.ascii_folding === OPTIONS.asciiFolding &&
    d.max_token_length === OPTIONS.maxTokenLength
  );
}

/**
 * What canonical JSON puts before a string's characters when it escapes one (`\n`, `\u001b`):
 * the tokenizer reads `"a\nword"` as `a`, `nword`, so in `value_json` a word is also looked up
 * with each of these in front (a candidate the text check then confirms or drops).
 */
const JSON_ESCAPES = ['b', 'f', 'n', 'r', 't', ...Array.from({ length: 32 }, (_, c) => `u${c.toString(16).padStart(4, '0')}`)];
const LONGEST_ESCAPE = 5;

/** Whether the index holds every stored form of `word` in `column` (else the column is scanned for it). */
export function indexable(column: TextColumn, word: string): boolean {
  return storedBytesAtMost(word) + (column === 'value_json' ? LONGEST_ESCAPE : 0) < MAX_TOKEN_BYTES;
}

/**
 * The index query for rows of `column` holding every one of `words` (each `indexable`): a
 * candidate set that contains every row the text check accepts.
 */
export function textQuery(column: TextColumn, words: readonly string[]): FullTextQuery {
  const forms = (w: string) => (column === 'value_json' ? [w, ...JSON_ESCAPES.map((e) => e + w)] : [w]);
  return new BooleanQuery(words.map((w) => [Occur.Must, new MatchQuery(forms(w).join(' '), column, { operator: Operator.Or })]));
}
