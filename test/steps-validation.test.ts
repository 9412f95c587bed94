/**
 * What a durable step returns is checked before anything is written (a wrong shape would
 * complete the step with no fields and lose its output for good), and steps of an iteration
 * run in index order in durable steps; plain appends of a lower step are written (they may be
 * late deliveries) and do not move the cursor back, so a resume from the cursor never runs a
 * completed step again. Real logs in temp folders.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../lib/errors.ts';
import { openLog } from '../lib/index.ts';
import { resumePoint } from '../lib/resume.ts';
import type { StepFn } from '../lib/steps.ts';
import { tree } from './support/tree.ts';

const newLog = async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-stepcheck-'));
  return { root, log: await openLog({ root, pipeline: 'p', experiment: 'e' }) };
};

describe('durable steps check what a step returns', () => {
  // Plain JavaScript callers: the types do not stop these.
  const wrong: Array<[string, unknown, RegExp, string]> = [
    ['a string', 'forty-two', /returned a string/, 'result'],
    ['fields at the top level', { answer: 'forty-two' }, /returned an object with keys "answer" \(unknown key "answer"\)/, 'result'],
    ['a misspelt key', { sett: { answer: 'forty-two' } }, /unknown key "sett"/, 'result'],
    ['set that is not an object', { set: 'forty-two' }, /set: /, 'result.set'],
    ['append values that are not an array', { append: { log: 'line' } }, /append\.log: /, 'result.append.log'],
    ['null', null, /returned null/, 'result'],
  ];

  for (const [what, returned, message, field] of wrong) {
    it(`${what}: INVALID_INPUT naming the step, nothing written, and the step runs again next time`, async () => {
      const { root, log } = await newLog();
      const item = await log.item('doc-1', { runId: 'r' });
      await item.step('load', 0, () => ({ set: { prompt: 'p' } }));
      const before = await log.trajectory('doc-1');
      const filesBefore = tree(root);
      const err = await item.step('generate', 1, (() => returned) as StepFn).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidInputError);
      expect(err).toMatchObject({ code: 'INVALID_INPUT', retryable: false, field });
      expect((err as Error).message).toMatch(/^result[.\w]*: step "generate" \(index 1\) of item "doc-1" returned/);
      expect((err as Error).message).toMatch(message);
      expect(await log.trajectory('doc-1')).toEqual(before);
      expect(tree(root)).toEqual(filesBefore);
      expect(item.isCompleted('generate', 1)).toBe(false);

      // A fixed function runs (attempt 1 again: the bad return was never recorded).
      const fixed = await item.step('generate', 1, (ctx) => ({ set: { answer: `ok on attempt ${ctx.attempt}` } }));
      expect(fixed).toMatchObject({ replayed: false, attempt: 1, set: { answer: 'ok on attempt 1' } });
      await log.close();
    });
  }

  it('returning nothing is a step that set nothing: STEP_COMPLETED alone', async () => {
    const { log } = await newLog();
    const item = await log.item('doc-1', { runId: 'r' });
    const out = await item.step('check', 0, () => undefined);
    expect(out).toMatchObject({ replayed: false, set: {}, append: {} });
    expect((await log.trajectory('doc-1')).map((e) => e.eventType)).toEqual(['ITEM_CREATED', 'STEP_COMPLETED']);
    const empty = await item.step('check2', 1, () => ({}));
    expect(empty.set).toEqual({});
    await log.close();
  });

  it('a value the log cannot store is INVALID_INPUT naming the step and the field, nothing written', async () => {
    const { log } = await newLog();
    const item = await log.item('doc-1', { runId: 'r' });
    await item.step('load', 0, () => undefined);
    const before = await log.trajectory('doc-1');
    const err = await item.step('generate', 1, () => ({ set: { bad: () => 1 } })).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'INVALID_INPUT', message: expect.stringMatching(/step "generate" \(index 1\) of item "doc-1" returned a value that cannot be stored: .*set\.bad/) });
    expect(await log.trajectory('doc-1')).toEqual(before);
    await log.close();
  });
});

describe('steps of an iteration complete in index order', () => {
  it('durable steps: a step index below the cursor is refused before its function runs; a resume starts after the cursor', async () => {
    const { root, log } = await newLog();
    const item = await log.item('doc-1', { runId: 'r' });
    await item.step('load', 0, () => undefined);
    await item.step('generate', 2, () => ({ set: { answer: 'a' } }));
    const filesBefore = tree(root);
    let ran = false;
    const err = await item.step('score', 1, () => {
      ran = true;
      return { set: { score: 1 } };
    }).catch((e: unknown) => e);
    expect(ran).toBe(false);
    expect(err).toMatchObject({ code: 'INVALID_INPUT', field: 'step.index', message: expect.stringMatching(/step "score" \(index 1\) of item "doc-1" comes after step "generate" \(index 2\) completed/) });
    expect(tree(root)).toEqual(filesBefore);
    // The same index again (a retry) and a higher one are fine.
    await item.step('generate', 2, () => ({ set: { answer: 'b' } }));
    await item.step('score', 3, () => ({ set: { score: 1 } }));

    // A new handle learns the cursor from the log.
    const again = await log.item('doc-1', { runId: 'r2' });
    await expect(again.step('late', 1, () => undefined)).rejects.toMatchObject({ field: 'step.index' });
    expect(resumePoint(await log.fold('doc-1'))).toMatchObject({ nextStepIndex: 4, resumeBy: 'index' });
    await log.close();
  });

  it('plain appends: a batch completing a lower step index is written (a late delivery) and does not move the cursor back', async () => {
    const { root, log } = await newLog();
    const b = (step: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ itemId: 'x', runId: 'r', step, ...extra });
    await log.append([b({ name: 'load', index: 0 }, { create: {} }), b({ name: 'gen', index: 2 })]);
    const [late] = await log.append([b({ name: 'score', index: 1 })]);
    expect(late).toMatchObject({ duplicate: false, firstSeq: 4 });
    // The cursor stayed: a resume runs step 3, never the completed step 2 again.
    expect(resumePoint(await log.fold('x'))).toMatchObject({ nextStepIndex: 3, cursor: { stepIndex: 2 } });
    expect((await log.items()).items[0]).toMatchObject({ cursor: { stepIndex: 2 } });
    // Sent again: answered from the log.
    expect(await log.append([b({ name: 'score', index: 1 })])).toMatchObject([{ duplicate: true, firstSeq: 4 }]);

    // A new iteration moves the cursor whatever its index; within it, order holds again.
    await log.append([b({ name: 'load', index: 0, iteration: 1 })]);
    await log.append([b({ name: 'gen', index: 2, iteration: 1 }), b({ name: 'load', index: 1, iteration: 1 })]);
    expect((await log.fold('x')).cursor).toMatchObject({ stepIndex: 2, iteration: 1 });
    await log.close();

    // Maintenance (merged base, listing projection) and another process agree.
    const other = await openLog({ root, pipeline: 'p', experiment: 'e' });
    expect((await other.maintain()).failures).toEqual([]);
    await other.append([b({ name: 'back', index: 0, iteration: 1 })]);
    expect((await other.fold('x')).cursor).toMatchObject({ stepIndex: 2, iteration: 1 });
    expect((await other.items()).items[0]).toMatchObject({ cursor: { stepIndex: 2, iteration: 1 } });
    await other.close();
  });
});
