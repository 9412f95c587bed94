/** The fold handler on a file:// root: item state, trajectory, item pages, errors. */
import './support/env.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handler as appendHandler } from '../../functions/append.ts';
import { handler as foldHandler } from '../../functions/fold.ts';
import { logCache } from '../../functions/shared/logs.ts';
import { createBatch, ctx, freshFileRoot, stepBatch, thrown } from './support/fixtures.ts';

const append = appendHandler as unknown as (event: unknown, context: ReturnType<typeof ctx>) => Promise<any>;
const fold = foldHandler as unknown as (event: unknown, context: ReturnType<typeof ctx>) => Promise<any>;
const at = { pipeline: 'p', experiment: 'e' };

beforeAll(async () => {
  freshFileRoot();
  await append(
    {
      ...at,
      batches: [
        createBatch('i1'),
        stepBatch('i1', 1, { append: { messages: [{ role: 'assistant', content: 'hi' }] } }),
        createBatch('i2'),
        { itemId: 'i2', runId: 'r1', step: { name: 'step1', index: 1 }, failed: { errorType: 'RateLimitError', traceback: 'tb' } },
        createBatch('i3'),
        { itemId: 'i3', runId: 'r1', step: { name: 'step1', index: 1 }, terminal: 'completed' },
        createBatch('i4', { set: { big: { $int: '9007199254740993' }, image: { $blob: Buffer.from('png').toString('base64') } } }),
      ],
    },
    ctx(),
  );
});
afterAll(async () => {
  await logCache.closeAll();
});

describe('fold handler', () => {
  it('returns the item state of docs/contract.md', async () => {
    const s = await fold({ ...at, itemId: 'i1' }, ctx());
    expect(s).toMatchObject({
      itemId: 'i1',
      rootItemId: 'i1',
      status: 'in_progress',
      fields: { prompt: 'about i1', out1: 'result 1 of i1', messages: [{ role: 'assistant', content: 'hi' }] },
      cursor: { stepName: 'step1', stepIndex: 1, attempt: 1 },
      failures: [],
      violations: [],
    });
    const failed = await fold({ ...at, itemId: 'i2' }, ctx());
    expect(failed.status).toBe('failed');
    expect(failed.failures).toEqual([expect.objectContaining({ errorType: 'RateLimitError', stepName: 'step1', attempt: 1 })]);
    const big = await fold({ ...at, itemId: 'i4' }, ctx());
    expect(big.fields.big).toEqual({ $int: '9007199254740993' });
    expect(big.fields.image).toEqual({ $blobRef: expect.objectContaining({ size: 3 }) });
  });

  it('returns the trajectory in item_seq order, without blob bytes', async () => {
    const t = await fold({ ...at, itemId: 'i4', trajectory: true }, ctx());
    expect(Array.isArray(t)).toBe(true);
    expect(t.map((e: { itemSeq: number }) => e.itemSeq)).toEqual(t.map((_: unknown, i: number) => i + 1));
    expect(t[0]).toMatchObject({ eventType: 'ITEM_CREATED', itemId: 'i4', runId: 'r1' });
    const image = t.find((e: { fieldName?: string }) => e.fieldName === 'image');
    expect(image.value).toEqual({ $blobRef: expect.objectContaining({ size: 3 }) });
    expect(JSON.stringify(t)).not.toContain(Buffer.from('png').toString('base64'));
    // trajectory: false is a plain fold
    expect((await fold({ ...at, itemId: 'i4', trajectory: false }, ctx())).itemId).toBe('i4');
  });

  it('pages items, filtered by status', async () => {
    expect((await fold({ ...at }, ctx())).items.map((i: { itemId: string }) => i.itemId)).toEqual(['i1', 'i2', 'i3', 'i4']);
    const p1 = await fold({ ...at, limit: 3 }, ctx());
    expect(p1.items.map((i: { itemId: string }) => i.itemId)).toEqual(['i1', 'i2', 'i3']);
    expect(p1.next).toBe('i3');
    const p2 = await fold({ ...at, limit: 3, after: p1.next }, ctx());
    expect(p2).toEqual({ items: [expect.objectContaining({ itemId: 'i4', status: 'in_progress', lastSeq: expect.any(Number) })] });
    const done = await fold({ ...at, status: 'completed' }, ctx());
    expect(done.items).toEqual([expect.objectContaining({ itemId: 'i3', status: 'completed', cursor: expect.objectContaining({ stepIndex: 1 }) })]);
  });

  it('fails with NotFoundError for an unknown item and InvalidInputError for bad requests', async () => {
    expect((await thrown(fold({ ...at, itemId: 'nope' }, ctx()))).name).toBe('NotFoundError');
    expect((await thrown(fold({ ...at, itemId: 'nope', trajectory: true }, ctx()))).name).toBe('NotFoundError');
    for (const [event, field] of [
      [{ ...at, status: 'done' }, 'event.status'],
      [{ ...at, limit: 0 }, 'event.limit'],
      [{ ...at, itemId: 'i1', status: 'failed' }, 'event'],
      [{ ...at, trajectory: true }, 'event.itemId'],
      [{ ...at, itemId: '' }, 'event.itemId'],
      [{ pipeline: 'p' }, 'event.experiment'],
      [null, 'event'],
    ] as const) {
      const err = await thrown(fold(event, ctx()));
      expect(err.name, JSON.stringify(event)).toBe('InvalidInputError');
      expect(err.field, JSON.stringify(event)).toBe(field);
    }
  });
});
