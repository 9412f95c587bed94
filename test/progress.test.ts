/**
 * Progress bars of long CLI commands (issue 11): drawn on stderr at a terminal, absent with
 * --json or when stderr is not a TTY. The terminal is a real pseudo-terminal from util-linux
 * `script`; the non-TTY runs are the ordinary pipes of a child process.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatAmount, frameText, wantsProgress } from '../cli/progress.ts';
import { dgcl } from './support/proc.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const BAR_CHARS = /[\u2588\u2591]/; // cli-progress shades_classic: full and light shade blocks
const N = 600;
/** Each CLI process starts Lance: seconds apiece on a loaded machine. */
const SPAWNS = 240_000;

const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-progress-'));
const batchFile = path.join(dir, 'batches.jsonl');
writeFileSync(
  batchFile,
  Array.from({ length: N }, (_, i) => JSON.stringify({ itemId: `k-${i}`, runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { n: i } })).join('\n') + '\n',
);

const sh = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** Run the CLI inside a pseudo-terminal (stdout and stderr both the terminal, unless redirected in `tail`). */
function inTerminal(args: string[], tail = ''): { code: number | null; screen: string } {
  const cmd = [process.execPath, 'bin/dgcl.js', ...args].map(sh).join(' ') + tail;
  const env: NodeJS.ProcessEnv = { ...process.env, TERM: 'xterm' };
  delete env.CI;
  const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
  return { code: r.status, screen: String(r.stdout) };
}

describe('when to draw a bar', () => {
  it('only on a terminal stderr, never with --json or TERM=dumb', () => {
    const tty = { isTTY: true };
    expect(wantsProgress({ stream: tty, env: {} })).toBe(true);
    expect(wantsProgress({ stream: tty, env: { TERM: 'xterm-256color' }, json: false })).toBe(true);
    expect(wantsProgress({ stream: tty, env: {}, json: true })).toBe(false);
    expect(wantsProgress({ stream: tty, env: { TERM: 'dumb' } })).toBe(false);
    expect(wantsProgress({ stream: { isTTY: false }, env: {} })).toBe(false);
    expect(wantsProgress({ stream: {}, env: {} })).toBe(false);
  });

  it('frames say the stage, the amount of the total and the unit', () => {
    expect(formatAmount(512, 'bytes')).toBe('512 B');
    expect(formatAmount(1536, 'bytes')).toBe('1.5 KiB');
    expect(formatAmount(3 * 1024 ** 3, 'bytes')).toBe('3.0 GiB');
    expect(frameText({ label: 'appending', value: 12, total: 600, unit: 'batches', detail: '' })).toEqual({ head: 'appending', tail: '12/600 batches' });
    expect(frameText({ label: 'maintaining', value: 3, total: 8, unit: 'steps', detail: 'merge' })).toEqual({ head: 'maintaining', tail: '3/8 steps (merge)' });
    expect(frameText({ label: 'reading stdin', value: 2048, total: null, unit: 'bytes', detail: '' }).tail).toBe('2.0 KiB');
  });
});

describe('dgcl append and maintain', () => {
  const flags = ['--root', path.join(dir, 'root'), '--pipeline', 'p', '--experiment', 'e'];

  it('on a terminal: a bar for reading stdin and for the append, acks on stdout', () => {
    const acks = path.join(dir, 'acks.jsonl');
    const r = inTerminal(['append', ...flags], ` < ${sh(batchFile)} > ${sh(acks)}`);
    expect(r.code, r.screen).toBe(0);
    expect(r.screen).toMatch(BAR_CHARS);
    const size = formatAmount(readFileSync(batchFile).length, 'bytes');
    expect(r.screen).toContain(`reading stdin ${'\u2588'.repeat(30)} ${size}/${size}`);
    expect(r.screen).toContain(`appending ${'\u2588'.repeat(30)} ${N}/${N} batches`);
    const lines = readFileSync(acks, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(N);
    expect(JSON.parse(lines[0]!)).toMatchObject({ itemId: 'k-0', duplicate: false });
  }, SPAWNS);

  it('on a terminal: maintain counts its steps to the end; with --json it draws nothing', () => {
    const r = inTerminal(['maintain', ...flags]);
    expect(r.code, r.screen).toBe(0);
    expect(r.screen).toMatch(BAR_CHARS);
    const frames = [...r.screen.matchAll(/maintaining [\u2588\u2591]{30} (\d+)\/(\d+) steps \((\w+)\)/g)];
    const last = frames.at(-1)!;
    expect(last[1]).toBe(last[2]);
    expect(last[3]).toBe('meta');
    const quiet = inTerminal(['maintain', ...flags, '--json']);
    expect(quiet.code, quiet.screen).toBe(0);
    expect(quiet.screen).not.toMatch(BAR_CHARS);
    expect(quiet.screen).not.toContain('maintaining');
    expect(JSON.parse(quiet.screen).ran).toBe(true);
  }, SPAWNS);

  it('not on a terminal (pipes): stderr stays empty', async () => {
    const stdin = readFileSync(batchFile, 'utf8');
    const flags = ['--root', path.join(dir, 'root'), '--pipeline', 'p', '--experiment', 'pipes'];
    const a = await dgcl(['append', ...flags], { stdin });
    expect(a.code, a.stderr).toBe(0);
    expect(a.stderr).toBe('');
    expect(a.stdout.split('\n')).toHaveLength(N);
    const m = await dgcl(['maintain', ...flags]);
    expect(m.code, m.stderr).toBe(0);
    expect(m.stderr).toBe('');
    expect(JSON.parse(m.stdout).ran).toBe(true);
  }, SPAWNS);
});
