/** The word rules of search (lib/text-match.ts): words, matching, JSON strings, snippets, index bounds. */
import { describe, expect, it } from 'vitest';
import { isWellFormed } from '../../lib/codec.ts';
import { jsonStrings, LONGER_UPPERCASE, lowerWord, matchWords, MAX_QUERY_CHARS, queryWords, snippet, SNIPPET_CHARS, storedBytesAtMost } from '../../lib/text-match.ts';

const matches = (text: string, query: string) => matchWords(text, queryWords(query)) !== null;

describe('queryWords', () => {
  it('splits on everything but letters and digits, lowercases, and keeps each word once in order', () => {
    expect(queryWords('Rate-limit RATE_limit: 429, Über   東京タワー')).toEqual(['rate', 'limit', '429', 'über', '東京タワー']);
  });

  it('refuses a text with no word, a non-string and an over-long text with INVALID_INPUT naming `text`', () => {
    for (const bad of ['', '  ', '!?-_', null, 42, 'a'.repeat(MAX_QUERY_CHARS + 1)]) {
      expect(() => queryWords(bad), JSON.stringify(bad)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT', field: 'text' }));
    }
  });

  it('lowercases one character at a time (no final-sigma rule), as the index does', () => {
    expect(queryWords('ΟΔΟΣ')).toEqual(['οδοσ']);
    expect(lowerWord('ΟΔΟΣ')).not.toBe('ΟΔΟΣ'.toLowerCase());
  });
});

describe('matchWords', () => {
  it('matches whole words in any case, and needs every word of the query', () => {
    expect(matches('The Quota was exhausted', 'quota')).toBe(true);
    expect(matches('The Quota was exhausted', 'EXHAUSTED quota')).toBe(true);
    expect(matches('The Quota was exhausted', 'quota missing')).toBe(false);
    expect(matches('quotas exhausted', 'quota')).toBe(false);
    expect(matches('subquota', 'quota')).toBe(false);
  });

  it('takes punctuation and underscores as word boundaries', () => {
    expect(matches('RateLimitError: rate_limit/exceeded', 'limit exceeded')).toBe(true);
    expect(matches('a.b-c', 'c a')).toBe(true);
  });

  it('matches digits as words inside text', () => {
    expect(matches('HTTP 429 Too Many', '429')).toBe(true);
    expect(matches('HTTP 4290', '429')).toBe(false);
  });

  it('points at the first occurrence of any query word', () => {
    const text = 'alpha beta gamma beta alpha';
    expect(matchWords(text, ['gamma', 'beta'])).toEqual({ start: 6, end: 10 });
  });

  it('matches letters beyond ASCII', () => {
    expect(matches('Fehler: Größe überschritten', 'GRÖSSE')).toBe(false); // ß is not folded to ss
    expect(matches('Fehler: Größe überschritten', 'größe ÜBERSCHRITTEN')).toBe(true);
    expect(matches('東京タワー に行く', '東京タワー')).toBe(true);
  });
});

describe('jsonStrings', () => {
  it('keeps string values at any depth, never keys, numbers, booleans or nulls', () => {
    expect(jsonStrings('{"role":"user","n":42,"ok":true,"x":null,"msgs":[{"content":"hi there"},"plain",7]}')).toEqual(['user', 'hi there', 'plain']);
  });

  it('gives escaped characters back as they were', () => {
    expect(jsonStrings(JSON.stringify({ a: 'line\nbreak\u001bword' }))).toEqual(['line\nbreak\u001bword']);
  });

  it('has no strings for a text that is not JSON', () => {
    expect(jsonStrings('{not json')).toEqual([]);
  });
});

describe('snippet', () => {
  it('keeps a short text whole, on one line', () => {
    const t = 'rate limit:\n  quota\texhausted';
    expect(snippet(t, matchWords(t, ['quota'])!)).toBe('rate limit: quota exhausted');
  });

  it('cuts a long text around the match with ellipses, at most SNIPPET_CHARS characters of it', () => {
    const t = `${'x '.repeat(200)}NEEDLE here ${'y '.repeat(200)}`;
    const s = snippet(t, matchWords(t, ['needle'])!);
    expect(s.startsWith('…') && s.endsWith('…')).toBe(true);
    expect(s).toContain('NEEDLE here');
    expect(s.length).toBeLessThanOrEqual(SNIPPET_CHARS + 2);
    expect(s.indexOf('NEEDLE')).toBeGreaterThan(30);
  });

  it('takes the window from the end when the match is near it', () => {
    const t = `${'x'.repeat(300)} needle`;
    const s = snippet(t, matchWords(t, ['needle'])!);
    expect(s.endsWith('needle')).toBe(true);
    expect(s.length).toBe(SNIPPET_CHARS + 1);
  });

  it('never splits a surrogate pair at a cut', () => {
    for (let pad = 0; pad < 4; pad++) {
      const t = `${'😀'.repeat(60 + pad)} needle ${'😀'.repeat(80)}`;
      const s = snippet(t, matchWords(t, ['needle'])!);
      expect(isWellFormed(s), `pad ${pad}`).toBe(true);
    }
  });
});

describe('the index bound of stored word sizes', () => {
  it('LONGER_UPPERCASE is every character whose lowercase has fewer UTF-8 bytes, per the runtime Unicode data', () => {
    const bytes = (s: string) => Buffer.byteLength(s, 'utf8');
    const derived = new Map<number, number>();
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const c = String.fromCodePoint(cp);
      const l = c.toLowerCase();
      if (l === c) continue;
      for (const p of l) {
        const k = p.codePointAt(0)!;
        if (bytes(c) > bytes(p)) derived.set(k, Math.max(derived.get(k) ?? 0, bytes(c)));
      }
    }
    expect([...LONGER_UPPERCASE].sort((a, b) => a[0] - b[0])).toEqual([...derived].sort((a, b) => a[0] - b[0]));
  });

  it('storedBytesAtMost counts the longest uppercase form of each character', () => {
    expect(storedBytesAtMost('abc')).toBe(3);
    expect(storedBytesAtMost('kk')).toBe(6); // the Kelvin sign
    expect(storedBytesAtMost('über')).toBe(5);
    expect(storedBytesAtMost('😀')).toBe(4);
  });
});
