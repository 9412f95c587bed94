/**
 * ONE suite for durable steps (lib/steps.ts), run on a file:// root (fast project) and an s3://
 * root on RGW (servers project). The target only says how to make a fresh root.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { InvalidInputError, ItemTerminalError } from '../../lib/errors.ts';
import { openLog } from '../../lib/index.ts';
import type { StepContext } from '../../lib/steps.ts';
import { startTs } from '../support/proc.ts';
import type { LogTarget } from './log.ts';

class RateLimited extends Error {}

export function stepsConformance(name: string, target: LogTarget): void {
  describe(`durable steps: ${name}`, () => {
    const open = async () => {
      const { root, env } = await target.newRoot();
      const o = { root, env: { ...process.env, ...env }, pipeline: 'steps', experiment: 'e1' };
      return { o, log: await openLog(o) };
    };

    it('runs a step once; a new handle in a new log replays its recorded fields without calling it', async () => {
      const { o, log } = await open();
      let calls = 0;
      const fn = () => {
        calls++;
        return { set: { answer: 'forty-two', n: 7 }, append: { messages: [{ role: 'assistant', content: 'hi' }, 'x'] } };
      };
      const a = await log.item('doc-1', { runId: 'r1' });
      const first = await a.step('generate', 2, fn);
      expect(first).toMatchObject({ replayed: false, attempt: 1, set: { answer: 'forty-two', n: 7 } });
      // Same handle: replayed from memory.
      expect((await a.step('generate', 2, fn)).replayed).toBe(true);
      await log.close();

      const log2 = await openLog(o);
      const b = await log2.item('doc-1', { runId: 'r2' });
      const again = await b.step('generate', 2, fn);
      expect(calls).toBe(1);
      expect(again).toEqual({ ...first, replayed: true });
      // Another index of the same name is another step.
      await b.step('generate', 3, fn);
      expect(calls).toBe(2);
      const state = await log2.fold('doc-1');
      expect(state.cursor).toMatchObject({ stepName: 'generate', stepIndex: 3, attempt: 1 });
      await log2.close();
    });

    it('a throw records FAILED with error type and traceback and rethrows; the next call retries with attempt + 1', async () => {
      const { o, log } = await open();
      const seen: number[] = [];
      const flaky = (ctx: StepContext) => {
        seen.push(ctx.attempt);
        if (ctx.attempt < 3) throw new RateLimited(`quota exceeded on attempt ${ctx.attempt}`);
        return { set: { answer: 'ok' } };
      };
      const it1 = await log.item('doc-f', { runId: 'r1' });
      await expect(it1.step('generate', 0, flaky)).rejects.toBeInstanceOf(RateLimited);
      const failed = await log.fold('doc-f');
      expect(failed.status).toBe('failed');
      expect(failed.failures).toHaveLength(1);
      expect(failed.failures[0]).toMatchObject({ stepName: 'generate', attempt: 1, errorType: 'RateLimited', errorDump: 'quota exceeded on attempt 1' });
      expect(failed.failures[0]!.traceback).toContain('flaky');
      await expect(it1.step('generate', 0, flaky)).rejects.toBeInstanceOf(RateLimited);
      await log.close();

      // A new process (new log, new handle) continues the attempt count from the log.
      const log2 = await openLog(o);
      const it2 = await log2.item('doc-f', { runId: 'r2' });
      const out = await it2.step('generate', 0, flaky);
      expect(seen).toEqual([1, 2, 3]);
      expect(out).toMatchObject({ replayed: false, attempt: 3, set: { answer: 'ok' } });
      const state = await log2.fold('doc-f');
      expect(state.status).toBe('in_progress');
      expect(state.failures.map((f) => f.attempt)).toEqual([1, 2]);
      expect(state.cursor).toMatchObject({ stepName: 'generate', attempt: 3 });
      await log2.close();
    });

    it('terminal ends the item: completed steps still replay, an unfinished step is refused, nothing written', async () => {
      const { log } = await open();
      const it1 = await log.item('doc-t', { runId: 'r1', create: { rootItemId: 'root-1' } });
      await it1.step('load', 0, () => ({ set: { text: 'abc' } }));
      await it1.terminal('filtered', { reason: 'too short' });
      await it1.terminal('filtered'); // idempotent
      const before = await log.fold('doc-t');
      expect(before).toMatchObject({ status: 'filtered', rootItemId: 'root-1', fields: { text: 'abc', reason: 'too short' } });

      const again = await log.item('doc-t', { runId: 'r2' });
      expect(again.terminalState).toBe('filtered');
      expect((await again.step('load', 0, () => ({ set: { text: 'never' } }))).set).toEqual({ text: 'abc' });
      let called = false;
      const err = await again
        .step('generate', 1, () => {
          called = true;
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ItemTerminalError);
      expect(err).toMatchObject({ code: 'ITEM_TERMINAL', itemId: 'doc-t' });
      expect(String(err)).toContain('terminal (filtered)');
      await expect(again.terminal('completed')).rejects.toMatchObject({ code: 'ITEM_TERMINAL' });
      expect(called).toBe(false);
      expect((await log.fold('doc-t')).lastSeq).toBe(before.lastSeq);
      await log.close();
    });

    it('two handles opened before the item existed both write: the creating batch is ifMissing', async () => {
      const { log } = await open();
      const a = await log.item('doc-r', { runId: 'r1' });
      const b = await log.item('doc-r', { runId: 'r2' });
      await a.step('load', 0, () => ({ set: { text: 'a' } }));
      await b.step('tag', 1, () => ({ set: { tag: 'b' } }));
      const state = await log.fold('doc-r');
      expect(state.fields).toEqual({ text: 'a', tag: 'b' });
      expect(state.violations).toEqual([]);
      expect((await log.trajectory('doc-r')).filter((e) => e.eventType === 'ITEM_CREATED')).toHaveLength(1);
      await log.close();
    });

    it('a bad step name fails before the function runs', async () => {
      const { log } = await open();
      const it1 = await log.item('doc-b', { runId: 'r1' });
      let called = false;
      await expect(
        it1.step('', 0, () => {
          called = true;
        }),
      ).rejects.toBeInstanceOf(InvalidInputError);
      expect(called).toBe(false);
      // Nothing was written: not even the log exists.
      await expect(log.trajectory('doc-b')).rejects.toMatchObject({ code: 'LOG_NOT_FOUND' });
      await log.close();
    });

    it('examples/durable-steps.ts SIGKILLed inside a step and rerun: each step function ran once, the killed one twice', async () => {
      const { root, env } = await target.newRoot();
      const calls = path.join(mkdtempSync(path.join(tmpdir(), 'dgcl-steps-')), 'calls.txt');
      const args = ['--root', root, '--docs', '4', '--calls', calls];
      const killed = startTs('examples/durable-steps.ts', [...args, '--kill-at', 'doc-2:generate', '--run', 'run-1'], env);
      const k = await killed.exit;
      expect(k.signal, k.stderr).toBe('SIGKILL');
      const firstRun = readFileSync(calls, 'utf8').trim().split('\n');
      // Docs 0 and 1 whole, doc-2's load, then killed inside doc-2's generate.
      expect(firstRun).toHaveLength(2 * 3 + 2);
      expect(firstRun.at(-1)).toBe('doc-2 generate 1');

      const rerun = startTs('examples/durable-steps.ts', [...args, '--run', 'run-2'], env);
      const r = await rerun.exit;
      expect(r.code, r.stderr).toBe(0);
      expect(existsSync(calls)).toBe(true);
      const count = new Map<string, number>();
      for (const line of readFileSync(calls, 'utf8').trim().split('\n')) {
        const [itemId, step] = line.split(' ');
        count.set(`${itemId}:${step}`, (count.get(`${itemId}:${step}`) ?? 0) + 1);
      }
      const expected = new Map<string, number>();
      for (const d of [0, 1, 2, 3]) for (const s of ['load', 'generate', 'score']) expected.set(`doc-${d}:${s}`, 1);
      // The kill came before the step's batch was acknowledged: that step runs again (attempt 1:
      // nothing was recorded, so it is not a retry after a failure).
      expected.set('doc-2:generate', 2);
      expect(Object.fromEntries(count)).toEqual(Object.fromEntries(expected));

      const log = await openLog({ root, env: { ...process.env, ...env }, pipeline: 'durable-demo', experiment: 'exp-1' });
      for (const d of [0, 1, 2, 3]) {
        const s = await log.fold(`doc-${d}`);
        expect(s.status).toBe('completed');
        expect(s.fields.answer).toBe(`${`document number ${d}`.length} characters`);
      }
      await log.close();
    });
  });
}
