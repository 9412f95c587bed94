/**
 * What the CLI's text output says: failures as type, message and the frame they were raised in;
 * trajectories with a header and event times; long values as a prefix and a size; LangGraph
 * threads as threads. Commands run in-process on logs in temp folders.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { emptyCheckpoint, uuid6, type Checkpoint } from '@langchain/langgraph-checkpoint';
import { beforeAll, describe, expect, it } from 'vitest';
import { describeFailure, preview } from '../cli/preview.ts';
import { DgclCheckpointSaver } from '../lib/langgraph/index.ts';
import { run } from './support/cli.ts';

const root = mkdtempSync(path.join(tmpdir(), 'dgcl-cli-output-'));
const flags = ['--root', root, '--pipeline', 'p', '--experiment', 'text'];
const lines = (...objs: unknown[]) => objs.map((o) => JSON.stringify(o)).join('\n') + '\n';

const jsStack = [
  'TypeError: Cannot read properties of undefined (reading "answer")',
  '    at score (file:///app/steps.js:41:17)',
  '    at DurableItem.step (file:///app/node_modules/datagen-checkpoint-log/dist/lib/steps.js:120:30)',
  '    at process.processTicksAndRejections (node:internal/process/task_queues:105:5)',
].join('\n');
const pyTrace = [
  'Traceback (most recent call last):',
  '  File "pipeline.py", line 88, in run_step',
  '    out = generate(item)',
  '  File "steps.py", line 41, in generate',
  '    raise RateLimitError("429 from the model API, retry after 2 s")',
  'RateLimitError: 429 from the model API, retry after 2 s',
].join('\n');
const BIG = 5 * 1024 * 1024;

beforeAll(async () => {
  const r = await run(['append', ...flags], {
    stdin: lines(
      { itemId: 'js', runId: 'r', create: {}, step: { name: 'score', index: 2 }, failed: { errorType: 'TypeError', errorDump: 'Cannot read properties of undefined (reading "answer")', traceback: jsStack } },
      { itemId: 'py', runId: 'r', create: {}, step: { name: 'generate', index: 1 }, failed: { errorType: 'RateLimitError', errorDump: '{"status":429}', traceback: pyTrace } },
      { itemId: 'big', runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { text: 'x'.repeat(BIG), doc: { pages: Array.from({ length: 20_000 }, (_, i) => `page ${i}`) }, n: 7 } },
    ),
  });
  expect(r.code, r.stderr).toBe(0);
});

describe('failures', () => {
  it('show the error type, its message and the frame it was raised in, not the outermost frames', async () => {
    const r = await run(['failures', ...flags]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')).toEqual([
      'js  score attempt 1 (seq 2): TypeError: Cannot read properties of undefined (reading "answer")',
      '    at score (file:///app/steps.js:41:17)',
      'py  generate attempt 1 (seq 2): RateLimitError: 429 from the model API, retry after 2 s',
      '    File "steps.py", line 41, in generate: raise RateLimitError("429 from the model API, retry after 2 s")',
    ]);
  });

  it('without a traceback: the type and the error dump', () => {
    expect(describeFailure({ errorType: 'Timeout', errorDump: 'no answer in\n30 s', traceback: null })).toEqual({ head: 'Timeout: no answer in 30 s', frame: null });
    expect(describeFailure({ errorType: 'KeyboardInterrupt', traceback: 'Traceback (most recent call last):\n  File "a.py", line 3, in <module>\nKeyboardInterrupt' })).toEqual({
      head: 'KeyboardInterrupt',
      frame: 'File "a.py", line 3, in <module>',
    });
  });
});

describe('trajectory', () => {
  it('has a header row and the time of every event', async () => {
    const r = await run(['trajectory', ...flags, '--item', 'py']);
    expect(r.code, r.stderr).toBe(0);
    const [head, ...rows] = r.stdout.split('\n');
    expect(head!.split(/\s{2,}/)).toEqual(['SEQ', 'TIME (UTC)', 'EVENT', 'STEP', 'ATTEMPT', 'WRITER', 'DETAIL']);
    expect(rows).toHaveLength(2);
    const events = (await run(['trajectory', ...flags, '--item', 'py', '--json'])).stdout.split('\n').map((l) => JSON.parse(l) as { eventTs: string });
    rows.forEach((row, i) => {
      const t = events[i]!.eventTs.replace('T', ' ').slice(0, 23);
      expect(row).toMatch(new RegExp(`^${i + 1}\\s+${t.replace(/\./g, '\\.')}\\s`));
    });
    expect(rows[1]).toMatch(/FAILED\s+1:generate\s+1\s+\S+\s+RateLimitError: 429 from the model API, retry after 2 s$/);
  });
});

describe('long values', () => {
  it('fold shows a long string and a large JSON value as a prefix and a size, never whole', async () => {
    const r = await run(['fold', ...flags, '--item', 'big']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.length).toBeLessThan(2000);
    expect(r.stdout).toMatch(new RegExp(`\\n  text  "x{100}…" \\(${BIG.toLocaleString('en-US')} characters\\)\\n`));
    expect(r.stdout).toMatch(/\n {2}doc {3}\{"pages":\["page 0","page 1",.*… \(1 keys\)\n/);
    expect(r.stdout).toContain('\n  n     7\n');
    // --json is the API object, whole.
    const whole = await run(['fold', ...flags, '--item', 'big', '--json']);
    expect(JSON.parse(whole.stdout).fields.text).toHaveLength(BIG);
  });

  it('previews stop early: a value is cut before it is escaped or serialised', () => {
    expect(preview('short')).toBe('"short"');
    expect(preview('"'.repeat(1000), 4)).toBe('"\\"\\"\\"\\"…" (1,000 characters)');
    expect(preview({ $int: '9007199254740993' })).toBe('9007199254740993');
    expect(preview({ $blobRef: { eventId: 'e', size: 2048, checksum: 'c' } })).toBe('blob, 2,048 bytes');
    const deep = { a: Array.from({ length: 100_000 }, (_, i) => ({ i, s: 'y'.repeat(100) })) };
    const p = preview(deep, 60);
    expect(p.length).toBeLessThan(100);
    expect(p).toMatch(/^\{"a":\[\{"i":0,"s":"y+.*… \(1 keys\)$/);
  });
});

describe('LangGraph threads', () => {
  const lgRoot = mkdtempSync(path.join(tmpdir(), 'dgcl-cli-lg-'));
  const lg = ['--root', lgRoot, '--pipeline', 'lg', '--experiment', 'e'];
  const ids: string[] = [];

  beforeAll(async () => {
    const saver = new DgclCheckpointSaver({ root: lgRoot, pipeline: 'lg', experiment: 'e' });
    for (const [thread_id, n] of [['thread-7', 3], ['#not an item id', 1]] as const) {
      for (let v = 1; v <= n; v++) {
        const c: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { topic: `t${v}`, draft: `d${v}` }, channel_versions: { topic: v, draft: v } };
        await saver.put({ configurable: { thread_id, checkpoint_ns: '' } }, c, { source: 'loop', step: v, parents: {} }, { topic: v, draft: v });
        if (thread_id === 'thread-7') ids.push(c.id);
      }
    }
    await saver.putWrites({ configurable: { thread_id: 'thread-7', checkpoint_ns: '', checkpoint_id: ids.at(-1)! } }, [['draft', 'pending']], 'task-1');
    await saver.close();
  });

  it('items name them as LangGraph threads with their latest checkpoint, and the thread id when the item id is a hash of it', async () => {
    const r = await run(['items', ...lg]);
    expect(r.code, r.stderr).toBe(0);
    const rows = r.stdout.split('\n').slice(1).map((l) => l.split(/\s{2,}/));
    const thread = rows.find((c) => c[0] === 'thread-7')!;
    expect(thread[2]).toBe(`LangGraph thread, checkpoint ${ids.at(-1)}`);
    const hashed = rows.find((c) => c[0]!.startsWith('#'))!;
    expect(hashed[2]).toMatch(/^LangGraph thread "#not an item id", checkpoint \S+$/);
  });

  it('fold summarises the checkpoint records instead of listing c//, v// and w// fields', async () => {
    const r = await run(['fold', ...lg, '--item', 'thread-7']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(/\b[cvw]\/\//);
    expect(r.stdout).toContain('item        thread-7  (LangGraph thread)');
    expect(r.stdout).toContain(`cursor      LangGraph checkpoint ${ids.at(-1)}`);
    expect(r.stdout).toContain(`thread      3 checkpoints (namespaces ""; latest ${ids.at(-1)}), 6 channel values (draft, topic), 1 pending writes; --json for the records`);
  });

  it('fold names a thread whose item id is a hash of its thread id by that thread id', async () => {
    const hashed = (await run(['items', ...lg, '--json'])).stdout.split('\n').map((l) => JSON.parse(l) as { itemId: string }).find((i) => i.itemId.startsWith('#'))!;
    const r = await run(['fold', ...lg, '--item', hashed.itemId]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe(`item        ${hashed.itemId}  (LangGraph thread "#not an item id")`);
    expect(r.stdout).toMatch(/\nthread      1 checkpoints .*, 2 channel values \(draft, topic\), 0 pending writes/);
  });

  it("trajectory labels the saver's fields", async () => {
    const r = await run(['trajectory', ...lg, '--item', 'thread-7']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`checkpoint ${ids[0]} = `);
    expect(r.stdout).toContain('channel topic @ 1 = ');
    expect(r.stdout).toContain(`pending write task-1/0 of checkpoint ${ids.at(-1)} = `);
  });
});
