/** Durations as an operator types them (lib/duration.ts): strict, so that a typo never means "everything". */
import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from '../../lib/duration.ts';
import { InvalidInputError } from '../../lib/errors.ts';

describe('parseDuration', () => {
  it('reads one unit or several, largest first', () => {
    const cases: Array<[string, number]> = [
      ['90s', 90_000],
      ['30m', 1_800_000],
      ['2h', 7_200_000],
      ['1d', 86_400_000],
      ['500ms', 500],
      ['1h30m', 5_400_000],
      ['1d2h3m4s5ms', 86_400_000 + 7_200_000 + 180_000 + 4_000 + 5],
      ['0h5m', 300_000],
      ['007m', 420_000],
    ];
    for (const [text, ms] of cases) expect(parseDuration(text), text).toBe(ms);
  });

  it('refuses anything else as INVALID_INPUT naming the field and the value', () => {
    for (const bad of ['', '30', '-1h', '+1h', '1.5h', '1 h', ' 1h', '1h ', '1H', '1w', 'h', '30m1h', '1m1m', '1s1ms1s', '0s', '0h0m', 'abc', '1h30', '9999999999999999d']) {
      let err: unknown;
      try {
        parseDuration(bad, '--stalled-for');
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(bad)).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).field).toBe('--stalled-for');
      expect((err as Error).message, bad).toContain(`got ${JSON.stringify(bad)}`);
    }
    expect(() => parseDuration(30 as unknown as string)).toThrow(/got 30/);
  });
});

describe('formatDuration', () => {
  it('shows the two largest units', () => {
    expect(formatDuration(999)).toBe('999ms');
    expect(formatDuration(45_000)).toBe('45s');
    expect(formatDuration(125 * 60_000 + 7_000)).toBe('2h 5m');
    expect(formatDuration(3 * 86_400_000 + 4 * 3_600_000 + 59_000)).toBe('3d 4h');
    expect(formatDuration(86_400_000 + 60_000)).toBe('1d 1m');
  });
});
