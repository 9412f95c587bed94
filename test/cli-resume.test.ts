/**
 * `dgcl resume` in-process (`main(argv)` with captured streams) on a real local log written
 * beforehand under a clock set hours back, so its items are old or fresh by construction; `--send`
 * goes to a real SQS endpoint (fauxqs, in-process, as the resume handler's tests use).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../lib/clock.ts';
import { openLog } from '../lib/open.ts';
import type { ResumeInstruction } from '../lib/resume.ts';
import { startLocalSqs, type LocalSqs } from './functions/support/sqs.ts';
import { createBatch, stepBatch } from './support/batches.ts';
import { run } from './support/cli.ts';

for (const k of ['DGCL_ROOT', 'DGCL_PIPELINE', 'DGCL_EXPERIMENT', 'DGCL_RESUME_QUEUE_URL']) delete process.env[k];

const HOUR = 3_600_000;
const root = mkdtempSync(path.join(tmpdir(), 'dgcl-cli-resume-'));
const flags = ['--root', root, '--pipeline', 'p', '--experiment', 'stalls'];
const WRITTEN_AT = Math.floor(Date.now() / 1000) * 1000 - 3 * HOUR;
const at = (ms: number) => new Date(ms).toISOString().replace('Z', '000Z');
let sqs: LocalSqs;

beforeAll(async () => {
  sqs = await startLocalSqs();
  const clock = new ManualClock(WRITTEN_AT);
  const log = await openLog({ root, pipeline: 'p', experiment: 'stalls', clock, leaseTtlMs: 4 * HOUR, mergeIdleMs: 0 });
  await log.append([
    createBatch('old-running'),
    stepBatch('old-running', 1),
    createBatch('old-failed'),
    { itemId: 'old-failed', runId: 'r1', step: { name: 'step1', index: 1 }, failed: { errorType: 'Timeout' } },
    createBatch('old-done', { terminal: 'completed' }),
  ]);
  clock.advance(3 * HOUR - 60_000);
  await log.append([createBatch('fresh')]);
  await log.close();
});
afterAll(async () => {
  await sqs?.stop();
});

const lines = (stdout: string) => (stdout === '' ? [] : stdout.split('\n').map((l) => JSON.parse(l) as Record<string, unknown>));

describe('dgcl resume', () => {
  it('--json: one line per stalled item, terminal and fresh ones left out; nothing sent', async () => {
    const r = await run(['resume', ...flags, '--stalled-for', '1h', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(lines(r.stdout)).toEqual([
      { itemId: 'old-failed', status: 'failed', cursor: expect.objectContaining({ stepName: 'load', stepIndex: 0 }), lastEventAt: at(WRITTEN_AT), sent: false },
      { itemId: 'old-running', status: 'in_progress', cursor: expect.objectContaining({ stepName: 'step1', stepIndex: 1 }), lastEventAt: at(WRITTEN_AT), sent: false },
    ]);
    const all = await run(['resume', ...flags, '--stalled-for', '30s', '--json']);
    expect(lines(all.stdout).map((l) => l.itemId)).toEqual(['fresh', 'old-failed', 'old-running']);
    const limited = await run(['resume', ...flags, '--stalled-for', '30s', '--limit', '2', '--json']);
    expect(lines(limited.stdout).map((l) => l.itemId)).toEqual(['fresh', 'old-failed']);
  });

  it('text: a table and a line saying what was looked at; an empty sweep says so', async () => {
    const r = await run(['resume', ...flags, '--stalled-for', '1h']);
    expect(r.code, r.stderr).toBe(0);
    const [head, ...rest] = r.stdout.split('\n');
    expect(head).toMatch(/^ITEM +STATUS +CURSOR +LAST EVENT \(UTC\) +IDLE$/);
    expect(rest.slice(0, 2).map((l) => l.split(/ {2,}/)[0])).toEqual(['old-failed', 'old-running']);
    expect(rest[0]).toMatch(/ 3h( \d+s)?$/);
    expect(rest[2]).toBe('2 stalled items (idle for more than 1h; 4 items listed, 1 terminal); nothing sent (--send sends them to the resume queue)');
    const none = await run(['resume', ...flags, '--stalled-for', '5h']);
    expect([none.code, none.stdout]).toEqual([0, 'no item idle for more than 5h (4 items listed, 1 terminal)']);
    const noneJson = await run(['resume', ...flags, '--stalled-for', '5h', '--json']);
    expect([noneJson.code, noneJson.stdout]).toEqual([0, '']);
  });

  it('--send: sends each its resume instruction, the same (item, lastSeq) every time', async () => {
    const queueUrl = await sqs.newQueue();
    for (let i = 0; i < 2; i++) {
      // The queue from the environment (commander reads process.env), then from the flag.
      if (i === 0) process.env.DGCL_RESUME_QUEUE_URL = queueUrl;
      const r = await run(['resume', ...flags, '--stalled-for', '1h', '--send', '--json', ...(i === 0 ? [] : ['--queue-url', queueUrl])]);
      delete process.env.DGCL_RESUME_QUEUE_URL;
      expect(r.code, r.stderr).toBe(0);
      expect(lines(r.stdout).map((l) => [l.itemId, l.sent])).toEqual([
        ['old-failed', true],
        ['old-running', true],
      ]);
    }
    const got = ((await sqs.drain(queueUrl)) as ResumeInstruction[]).map((m) => [m.itemId, m.lastSeq, m.nextStepIndex, m.attempt]).sort();
    expect(got).toEqual([
      ['old-failed', 4, 1, 2],
      ['old-failed', 4, 1, 2],
      ['old-running', 5, 2, 1],
      ['old-running', 5, 2, 1],
    ]);
    const text = await run(['resume', ...flags, '--stalled-for', '1h', '--send', '--queue-url', queueUrl]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout.split('\n')[0]).toMatch(/ SENT$/);
    expect(text.stdout.split('\n').at(-1)).toBe(`2 stalled items (idle for more than 1h; 4 items listed, 1 terminal); sent 2 to ${queueUrl}`);
  });

  it('a send that fails prints every item, then exits 75 naming them', async () => {
    const gone = `${sqs.endpoint}/000000000000/no-such-queue`;
    const r = await run(['resume', ...flags, '--stalled-for', '1h', '--send', '--json', '--queue-url', gone]);
    expect(r.code).toBe(75);
    expect(lines(r.stdout).map((l) => [l.itemId, l.sent, l.reason, (l.error as { code: string }).code])).toEqual([
      ['old-failed', false, 'failed', 'UNAVAILABLE'],
      ['old-running', false, 'failed', 'UNAVAILABLE'],
    ]);
    expect(r.stderr).toMatch(/^dgcl: resume: 2 of 2 stalled items were not sent \(old-failed: UNAVAILABLE: .*; sending again is harmless\n$/);
  });

  it('refuses a bad duration (INVALID_INPUT naming the value), --send without a queue, and a log that does not exist', async () => {
    for (const bad of ['30', '1.5h', '-1h', '1w', '0s', 'soon']) {
      const r = await run(['resume', ...flags, '--stalled-for', bad]);
      expect(r.code, bad).toBe(2);
      expect(r.stderr, bad).toBe(`dgcl: INVALID_INPUT: --stalled-for: must be a duration such as 90s, 30m, 2h, 1d or 1h30m (units d, h, m, s, ms)${bad === '0s' ? ' (more than zero)' : ''}, got ${JSON.stringify(bad)}\n`);
    }
    const noQueue = await run(['resume', ...flags, '--stalled-for', '1h', '--send']);
    expect([noQueue.code, noQueue.stderr]).toEqual([2, 'dgcl: --send needs --queue-url (or DGCL_RESUME_QUEUE_URL)\n']);
    const badQueue = await run(['resume', ...flags, '--stalled-for', '1h', '--send', '--queue-url', 'dgcl-resume']);
    expect([badQueue.code, badQueue.stderr]).toEqual([2, 'dgcl: --queue-url is not an SQS queue URL: "dgcl-resume"\n']);
    const missing = await run(['resume', '--root', root, '--pipeline', 'p', '--experiment', 'nope', '--stalled-for', '1h']);
    expect(missing.code).toBe(66);
    expect(missing.stderr).toMatch(/^dgcl: LOG_NOT_FOUND: /);
  });
});
