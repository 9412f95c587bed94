/**
 * The log `search` is tested on (test/search.test.ts, test/search.servers.test.ts): items whose
 * text sits in string values, JSON string values, error dumps and tracebacks, next to ids,
 * numbers and JSON keys that must never match; and the queries with the events they must find.
 */
import type { SearchOptions } from '../../lib/api.ts';
import type { openLog } from '../../lib/index.ts';
import type { EventType } from '../../lib/types.ts';

type Log = Awaited<ReturnType<typeof openLog>>;

export const SEARCH_BATCHES: Record<string, unknown>[] = [
  { itemId: 'recovered', runId: 'r1', create: {}, step: { name: 'prompt', index: 0 }, set: { prompt: 'Translate the Invoice into German' } },
  {
    itemId: 'recovered',
    runId: 'r1',
    step: { name: 'invoke', index: 1 },
    failed: {
      errorType: 'RateLimitError',
      errorDump: '429 Too Many Requests: quota exhausted for the model',
      traceback: 'Traceback (most recent call last):\n  File "gen.py", line 12, in invoke_model\nRateLimitError: slow down',
    },
  },
  { itemId: 'recovered', runId: 'r1', step: { name: 'invoke', index: 1 }, attempt: 2, set: { answer: 'Die Rechnung' }, terminal: 'completed' },
  {
    itemId: 'numbers',
    runId: 'r1',
    create: {},
    step: { name: 'prompt', index: 0 },
    set: { count: 4242, score: 0.25, flag: true, meta: { quota: 77, label: 'plain words' }, big: { $int: '9007199254740993' } },
  },
  {
    itemId: 'chat',
    runId: 'r1',
    create: {},
    step: { name: 'prompt', index: 0 },
    set: { chat: [{ role: 'user', content: 'first line\nescaped word\u001bcontrol word' }], tags: ['Invoice', 'urgent'] },
    append: { log: ['invoice sent'] },
  },
  { itemId: 'zebra-item', runId: 'r1', create: {}, step: { name: 'prompt', index: 0 }, set: { note: 'nothing special', image: { $blob: Buffer.from('bytes').toString('base64') } } },
];

/** An expected hit: item, event type, and the field (value events) or error type (failures). */
type Expect = [itemId: string, eventType: EventType, fieldOrError: string];

export const SEARCH_CASES: Array<{ what: string; text: string; options?: SearchOptions; hits: Expect[] }> = [
  { what: 'a word of a string value, any case', text: 'INVOICE', hits: [['chat', 'FIELD_SET', 'tags'], ['chat', 'FIELD_APPEND', 'log'], ['recovered', 'FIELD_SET', 'prompt']] },
  { what: "a recovered item's old failure (error dump)", text: 'quota exhausted', hits: [['recovered', 'FAILED', 'RateLimitError']] },
  { what: 'a traceback', text: 'slow down', hits: [['recovered', 'FAILED', 'RateLimitError']] },
  { what: 'words of two different texts (no match)', text: 'quota slow', hits: [] },
  { what: 'a JSON string value', text: 'plain words', hits: [['numbers', 'FIELD_SET', 'meta']] },
  { what: 'a JSON string value after an escaped newline', text: 'escaped', hits: [['chat', 'FIELD_SET', 'chat']] },
  { what: 'a JSON string value after an escaped control character', text: 'control', hits: [['chat', 'FIELD_SET', 'chat']] },
  { what: 'a JSON string value that is a single word', text: 'user', hits: [['chat', 'FIELD_SET', 'chat']] },
  { what: 'a JSON key (no match)', text: 'role', hits: [] },
  { what: 'a JSON key beside a string value holding other words (no match)', text: 'label', hits: [] },
  { what: 'a JSON number (no match)', text: '77', hits: [] },
  { what: 'an int value (no match)', text: '4242', hits: [] },
  { what: 'a big int value (no match)', text: '9007199254740993', hits: [] },
  { what: 'a float value (no match)', text: '0.25', hits: [] },
  { what: 'a part of an item id (no match)', text: 'zebra', hits: [] },
  { what: 'a field and step name (no match)', text: 'prompt', hits: [] },
  { what: 'a run id (no match)', text: 'r1', hits: [] },
  { what: 'an error type alone (no match: not a searched text)', text: 'TooManyRequestsError', hits: [] },
  { what: 'fields narrow', text: 'invoice', options: { fields: ['tags', 'prompt'] }, hits: [['chat', 'FIELD_SET', 'tags'], ['recovered', 'FIELD_SET', 'prompt']] },
  { what: 'event types narrow', text: 'invoice', options: { eventTypes: ['FIELD_APPEND'] }, hits: [['chat', 'FIELD_APPEND', 'log']] },
  { what: 'failures only', text: 'quota', options: { eventTypes: ['FAILED'] }, hits: [['recovered', 'FAILED', 'RateLimitError']] },
  { what: 'fields leave failures out', text: 'quota', options: { fields: ['prompt'] }, hits: [] },
];

/**
 * What `search` returned, as (item, type, field or error type, seq) with each hit's seq checked
 * against the item's trajectory: the event there has that type and field or error type.
 */
export async function describeHits(log: Log, text: string, options?: SearchOptions): Promise<Expect[]> {
  const hits = await log.search(text, options);
  const out: Expect[] = [];
  for (const h of hits) {
    const ev = (await log.trajectory(h.itemId)).find((e) => e.itemSeq === h.seq);
    const label = h.eventType === 'FAILED' ? h.errorType : h.field;
    if (!ev || ev.eventType !== h.eventType || (h.eventType === 'FAILED' ? ev.errorType : ev.fieldName) !== label) {
      throw new Error(`hit ${JSON.stringify(h)} is not the event at that seq in the trajectory (${JSON.stringify(ev)})`);
    }
    out.push([h.itemId, h.eventType, label!]);
  }
  return out;
}

/** Ids and hashes the log holds, none of which a search may match. */
export async function storedIds(log: Log): Promise<string[]> {
  const ids: string[] = [];
  for (const item of ['recovered', 'chat', 'zebra-item']) {
    for (const e of await log.trajectory(item)) {
      ids.push(e.eventId, e.checkpointId, e.writerEpoch);
      const v = e.value as { $blobRef?: { checksum: string } } | undefined;
      if (v?.$blobRef) ids.push(v.$blobRef.checksum.replace(/^sha256:/, ''));
    }
  }
  return [...new Set(ids)];
}
