/**
 * `--where` on `dgcl items`, `failures`, `export` and `report`, run in-process (`main(argv)`) on
 * a real log in a temp folder: exactly the selected items come out; a bad expression exits 2
 * with INVALID_INPUT naming its column, before the log is opened.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildSelectLog, fillerId, FILLERS } from './support/select-log.ts';
import { run } from './support/cli.ts';

for (const k of ['DGCL_ROOT', 'DGCL_PIPELINE', 'DGCL_EXPERIMENT']) delete process.env[k];

const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-select-cli-'));
const root = path.join(dir, 'root');
const flags = ['--root', root, '--pipeline', 'p', '--experiment', 'select'];
const fillers = (keep: (i: number) => boolean) => Array.from({ length: FILLERS }, (_, i) => i).filter(keep).map(fillerId);
const jsonLines = (s: string) => (s === '' ? [] : s.split('\n').map((l) => JSON.parse(l) as Record<string, unknown>));

beforeAll(async () => {
  const log = await buildSelectLog(root);
  await log.close();
});

describe('dgcl --where', () => {
  it('items --where lists exactly the selected items; with --status both hold', async () => {
    const ids = async (...args: string[]) => {
      const r = await run(['items', ...flags, '--json', ...args]);
      expect(r.code, r.stderr).toBe(0);
      return jsonLines(r.stdout).map((i) => i.itemId);
    };
    expect(await ids('--where', "tag.model contains 'gpt' and score > 0.5")).toEqual(['a-done', 'c-retry', 'f-fail2']);
    expect(await ids('--where', 'n >= 36')).toEqual(fillers((i) => i >= 36));
    expect(await ids('--where', 'not step exists')).toEqual(['e-bare', 'f-fail2']);
    expect(await ids('--status', 'completed', '--where', 'tag.batch = 0')).toEqual(fillers((i) => i % 15 === 0));
    // Given twice, both filters hold.
    expect(await ids('--where', 'n < 10', '--where', 'even = false')).toEqual(fillers((i) => i < 10 && i % 2 === 1));
    // Text output lists the same items.
    const text = await run(['items', ...flags, '--where', 'parent = a-done']);
    expect(text.code, text.stderr).toBe(0);
    const [header, ...rows] = text.stdout.split('\n');
    expect(header).toMatch(/^ITEM\s+STATUS/);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatch(/^d-child\s+filtered/);
  });

  it('failures --where lists the selected failed items', async () => {
    const r = await run(['failures', ...flags, '--json', '--where', 'error_type = "Timeout"']);
    expect(r.code, r.stderr).toBe(0);
    expect(jsonLines(r.stdout).map((f) => [f.itemId, f.errorType])).toEqual([['f-fail2', 'Timeout']]);
    const all = await run(['failures', ...flags, '--json']);
    expect(jsonLines(all.stdout).map((f) => f.itemId)).toEqual(['b-fail', 'f-fail2']);
  });

  it('export --where narrows the default status (completed); with --status any it selects among all', async () => {
    const out = path.join(dir, 'completed.jsonl');
    const r = await run(['export', ...flags, '--out', out, '--json', '--where', 'n >= 20 or label exists']);
    expect(r.code, r.stderr).toBe(0);
    const ids = jsonLines(readFileSync(out, 'utf8').trimEnd()).map((x) => x.item_id);
    expect(ids).toEqual(['a-done', ...fillers((i) => i >= 20 && i % 5 === 0)]);
    expect(JSON.parse(r.stdout).rows).toBe(ids.length);
    const any = path.join(dir, 'any.jsonl');
    const r2 = await run(['export', ...flags, '--out', any, '--status', 'any', '--where', 'label exists']);
    expect(r2.code, r2.stderr).toBe(0);
    expect(jsonLines(readFileSync(any, 'utf8').trimEnd()).map((x) => x.item_id)).toEqual(['a-done', 'b-fail', 'd-child']);
  });

  it('report --where writes a page of the selected items and says which filter', async () => {
    const out = path.join(dir, 'report.html');
    const r = await run(['report', ...flags, '--out', out, '--json', '--where', 'status = failed']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ items: 2, listed: 2, where: 'status = "failed"', status: { failed: 2, in_progress: 0, completed: 0, filtered: 0 } });
    const html = readFileSync(out, 'utf8');
    expect(html).toContain('(where status = &quot;failed&quot;)</title>');
    const text = await run(['report', ...flags, '--out', out, '--where', 'status = failed']);
    expect(text.stdout).toBe(`report written to ${out} (2 items, ${JSON.parse(r.stdout).events} events; only items where status = "failed")`);
  });

  it('a bad expression exits 2 naming the column and what was expected, before the log is opened', async () => {
    const cases: Array<[string, string]> = [
      ['attempts < ', "dgcl: INVALID_INPUT: --where: column 12: expected a value after '<'\n"],
      ['status = done', 'dgcl: INVALID_INPUT: --where: column 10: status is one of in_progress, failed, completed, filtered; got \'done\'\n'],
      ['(score > 1', "dgcl: INVALID_INPUT: --where: column 11: expected ')' to close the '(' at column 1\n"],
      ["label = 'cat", "dgcl: INVALID_INPUT: --where: column 9: unterminated string: the ' here is never closed\n"],
    ];
    // A log that does not exist: the expression fails first (exit 2, not 66).
    const missing = ['--root', path.join(dir, 'nowhere'), '--pipeline', 'p', '--experiment', 'x'];
    for (const cmd of ['items', 'failures', 'report', 'export']) {
      for (const [expr, err] of cases) {
        const extra = cmd === 'export' ? ['--out', path.join(dir, 'never.jsonl')] : cmd === 'report' ? ['--out', path.join(dir, 'never.html')] : [];
        const r = await run([cmd, ...missing, ...extra, '--where', expr]);
        expect([r.code, r.stderr], `${cmd} --where ${expr}`).toEqual([2, err]);
      }
    }
    expect(existsSync(path.join(dir, 'never.jsonl')) || existsSync(path.join(dir, 'never.html')) || existsSync(path.join(dir, 'nowhere'))).toBe(false);
  });
});
