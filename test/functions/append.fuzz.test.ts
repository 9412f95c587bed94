/**
 * Fuzz the append handler's SQS path: whatever the record bodies are, the handler answers with
 * batchItemFailures naming only records of the event (never throws, never fails a valid one).
 */
import './support/env.ts';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { handler as appendHandler } from '../../functions/append.ts';
import { sqsEvent } from '../../functions/shared/events.ts';
import { logCache } from '../../functions/shared/logs.ts';
import { ctx, freshFileRoot, uniq } from './support/fixtures.ts';

const append = appendHandler as unknown as (event: unknown, context: ReturnType<typeof ctx>) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>;

beforeAll(() => {
  freshFileRoot();
});
afterAll(async () => {
  await logCache.closeAll();
});

const junkBody = fc.oneof(
  fc.string(),
  fc.json(),
  fc.record({ pipeline: fc.constant('p'), experiment: fc.constant('fz'), itemId: fc.string(), runId: fc.string() }, { requiredKeys: [] }).map((o) => JSON.stringify(o)),
  fc.record({ pipeline: fc.constant('p'), experiment: fc.constant('fz'), itemId: fc.constant('x'), runId: fc.constant('r'), set: fc.dictionary(fc.string(), fc.jsonValue()) }).map((o) => JSON.stringify(o)),
);

it('answers any mix of junk and one valid record with failures naming exactly the junk', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(junkBody, { minLength: 1, maxLength: 6 }), async (bodies) => {
      const valid = { pipeline: 'p', experiment: 'fz', itemId: uniq('ok'), runId: 'r', create: {}, step: { name: 'load', index: 0 } };
      const event = sqsEvent([...bodies.map((b) => b), JSON.stringify(valid)]);
      // sqsEvent JSON-encodes non-strings; our bodies are strings already, sent as they are
      const res = await append(event, ctx('append'));
      const ids = new Set(event.Records.map((r) => r.messageId));
      for (const f of res.batchItemFailures) expect(ids.has(f.itemIdentifier)).toBe(true);
      const validId = event.Records.at(-1)!.messageId;
      expect(res.batchItemFailures.map((f) => f.itemIdentifier)).not.toContain(validId);
    }),
    { numRuns: 25 },
  );
});
