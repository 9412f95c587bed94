/** The CLI as a user runs it: real processes, a real log in a temp folder. */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { dgcl } from './support/proc.ts';

const root = mkdtempSync(path.join(tmpdir(), 'dgcl-cli-'));
const flags = ['--root', root, '--pipeline', 'p', '--experiment', 'cli'];
const logDir = path.join(root, 'datagen_checkpoints', 'p', 'cli', 'log.lance');
const lines = (...objs: unknown[]) => objs.map((o) => JSON.stringify(o)).join('\n') + '\n';
const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3, 255]);

describe('dgcl CLI', () => {
  beforeAll(async () => {
    const r = await dgcl(['append', ...flags], {
      stdin: lines(
        { itemId: 'doc-1', runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { prompt: 'hi', big: { $int: '9007199254740993' }, image: { $blob: png.toString('base64') } } },
        { itemId: 'doc-1', runId: 'r', step: { name: 'gen', index: 1 }, failed: { errorType: 'RateLimitError', errorDump: '{}', traceback: 'Traceback: boom' } },
        { itemId: 'doc-2', runId: 'r', create: {}, step: { name: 'load', index: 0 }, terminal: 'completed' },
      ),
    });
    expect(r.code, r.stderr).toBe(0);
    const acks = r.stdout.split('\n').map((l) => JSON.parse(l));
    expect(acks).toHaveLength(3);
    expect(acks[0]).toMatchObject({ itemId: 'doc-1', firstSeq: 1, duplicate: false });
  });

  it('fold prints the item state with exact big ints and blob refs', async () => {
    const r = await dgcl(['fold', ...flags, '--item', 'doc-1', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s.status).toBe('failed');
    expect(s.fields.big).toEqual({ $int: '9007199254740993' });
    expect(s.fields.image.$blobRef.size).toBe(png.length);
    expect(s.failures[0].traceback).toBe('Traceback: boom');
  });

  it('items, failures, trajectory, stats, maintain answer', async () => {
    const items = await dgcl(['items', ...flags, '--json']);
    expect(items.stdout.split('\n').map((l) => JSON.parse(l).itemId)).toEqual(['doc-1', 'doc-2']);
    const done = await dgcl(['items', ...flags, '--status', 'completed']);
    expect(done.stdout).toContain('doc-2');
    expect(done.stdout).not.toContain('doc-1');
    const f = await dgcl(['failures', ...flags]);
    expect(f.stdout).toMatch(/doc-1\s+gen attempt 1: RateLimitError/);
    const t = await dgcl(['trajectory', ...flags, '--item', 'doc-1', '--json']);
    const events = t.stdout.split('\n').map((l) => JSON.parse(l));
    expect(events.map((e) => e.itemSeq)).toEqual(events.map((_: unknown, i: number) => i + 1));
    expect(t.stdout).not.toContain(png.toString('base64'));
    const m = await dgcl(['maintain', ...flags, '--json']);
    expect(m.code, m.stderr).toBe(0);
    expect(JSON.parse(m.stdout).ran).toBe(true);
    const st = await dgcl(['stats', ...flags, '--json']);
    expect(JSON.parse(st.stdout).base.rows).toBeGreaterThan(0);
  });

  it('blob writes the exact bytes to stdout', async () => {
    const { spawnSync } = await import('node:child_process');
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'blob', ...flags, '--item', 'doc-1', '--field', 'image']);
    expect(r.status, String(r.stderr)).toBe(0);
    expect(Buffer.compare(r.stdout, png)).toBe(0);
  });

  it('demo: a SIGKILLed worker, a resume from every cursor, no step twice, maintenance merges the dead shard', async () => {
    const demoRoot = mkdtempSync(path.join(tmpdir(), 'dgcl-demo-'));
    const r = await dgcl(['demo', '--root', demoRoot, '--items', '10', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout.split('\n').at(-1)!);
    expect(summary.crash.killed).toBe(true);
    expect(summary.resumedBatches).toBeGreaterThan(0);
    expect(summary.rootItems).toBe(10);
    expect(summary.childItems).toBe(20);
    expect(summary.repeatedSteps).toBe(0);
    expect(summary.violations).toBe(0);
    expect(summary.unfinished).toBe(0);
    expect(summary.maintenance.readsUnchanged).toBe(true);
    expect(summary.maintenance.unmergedShards).toBe(0);
    expect(summary.maintenance.baseRows).toBe(summary.events);
    expect(summary.log.startsWith(demoRoot)).toBe(true);
  });

  describe('bad input exits 2, names the problem, writes nothing', () => {
    const fresh = ['--root', root, '--pipeline', 'p', '--experiment', 'untouched'];
    const untouched = path.join(root, 'datagen_checkpoints', 'p', 'untouched');
    const cases: Array<[string, string[], string | undefined, RegExp]> = [
      ['a line that is not JSON', ['append', ...fresh], '{"itemId": "a", "runId": "r", "create": {}}\n{oops\n', /line 2/],
      ['a missing runId', ['append', ...fresh], lines({ itemId: 'a', create: {} }), /runId/],
      ['an unsafe integer', ['append', ...fresh], lines({ itemId: 'a', runId: 'r', create: {}, set: { n: 9007199254740993 } }), /set\.n/],
      ['bad base64 in a blob', ['append', ...fresh], lines({ itemId: 'a', runId: 'r', create: {}, set: { b: { $blob: '***' } } }), /set\.b/],
      ['an item never created', ['append', ...fresh], lines({ itemId: 'ghost', runId: 'r', step: { name: 's', index: 0 } }), /ghost/],
      ['an invalid pipeline name', ['append', '--root', root, '--pipeline', '../x', '--experiment', 'e'], lines({ itemId: 'a', runId: 'r', create: {} }), /pipeline/],
      ['a missing --root', ['fold', '--pipeline', 'p', '--experiment', 'e', '--item', 'x'], undefined, /--root/],
      ['an unknown status', ['items', ...fresh, '--status', 'weird'], undefined, /status/],
      ['an unknown item', ['fold', ...flags, '--item', 'nope'], undefined, /nope/],
    ];
    for (const [what, args, stdin, message] of cases) {
      it(what, async () => {
        const r = await dgcl(args, stdin === undefined ? { env: { DGCL_ROOT: '' } } : { stdin });
        expect(r.code, r.stderr).toBe(2);
        expect(r.stderr).toMatch(message);
        expect(existsSync(untouched)).toBe(false);
      });
    }
    it('the log that exists is unchanged by rejected input', async () => {
      const before = await dgcl(['stats', ...flags, '--json']);
      const r = await dgcl(['append', ...flags], { stdin: lines({ itemId: 'doc-3', runId: 'r', create: {} }, { itemId: 'doc-1', runId: 'r', set: { x: null } }) });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/batches\[1\]\.set\.x|set\.x/);
      const after = await dgcl(['stats', ...flags, '--json']);
      expect(JSON.parse(after.stdout).base).toEqual(JSON.parse(before.stdout).base);
      expect(existsSync(logDir)).toBe(true);
    });
  });
});
