// The bench's table builder (bench/table.ts): pure formatting, no timing.
import { describe, expect, it } from 'vitest';
import { bytes, formatTable, int, ratio, sizeText } from '../../bench/table.ts';

describe('bench table', () => {
  it('formats ratios, counts, sizes and bytes', () => {
    expect(ratio(15, 8)).toBe('1.88x');
    expect(ratio(1, 0)).toBe('');
    expect(ratio(undefined, 2)).toBe('');
    expect(int(14266.4)).toBe('14,266');
    expect(sizeText(1_000_000)).toBe('10^6');
    expect(sizeText(25_000)).toBe('25,000');
    expect(bytes(618)).toBe('618 B');
    expect(bytes(149_000_000)).toBe('149 MB');
    expect(bytes(3_260_000_000)).toBe('3.26 GB');
  });

  it('renders one Markdown row per figure, escaping pipes, with the run labelled', () => {
    const md = formatTable(
      [
        { figure: 'ack p50', ours: '14.2 ms', baseline: 'raw Lance 8.0 ms', ratio: '1.78x' },
        { figure: 'a | b', ours: 'x\ny', baseline: '', ratio: '' },
      ],
      { mode: 'quick', date: '2026-12-01T00:00:00.000Z', node: 'v22.23.3', load: ' load average: 1.00\n', sizes: [1e4, 1e5] },
    );
    const lines = md.split('\n');
    expect(lines[0]).toBe('# datagen-checkpoint-log bench (quick: small sizes and counts, indicative only)');
    expect(md).toContain('sizes 10^4, 10^5 events.');
    expect(md).toContain('`load average: 1.00`');
    expect(lines.filter((l) => l.startsWith('| '))).toEqual([
      '| figure | ours | baseline | ratio |',
      '| ack p50 | 14.2 ms | raw Lance 8.0 ms | 1.78x |',
      '| a \\| b | x y |  |  |',
    ]);
  });
});
