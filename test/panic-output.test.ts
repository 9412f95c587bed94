/**
 * LanceDB's Rust panic reports never reach a `dgcl` user: the CLI runs behind a stderr filter
 * that drops them and passes everything else (cli/panic-filter.ts). The filter on Rust's three
 * report formats, in one piece and a byte at a time; then a real LanceDB panic on a damaged file,
 * which the raw process prints and the filtered CLI does not.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PanicFilter } from '../cli/panic-filter.ts';
import { openLog } from '../lib/index.ts';
import { createBatch } from './support/batches.ts';
import { dgcl } from './support/proc.ts';

const AT = '/usr/local/cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-encoding-12.0.0/src/buffer.rs:290:9:';
const MSG = 'the offset + length of the sliced Buffer cannot exceed the existing length';

/** Rust's default hook: a blank line, the header, the message, then per RUST_BACKTRACE a note or frames. */
const report = (tail: string[]) => ['', `thread 'tokio-rt-worker' (13737) panicked at ${AT}`, MSG, ...tail].join('\n') + '\n';
const FIRST_NO_BACKTRACE = report(['note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace']);
const LATER_NO_BACKTRACE = report([]);
const SHORT_BACKTRACE = report(['stack backtrace:', '   0: __rustc::rust_begin_unwind', '   1: core::panicking::panic_fmt', 'note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.']);
const FULL_BACKTRACE = report(['stack backtrace:', '   0:     0x7ffa79b35678 - std::sys::backtrace::print', '  20:     0x7ffabb5c71f5 - start_thread', '                               at ./nptl/pthread_create.c:442:8', '  22:                0x0 - <unknown>']);

async function filtered(chunks: string[]): Promise<string> {
  const f = new PanicFilter();
  let out = '';
  f.on('data', (d) => (out += String(d)));
  const ended = new Promise((resolve) => f.on('end', resolve));
  for (const c of chunks) f.write(c);
  f.end();
  await ended;
  return out;
}

describe('the stderr filter', () => {
  const ours = 'dgcl: CORRUPT: the data file x.lance of the base is damaged\n';
  const input = ['starting\n', FIRST_NO_BACKTRACE, LATER_NO_BACKTRACE, '\n', 'a blank line above stays\n', SHORT_BACKTRACE, '\rappending 3/10 batches', '\rappending 10/10 batches\n', FULL_BACKTRACE, ours].join('');
  const expected = ['starting\n', '\n', 'a blank line above stays\n', '\rappending 3/10 batches', '\rappending 10/10 batches\n', ours].join('');

  it('drops every panic report (with or without a backtrace) and passes everything else, in one piece', async () => {
    expect(await filtered([input])).toBe(expected);
  });

  it('the same a byte at a time', async () => {
    expect(await filtered([...input])).toBe(expected);
  });

  it('passes a partial line at once unless it may be a panic header (a progress frame is not held)', async () => {
    const f = new PanicFilter();
    const seen: string[] = [];
    f.on('data', (d) => seen.push(String(d)));
    f.write('\rmaintaining 2 steps');
    await new Promise((r) => setImmediate(r));
    expect(seen.join('')).toBe('\rmaintaining 2 steps');
  });

  it('our own line printed inside a report (another thread was panicking) is kept', async () => {
    const torn = ['', `thread 'tokio-rt-worker' (1) panicked at ${AT}`, ours.trimEnd(), MSG, ''].join('\n');
    expect(await filtered([torn])).toBe(ours);
  });
});

describe('a LanceDB panic on a damaged file', () => {
  it('is printed by the raw process, not by the CLI, which says CORRUPT and exits 65', async () => {
    const src = mkdtempSync(path.join(tmpdir(), 'dgcl-panic-src-'));
    const log = await openLog({ root: src, pipeline: 'p', experiment: 'e' });
    for (let i = 0; i < 5; i++) await log.append([createBatch(`i${i}`, { set: { text: 'x'.repeat(100), n: i } })]);
    await log.close();
    const m = await openLog({ root: src, pipeline: 'p', experiment: 'e' });
    await m.maintain();
    await m.close();

    // Garble 8 bytes at a time, first where a page's lengths sit in this layout, until a read
    // makes LanceDB's decoder panic (most garbling only fails to decode).
    const dataDir = path.join(src, 'datagen_checkpoints/p/e/log.lance/data');
    const size = readFileSync(path.join(dataDir, readdirSync(dataDir)[0]!)).length;
    const offsets = [1152, 3072, 4992, ...Array.from({ length: Math.floor(size / 128) }, (_, i) => i * 128)];
    let root: string | null = null;
    for (const at of offsets) {
      const copy = mkdtempSync(path.join(tmpdir(), 'dgcl-panic-'));
      cpSync(src, copy, { recursive: true });
      const dir = path.join(copy, 'datagen_checkpoints/p/e/log.lance/data');
      const file = path.join(dir, readdirSync(dir)[0]!);
      const b = readFileSync(file);
      for (let i = at; i < Math.min(at + 8, b.length - 64); i++) b[i]! ^= 0x5a;
      writeFileSync(file, b);
      const r = await dgcl(['export', '--out', path.join(copy, 'o.jsonl'), '--root', copy, '--pipeline', 'p', '--experiment', 'e'], { env: { DGCL_RAW_STDERR: '1' } });
      if (/panicked at/.test(r.stderr)) {
        root = copy;
        break;
      }
    }
    expect(root, 'no garbling made LanceDB panic').not.toBeNull();

    const args = ['export', '--out', path.join(root!, 'o.jsonl'), '--root', root!, '--pipeline', 'p', '--experiment', 'e'];
    // As a user runs it: bin/dgcl.js runs the command in a child behind the filter.
    const r = await dgcl(args, { env: { RUST_BACKTRACE: '1' } });
    expect(r.code, r.stderr).toBe(65);
    expect(r.stderr).toMatch(/^dgcl: CORRUPT: the data file file:\/\/\S+\.lance of the log's base table .* is damaged: .*panicked.*; a retry cannot help: restore the file from a copy\n$/);
  }, 600_000);
});
