/**
 * `dgcl snapshot` (--name, --list, --drop), `export --snapshot`, `report --snapshot` and the
 * snapshots `dgcl stats` lists, run in-process (`main(argv)`) on a real log in a temp folder:
 * exit codes, what they print, and that a bad name fails before the log is opened.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { run } from './support/cli.ts';

for (const k of ['DGCL_ROOT', 'DGCL_PIPELINE', 'DGCL_EXPERIMENT']) delete process.env[k];

const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-snapshot-cli-'));
const root = path.join(dir, 'root');
const flags = ['--root', root, '--pipeline', 'p', '--experiment', 'e'];
const batch = (itemId: string, extra: Record<string, unknown> = {}) => ({ itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: itemId }, ...extra });

beforeAll(async () => {
  const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
  await log.append([batch('a', { terminal: 'completed' }), batch('b')]);
  await log.close();
});

describe('dgcl snapshot', () => {
  it('--name takes one, again is exit 0 (same state), after an append exit 2; export and report --snapshot read it; --list and stats list it; --drop deletes it', async () => {
    const taken = await run(['snapshot', ...flags, '--name', 'v1', '--json']);
    expect(taken.code, taken.stderr).toBe(0);
    const info = JSON.parse(taken.stdout) as { name: string; created: boolean; baseVersion: number; tailRows: number; events: number };
    expect(info).toMatchObject({ name: 'v1', created: true, tailRows: 0 });
    const again = await run(['snapshot', ...flags, '--name', 'v1']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^snapshot v1 already holds this state \(taken \S+\): base version \d+ \+ 0 unmerged rows, \d+ events$/);

    const then = path.join(dir, 'then.jsonl');
    expect((await run(['export', ...flags, '--status', 'any', '--out', then])).code).toBe(0);
    // The log moves on.
    const append = await run(['append', ...flags], { stdin: `${JSON.stringify(batch('c', { terminal: 'completed' }))}\n` });
    expect(append.code, append.stderr).toBe(0);
    const refused = await run(['snapshot', ...flags, '--name', 'v1']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^dgcl: INVALID_INPUT: name: snapshot "v1" already exists in .* and the log holds other events now: pick another name, or drop it first \(dgcl snapshot --drop v1\)\n$/);

    const out = path.join(dir, 'now.jsonl');
    const exp = await run(['export', ...flags, '--status', 'any', '--snapshot', 'v1', '--out', out]);
    expect(exp.code, exp.stderr).toBe(0);
    expect(readFileSync(out)).toEqual(readFileSync(then));
    const page = path.join(dir, 'page.html');
    const rep = await run(['report', ...flags, '--snapshot', 'v1', '--out', page, '--json']);
    expect(rep.code, rep.stderr).toBe(0);
    expect(JSON.parse(rep.stdout)).toMatchObject({ snapshot: 'v1', items: 2, events: info.events });
    expect(readFileSync(page, 'utf8')).toContain('(snapshot v1)');

    const list = await run(['snapshot', ...flags, '--list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`^v1  \\S+  base v${info.baseVersion}  0 unmerged rows  ${info.events} events$`));
    const stats = await run(['stats', ...flags]);
    expect(stats.stdout).toMatch(new RegExp(`\\nsnapshots\\n  v1  \\S+  base v${info.baseVersion}  0 unmerged rows  ${info.events} events(\\n|$)`));
    const statsJson = await run(['stats', ...flags, '--json']);
    expect((JSON.parse(statsJson.stdout) as { snapshots: unknown[] }).snapshots).toEqual([{ name: 'v1', createdAtMs: expect.any(Number), baseVersion: info.baseVersion, tailRows: 0, events: info.events }]);

    const dropped = await run(['snapshot', ...flags, '--drop', 'v1']);
    expect(dropped.code, dropped.stderr).toBe(0);
    expect(dropped.stdout).toBe('snapshot v1 dropped');
    expect((await run(['snapshot', ...flags, '--list'])).stdout).toBe('no snapshots');
    expect((await run(['stats', ...flags])).stdout).toMatch(/\nsnapshots none(\n|$)/);
  });

  it('an unknown snapshot is exit 2 NOT_FOUND naming the ones there are (up to 10); nothing is written', async () => {
    for (let i = 0; i < 12; i++) expect((await run(['snapshot', ...flags, '--name', `n${String(i).padStart(2, '0')}`])).code).toBe(0);
    const out = path.join(dir, 'never.jsonl');
    const r = await run(['export', ...flags, '--snapshot', 'nope', '--out', out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^dgcl: NOT_FOUND: no snapshot "nope" in .*; its snapshots: "n00", "n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09" and 2 more \(dgcl snapshot --list\)\n$/);
    expect(existsSync(out)).toBe(false);
    const rep = await run(['report', ...flags, '--snapshot', 'nope', '--out', path.join(dir, 'never.html')]);
    expect(rep.code).toBe(2);
    expect(rep.stderr).toMatch(/NOT_FOUND: no snapshot "nope"/);
    expect((await run(['snapshot', ...flags, '--drop', 'nope'])).code).toBe(2);
  });

  it('a bad name or a wrong combination of flags is exit 2 before the log is opened', async () => {
    // A root that does not exist: had the log been opened, the error would be LOG_NOT_FOUND (66).
    const none = ['--root', path.join(dir, 'missing'), '--pipeline', 'p', '--experiment', 'e'];
    for (const args of [
      ['snapshot', ...none, '--name', 'a/b'],
      ['snapshot', ...none, '--name', 'x'.repeat(129)],
      ['snapshot', ...none, '--name', ''],
      ['export', ...none, '--snapshot', 'a b', '--out', path.join(dir, 'x.jsonl')],
      ['report', ...none, '--snapshot', 'é'],
    ]) {
      const r = await run(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/^dgcl: INVALID_INPUT: --(name|snapshot): a snapshot name is 1-128 characters of A-Z, a-z, 0-9, '\.', '_' and '-', got /);
    }
    for (const args of [['snapshot', ...none], ['snapshot', ...none, '--name', 'a', '--list'], ['snapshot', ...none, '--list', '--drop', 'a']]) {
      const r = await run(args);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe('dgcl: snapshot: give exactly one of --name <name>, --list, --drop <name>\n');
    }
    // A valid name of a log that does not exist: the log is opened, and is not there.
    expect((await run(['snapshot', ...none, '--name', 'ok'])).code).toBe(66);
    expect((await run(['snapshot', ...none, '--list'])).code).toBe(66);
  });
});
