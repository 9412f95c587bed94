/**
 * The CLI's commands, run in-process (`main(argv)` with captured streams) on a real log in a temp
 * folder. What needs a process of its own (the bin, a closed pipe, the Node version, what a
 * command loads) is in test/cli-process.test.ts.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { readBatchLines } from '../cli/input.ts';
import { InvalidInputError } from '../lib/errors.ts';
import { run } from './support/cli.ts';

// Options come from the command line here, never from the environment of whoever runs the tests.
for (const k of ['DGCL_ROOT', 'DGCL_PIPELINE', 'DGCL_EXPERIMENT']) delete process.env[k];

const root = mkdtempSync(path.join(tmpdir(), 'dgcl-cli-'));
const flags = ['--root', root, '--pipeline', 'p', '--experiment', 'cli'];
const logDir = path.join(root, 'datagen_checkpoints', 'p', 'cli', 'log.lance');
const lines = (...objs: unknown[]) => objs.map((o) => JSON.stringify(o)).join('\n') + '\n';
const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3, 255]);

describe('dgcl CLI', () => {
  beforeAll(async () => {
    const r = await run(['append', ...flags], {
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
    const r = await run(['fold', ...flags, '--item', 'doc-1', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s.status).toBe('failed');
    expect(s.fields.big).toEqual({ $int: '9007199254740993' });
    expect(s.fields.image.$blobRef.size).toBe(png.length);
    expect(s.failures[0].traceback).toBe('Traceback: boom');
  });

  it('items, failures, trajectory, stats, maintain answer', async () => {
    const items = await run(['items', ...flags, '--json']);
    expect(items.stdout.split('\n').map((l) => JSON.parse(l).itemId)).toEqual(['doc-1', 'doc-2']);
    const done = await run(['items', ...flags, '--status', 'completed']);
    expect(done.stdout).toContain('doc-2');
    expect(done.stdout).not.toContain('doc-1');
    const f = await run(['failures', ...flags]);
    expect(f.stdout).toMatch(/doc-1\s+gen attempt 1 \(seq \d+\): RateLimitError/);
    const t = await run(['trajectory', ...flags, '--item', 'doc-1', '--json']);
    const events = t.stdout.split('\n').map((l) => JSON.parse(l));
    expect(events.map((e) => e.itemSeq)).toEqual(events.map((_: unknown, i: number) => i + 1));
    expect(t.stdout).not.toContain(png.toString('base64'));
    const m = await run(['maintain', ...flags, '--json']);
    expect(m.code, m.stderr).toBe(0);
    expect(JSON.parse(m.stdout).ran).toBe(true);
    const st = await run(['stats', ...flags, '--json']);
    expect(JSON.parse(st.stdout).base.rows).toBeGreaterThan(0);
  });

  it('blob writes the exact bytes to stdout', async () => {
    const r = await run(['blob', ...flags, '--item', 'doc-1', '--field', 'image']);
    expect(r.code, r.stderr).toBe(0);
    expect(Buffer.compare(r.bytes, png)).toBe(0);
  });

  it('--help prints the commands and exits 0', async () => {
    const r = await run(['--help']);
    expect(r.code).toBe(0);
    for (const c of ['append', 'fold', 'items', 'trajectory', 'failures', 'report', 'export']) expect(r.stdout).toContain(c);
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
        const r = await run(args, stdin === undefined ? {} : { stdin });
        expect(r.code, r.stderr).toBe(2);
        expect(r.stderr).toMatch(message);
        expect(existsSync(untouched)).toBe(false);
      });
    }
    it('an S3 bucket name AWS rejects, before any request (everything else is set up for S3)', async () => {
      // A closed port as the endpoint: reaching the network would fail with exit 1, not 2.
      const env = { DGCL_LEASE_TABLE: 'dgcl-leases', AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:9', AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:9', AWS_ACCESS_KEY_ID: 'k', AWS_SECRET_ACCESS_KEY: 's', AWS_REGION: 'us-east-1', AWS_MAX_ATTEMPTS: '1' };
      for (const args of [['append'], ['fold', '--item', 'x']]) {
        const r = await run([...args, '--root', 's3://Bad_Bucket/x', '--pipeline', 'p', '--experiment', 'e'], { env, ...(args[0] === 'append' ? { stdin: lines({ itemId: 'a', runId: 'r', create: {} }) } : {}) });
        expect(r.code, r.stderr).toBe(2);
        expect(r.stderr).toContain('invalid S3 bucket name "Bad_Bucket": may contain only lowercase letters, digits, dots and hyphens');
      }
    });
    it('invalid UTF-8 on stdin, naming the line and byte offset', async () => {
      const good = Buffer.from(lines({ itemId: 'c-0', runId: 'r', create: {} }));
      const bad = Buffer.concat([Buffer.from('{"itemId":"c-1","runId":"r","create":{},"set":{"s":"ab'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}}\n')]);
      const r = await run(['append', ...fresh], { stdin: Buffer.concat([good, bad]) });
      expect(r.code, r.stderr).toBe(2);
      const col = bad.indexOf(0xff);
      expect(r.stderr).toContain(`line 2 of stdin is not valid UTF-8: byte 0xff at offset ${col} of the line (offset ${good.length + col} of stdin)`);
      expect(r.stdout).toBe('');
      expect(existsSync(untouched)).toBe(false);
    });
    it('invalid UTF-8 for an existing log leaves it unchanged (not folded to U+FFFD)', async () => {
      const before = await run(['stats', ...flags, '--json']);
      const r = await run(['append', ...flags], { stdin: Buffer.concat([Buffer.from('{"itemId":"doc-1","runId":"r","set":{"s":"ab'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}}\n')]) });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/line 1 of stdin is not valid UTF-8/);
      const after = await run(['stats', ...flags, '--json']);
      expect(JSON.parse(after.stdout).base).toEqual(JSON.parse(before.stdout).base);
      const fold = JSON.parse((await run(['fold', ...flags, '--item', 'doc-1', '--json'])).stdout);
      expect(fold.fields.s).toBeUndefined();
    });
    it('the log that exists is unchanged by rejected input', async () => {
      const before = await run(['stats', ...flags, '--json']);
      const r = await run(['append', ...flags], { stdin: lines({ itemId: 'doc-3', runId: 'r', create: {} }, { itemId: 'doc-1', runId: 'r', set: { x: null } }) });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/batches\[1\]\.set\.x|set\.x/);
      const after = await run(['stats', ...flags, '--json']);
      expect(JSON.parse(after.stdout).base).toEqual(JSON.parse(before.stdout).base);
      expect(existsSync(logDir)).toBe(true);
    });
  });
});

describe('readBatchLines', () => {
  const read = (bytes: Buffer) => readBatchLines(Readable.from([bytes]));
  const rejection = async (bytes: Buffer): Promise<InvalidInputError> => {
    const e = await read(bytes).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(InvalidInputError);
    return e as InvalidInputError;
  };

  it('keeps valid multi-byte text exactly (no normalization, a literal U+FFFD stays one)', async () => {
    const s = 'é漢😀\uFFFD';
    expect(await read(Buffer.from(`{"s":"${s}"}\n`))).toEqual([{ s }]);
  });

  it('rejects every kind of invalid UTF-8 at the offset of the bad sequence', async () => {
    const cases: Array<[string, number[]]> = [
      ['a stray continuation byte', [0x80]],
      ['an invalid lead byte', [0xff]],
      ['a truncated 2-byte sequence', [0xc3]],
      ['a truncated 4-byte sequence', [0xf0, 0x9f, 0x98]],
      ['an overlong encoding of "/"', [0xc0, 0xaf]],
      ['an overlong 3-byte encoding', [0xe0, 0x80, 0xaf]],
      ['a UTF-16 surrogate (U+D800)', [0xed, 0xa0, 0x80]],
      ['a code point above U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ];
    for (const [what, bytes] of cases) {
      const head = Buffer.from('{"s":"ok\u00e9');
      const e = await rejection(Buffer.concat([Buffer.from('{}\n\n'), head, Buffer.from(bytes), Buffer.from('"}\n')]));
      const hex = bytes[0]!.toString(16).padStart(2, '0');
      expect(e.message, what).toContain(`line 3 of stdin is not valid UTF-8: byte 0x${hex} at offset ${head.length} of the line (offset ${head.length + 4} of stdin)`);
      expect(e.field, what).toBe('line 3');
    }
  });

  it('rejects a truncated sequence at the very end of stdin', async () => {
    const e = await rejection(Buffer.from([0x7b, 0x7d, 0x0a, 0xe6, 0xbc]));
    expect(e.message).toContain('line 2 of stdin is not valid UTF-8: byte 0xe6 at offset 0 of the line (offset 3 of stdin)');
  });

  it('does not strip or accept a byte order mark silently', async () => {
    const e = await rejection(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{}\n')]));
    expect(e.message).toMatch(/line 1 of stdin is not valid JSON/);
  });
});
