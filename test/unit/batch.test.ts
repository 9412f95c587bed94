import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseBatch, parseBatches, toRows, checkpointContent } from '../../lib/batch.ts';
import { CODEC_VERSION, FIELD_TYPES } from '../../lib/codec.ts';
import { InvalidInputError } from '../../lib/errors.ts';
import { eventId } from '../../lib/ids.ts';
import { SCHEMA_VERSION, type PreparedBatch } from '../../lib/types.ts';

const HEX32 = /^[0-9a-f]{32}$/;
const blob = randomBytes(257);

/** The example batch of docs/contract.md (without `failed`, which would suppress STEP_COMPLETED). */
function example(): Record<string, unknown> {
  return {
    itemId: 'doc-17',
    runId: 'run-42',
    create: { rootItemId: 'doc-1', parentItemId: 'doc-1' },
    step: { name: 'generate', index: 2, instanceId: 'generate', iteration: 0 },
    attempt: 1,
    set: { answer: '42', score: 0.8, n: 3, ok: true, meta: { k: [1, 2] }, image: { $blob: blob.toString('base64') } },
    append: { messages: [{ role: 'assistant', content: 'hi' }, { content: 'second', role: 'user' }] },
    complete: true,
    terminal: 'completed',
    queryTags: { model: 'm-7b', temp: 0.2 },
  };
}

/** The same JSON with every object's keys in reverse order. */
function reverseKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reverseKeys);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reverseKeys(x)]));
  return v;
}

function rejected(input: unknown, path?: string): InvalidInputError {
  try {
    path === undefined ? parseBatch(input) : parseBatch(input, path);
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidInputError);
    const err = e as InvalidInputError;
    expect(err.message.startsWith(`${err.field}: `)).toBe(true);
    return err;
  }
  throw new Error(`expected ${JSON.stringify(input)} to be rejected`);
}

const base = { itemId: 'i', runId: 'r' };

/** The seed's schema table, in order. */
const SEED_COLUMNS = (
  'event_id item_id root_item_id parent_item_id item_seq checkpoint_id event_type step_name step_index ' +
  'step_instance_id iteration attempt run_id writer_epoch field_name field_type codec_version value_kind ' +
  'value_i64 value_f64 value_bool value_str value_json value_blob payload_size payload_checksum ' +
  'query_tags_json terminal error_type error_dump traceback event_ts schema_version'
).split(' ');
const types = (b: PreparedBatch) => b.events.map((e) => e.eventType);

describe('parseBatch: events', () => {
  it('emits the events of the contract example in the documented order', () => {
    const b = parseBatch(example());
    expect(types(b)).toEqual([
      'ITEM_CREATED',
      ...Array(6).fill('FIELD_SET'),
      'FIELD_APPEND',
      'FIELD_APPEND',
      'STEP_COMPLETED',
      'TERMINAL',
    ]);
    expect(b.events.filter((e) => e.eventType === 'FIELD_SET').map((e) => e.fieldName)).toEqual(['answer', 'image', 'meta', 'n', 'ok', 'score']);
    expect(b.events.filter((e) => e.eventType === 'FIELD_APPEND').map((e) => e.value)).toEqual([
      { kind: 'json', json: '{"content":"hi","role":"assistant"}' },
      { kind: 'json', json: '{"content":"second","role":"user"}' },
    ]);
    expect(b.events.at(-1)).toMatchObject({ eventType: 'TERMINAL', terminal: 'completed' });
    expect(b.create).toEqual({ rootItemId: 'doc-1', parentItemId: 'doc-1', ifMissing: false });
    expect(b.step).toEqual({ name: 'generate', index: 2, instanceId: 'generate', iteration: 0 });
    expect(b.queryTagsJson).toBe('{"model":"m-7b","temp":0.2}');
    expect(b.checkpointId).toMatch(HEX32);
    b.events.forEach((e, i) => expect(e.eventId).toBe(eventId(b.checkpointId, i)));
    const image = b.events.find((e) => e.fieldName === 'image')!.value!;
    expect(image).toMatchObject({ kind: 'blob', size: 257, checksum: `sha256:${createHash('sha256').update(blob).digest('hex')}` });
  });

  it('sorts append fields and keeps each field\'s elements in order', () => {
    const b = parseBatch({ ...base, append: { z: [3, 1, 2], a: ['x', 'y'] } });
    expect(b.events.map((e) => [e.fieldName, e.value])).toEqual([
      ['a', { kind: 'str', str: 'x' }],
      ['a', { kind: 'str', str: 'y' }],
      ['z', { kind: 'int', i64: 3n }],
      ['z', { kind: 'int', i64: 1n }],
      ['z', { kind: 'int', i64: 2n }],
    ]);
  });

  it('applies defaults: rootItemId = itemId, parent null, attempt 1, instanceId null (not the name)', () => {
    const b = parseBatch({ ...base, create: {}, step: { name: 'gen' } });
    expect(b.create).toEqual({ rootItemId: 'i', parentItemId: null, ifMissing: false });
    expect(b.step).toEqual({ name: 'gen', index: null, instanceId: null, iteration: null });
    expect(b.attempt).toBe(1);
    expect(types(b)).toEqual(['ITEM_CREATED', 'STEP_COMPLETED']);
  });

  it('emits STEP_COMPLETED only for a step that is not failed and not complete:false', () => {
    expect(types(parseBatch({ ...base, step: { name: 's' } }))).toEqual(['STEP_COMPLETED']);
    expect(types(parseBatch({ ...base, step: { name: 's' }, complete: true }))).toEqual(['STEP_COMPLETED']);
    expect(types(parseBatch({ ...base, step: { name: 's' }, complete: false, set: { x: 1 } }))).toEqual(['FIELD_SET']);
    expect(types(parseBatch({ ...base, step: { name: 's' }, failed: { errorType: 'E' } }))).toEqual(['FAILED']);
    expect(types(parseBatch({ ...base, step: { name: 's' }, complete: true, failed: { errorType: 'E' } }))).toEqual(['FAILED']);
    expect(types(parseBatch({ ...base, failed: { errorType: 'E' }, terminal: 'filtered' }))).toEqual(['FAILED', 'TERMINAL']);
    expect(types(parseBatch({ ...base, terminal: 'filtered' }))).toEqual(['TERMINAL']);
  });

  it('keeps failure details', () => {
    const b = parseBatch({ ...base, failed: { errorType: 'RateLimitError', errorDump: '{"x":1}', traceback: 'line 1\nline 2' } });
    expect(b.events[0]!.failure).toEqual({ errorType: 'RateLimitError', errorDump: '{"x":1}', traceback: 'line 1\nline 2' });
    expect(parseBatch({ ...base, failed: { errorType: 'E' } }).events[0]!.failure).toEqual({ errorType: 'E' });
  });

  it('treats null optional members as absent (same ids as leaving them out)', () => {
    const plain = parseBatch({ ...base, step: { name: 's' }, set: { a: 1 } });
    const nulls = parseBatch({
      ...base,
      step: { name: 's', index: null, instanceId: null, iteration: null },
      set: { a: 1 },
      create: null,
      attempt: null,
      append: null,
      complete: null,
      failed: null,
      terminal: null,
      queryTags: null,
    });
    expect(nulls).toEqual(plain);
  });

  it('accepts a field called __proto__ as an ordinary field', () => {
    const b = parseBatch(JSON.parse('{"itemId":"i","runId":"r","set":{"__proto__":1,"b":2}}'));
    expect(b.events.map((e) => e.fieldName)).toEqual(['__proto__', 'b']);
  });
});

describe('parseBatch: deterministic ids', () => {
  it('gives the same ids for the same batch with keys in any order', () => {
    const a = parseBatch(example());
    const b = parseBatch(reverseKeys(example()));
    expect(b.checkpointId).toBe(a.checkpointId);
    expect(b.events.map((e) => e.eventId)).toEqual(a.events.map((e) => e.eventId));
    expect(b).toEqual(a);
  });

  it('gives a different checkpoint id for any change that shapes the events', () => {
    const a = parseBatch(example()).checkpointId;
    const variants: Record<string, unknown>[] = [
      { attempt: 2 },
      { runId: 'run-43' },
      { itemId: 'doc-18' },
      { create: { rootItemId: 'doc-1' } },
      { step: { name: 'generate', index: 3, instanceId: 'generate', iteration: 0 } },
      { step: { name: 'generate', index: 2, instanceId: 'generate', iteration: 1 } },
      { step: { name: 'generate', index: 2, iteration: 0 } },
      { complete: false },
      { terminal: 'filtered' },
      { queryTags: { model: 'm-8b', temp: 0.2 } },
      { set: { ...(example().set as object), n: 4 } },
      { set: { ...(example().set as object), n: '3' } },
      { set: { ...(example().set as object), n: 3.5 } },
      { set: { ...(example().set as object), image: { $blob: randomBytes(257).toString('base64') } } },
      { append: { messages: [{ role: 'assistant', content: 'hi' }] } },
      { failed: { errorType: 'E' } },
    ];
    const ids = variants.map((v) => parseBatch({ ...example(), ...v }).checkpointId);
    for (const id of ids) expect(id).not.toBe(a);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('distinguishes set from append and the order of appended elements', () => {
    const s = parseBatch({ ...base, set: { m: 1 } }).checkpointId;
    const p = parseBatch({ ...base, append: { m: [1] } }).checkpointId;
    const ab = parseBatch({ ...base, append: { m: [1, 2] } }).checkpointId;
    const ba = parseBatch({ ...base, append: { m: [2, 1] } }).checkpointId;
    expect(new Set([s, p, ab, ba]).size).toBe(4);
  });

  it('hashes blobs by checksum and size, not by how they were spelt', () => {
    const viaBase64 = parseBatch({ ...base, set: { b: { $blob: blob.toString('base64') } } });
    const viaBytes = parseBatch({ ...base, set: { b: new Uint8Array(blob) } });
    expect(viaBytes.checkpointId).toBe(viaBase64.checkpointId);
    const content = checkpointContent(viaBase64, viaBase64.events);
    expect(content).not.toContain(blob.toString('base64'));
    expect(content).toContain(createHash('sha256').update(blob).digest('hex'));
  });

  it('gives the same ids to the same int written as a number or as {"$int"}', () => {
    expect(parseBatch({ ...base, set: { n: 5 } }).checkpointId).toBe(parseBatch({ ...base, set: { n: { $int: '5' } } }).checkpointId);
  });
});

describe('parseBatch: errors name the field', () => {
  const cases: [string, unknown, string][] = [
    ['not an object', 5, 'batch'],
    ['null', null, 'batch'],
    ['an array', [], 'batch'],
    ['missing itemId', { runId: 'r', set: { a: 1 } }, 'batch.itemId'],
    ['missing runId', { itemId: 'i', set: { a: 1 } }, 'batch.runId'],
    ['empty itemId', { ...base, itemId: '' }, 'batch.itemId'],
    ['long itemId', { ...base, itemId: 'x'.repeat(513) }, 'batch.itemId'],
    ['control char in runId', { ...base, runId: 'r\u0007' }, 'batch.runId'],
    ['numeric itemId', { ...base, itemId: 17 }, 'batch.itemId'],
    ['unknown top-level key', { ...base, set: { a: 1 }, stpe: { name: 's' } }, 'batch.stpe'],
    ['unknown step key', { ...base, step: { name: 's', idx: 1 } }, 'batch.step.idx'],
    ['unknown create key', { ...base, create: { root: 'x' } }, 'batch.create.root'],
    ['unknown failed key', { ...base, failed: { errorType: 'E', tb: 'x' } }, 'batch.failed.tb'],
    ['step without name', { ...base, step: { index: 1 } }, 'batch.step.name'],
    ['negative step index', { ...base, step: { name: 's', index: -1 } }, 'batch.step.index'],
    ['fractional step index', { ...base, step: { name: 's', index: 1.5 } }, 'batch.step.index'],
    ['unsafe step index', { ...base, step: { name: 's', index: 2 ** 53 } }, 'batch.step.index'],
    ['string iteration', { ...base, step: { name: 's', iteration: '1' } }, 'batch.step.iteration'],
    ['empty instanceId', { ...base, step: { name: 's', instanceId: '' } }, 'batch.step.instanceId'],
    ['attempt 0', { ...base, set: { a: 1 }, attempt: 0 }, 'batch.attempt'],
    ['attempt 2^31', { ...base, set: { a: 1 }, attempt: 2 ** 31 }, 'batch.attempt'],
    ['attempt 1.5', { ...base, set: { a: 1 }, attempt: 1.5 }, 'batch.attempt'],
    ['bad blob', { ...base, set: { image: { $blob: 'not base64!' } } }, 'batch.set.image.$blob'],
    ['null value', { ...base, set: { answer: null } }, 'batch.set.answer'],
    ['huge int', { ...base, set: { n: 2 ** 60 } }, 'batch.set.n'],
    ['odd field name value', { ...base, set: { 'my field': NaN } }, 'batch.set["my field"]'],
    ['set is an array', { ...base, set: [1] }, 'batch.set'],
    ['append not an array', { ...base, append: { messages: 'hi' } }, 'batch.append.messages'],
    ['append empty array', { ...base, append: { messages: [] } }, 'batch.append.messages'],
    ['bad appended element', { ...base, append: { messages: [1, null] } }, 'batch.append.messages[1]'],
    ['empty field name', { ...base, set: { '': 1 } }, 'batch.set[""]'],
    ['long field name', { ...base, set: { ['f'.repeat(257)]: 1 } }, `batch.set.${'f'.repeat(257)}`],
    ['control char in field name', { ...base, append: { 'a\nb': [1] } }, 'batch.append["a\\nb"]'],
    ['complete without step', { ...base, set: { a: 1 }, complete: true }, 'batch.complete'],
    ['complete not boolean', { ...base, step: { name: 's' }, complete: 'yes' }, 'batch.complete'],
    ['failed without errorType', { ...base, failed: { traceback: 'x' } }, 'batch.failed.errorType'],
    ['failed errorDump not a string', { ...base, failed: { errorType: 'E', errorDump: { a: 1 } } }, 'batch.failed.errorDump'],
    ['bad terminal', { ...base, terminal: 'done' }, 'batch.terminal'],
    ['queryTags not an object', { ...base, set: { a: 1 }, queryTags: 'm' }, 'batch.queryTags'],
    ['queryTags with NaN', { ...base, set: { a: 1 }, queryTags: { t: NaN } }, 'batch.queryTags.t'],
    ['no events', { ...base }, 'batch'],
    ['only an incomplete step', { ...base, step: { name: 's' }, complete: false }, 'batch'],
    ['empty set and append', { ...base, set: {}, append: {} }, 'batch'],
  ];
  it.each(cases)('%s -> %s', (_name, input, field) => {
    expect(rejected(input).field).toBe(field);
  });

  it('prefers naming an unknown key over the missing key it probably meant', () => {
    const e = rejected({ itemId: 'i', runID: 'r', set: { a: 1 } });
    expect(e.field).toBe('batch.runID');
    expect(e.message).toContain('unknown key');
    expect(e.message).toContain('runId');
  });

  it('explains the fix for big integers and empty batches', () => {
    expect(rejected({ ...base, set: { n: 2 ** 60 } }).message).toContain('{"$int"');
    expect(rejected({ ...base }).message).toMatch(/no events/);
  });

  it('accepts the limits themselves', () => {
    expect(parseBatch({ ...base, itemId: 'x'.repeat(512), set: { ['f'.repeat(256)]: 1 }, attempt: 2 ** 31 - 1 }).attempt).toBe(2 ** 31 - 1);
    expect(parseBatch({ ...base, step: { name: 's', index: 0, iteration: Number.MAX_SAFE_INTEGER } }).step!.iteration).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('uses the given path prefix', () => {
    expect(rejected({ ...base, step: { name: 's', index: -1 } }, 'batches[3]').field).toBe('batches[3].step.index');
  });
});

describe('parseBatches', () => {
  it('parses every batch in order', () => {
    const out = parseBatches([{ ...base, create: {} }, { ...base, set: { a: 1 } }]);
    expect(out.map(types)).toEqual([['ITEM_CREATED'], ['FIELD_SET']]);
  });

  it('names the failing batch by index', () => {
    try {
      parseBatches([{ ...base, create: {} }, { ...base, set: { x: null } }]);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(InvalidInputError);
      expect((e as InvalidInputError).field).toBe('batches[1].set.x');
      expect((e as InvalidInputError).message).toContain('batches[1].set.x');
    }
  });

  it('rejects a non-array', () => {
    expect(() => parseBatches({ ...base } as unknown)).toThrow(InvalidInputError);
    expect(parseBatches([])).toEqual([]);
  });
});

describe('toRows', () => {
  const opts = { firstSeq: 10, writerEpoch: 'epoch-3', eventTsUs: 1_700_000_000_123_456 };

  it('numbers events from firstSeq and fills the common columns on every row', () => {
    const b = parseBatch(example());
    const rows = toRows(b, opts);
    expect(rows.map((r) => r.item_seq)).toEqual(b.events.map((_, i) => 10 + i));
    expect(rows.map((r) => r.event_id)).toEqual(b.events.map((e) => e.eventId));
    expect(rows.map((r) => r.event_type)).toEqual(types(b));
    for (const r of rows) {
      expect(r).toMatchObject({
        item_id: 'doc-17',
        root_item_id: 'doc-1',
        parent_item_id: 'doc-1',
        checkpoint_id: b.checkpointId,
        step_name: 'generate',
        step_index: 2,
        step_instance_id: 'generate',
        iteration: 0,
        attempt: 1,
        run_id: 'run-42',
        writer_epoch: 'epoch-3',
        query_tags_json: '{"model":"m-7b","temp":0.2}',
        event_ts: opts.eventTsUs,
        schema_version: SCHEMA_VERSION,
      });
      expect(Object.keys(r)).toEqual(SEED_COLUMNS);
    }
  });

  it('sets codec columns only on field events, with the value in its kind\'s column', () => {
    const rows = toRows(parseBatch(example()), opts);
    for (const r of rows) {
      const isField = r.event_type === 'FIELD_SET' || r.event_type === 'FIELD_APPEND';
      expect(r.field_name !== null).toBe(isField);
      expect(r.field_type !== null).toBe(isField);
      expect(r.codec_version !== null).toBe(isField);
      expect(r.value_kind !== null).toBe(isField);
      if (isField) {
        expect(r.field_type).toBe(FIELD_TYPES[r.value_kind!]);
        expect(r.codec_version).toBe(CODEC_VERSION);
      }
    }
    const by = (f: string) => rows.find((r) => r.field_name === f)!;
    expect(by('n')).toMatchObject({ value_kind: 'int', value_i64: 3n, value_f64: null });
    expect(by('score')).toMatchObject({ value_kind: 'float', value_f64: 0.8, value_i64: null });
    expect(by('ok')).toMatchObject({ value_kind: 'bool', value_bool: true });
    expect(by('answer')).toMatchObject({ value_kind: 'str', value_str: '42' });
    expect(by('meta')).toMatchObject({ value_kind: 'json', value_json: '{"k":[1,2]}' });
    const img = by('image');
    expect(img).toMatchObject({ value_kind: 'blob', payload_size: 257, payload_checksum: `sha256:${createHash('sha256').update(blob).digest('hex')}` });
    expect(Buffer.from(img.value_blob!).equals(blob)).toBe(true);
    expect(rows.find((r) => r.event_type === 'TERMINAL')!.terminal).toBe('completed');
    expect(rows.filter((r) => r.terminal !== null)).toHaveLength(1);
  });

  it('puts failure details on the FAILED row only', () => {
    const rows = toRows(parseBatch({ ...base, step: { name: 's' }, set: { a: 1 }, failed: { errorType: 'E', errorDump: 'd', traceback: 't' } }), {
      ...opts,
      rootItemId: 'root',
      parentItemId: 'parent',
    });
    expect(rows.map((r) => [r.event_type, r.error_type, r.error_dump, r.traceback])).toEqual([
      ['FIELD_SET', null, null, null],
      ['FAILED', 'E', 'd', 't'],
    ]);
    expect(rows.every((r) => r.root_item_id === 'root' && r.parent_item_id === 'parent' && r.step_name === 's')).toBe(true);
  });

  it('takes root/parent from the batch\'s own create over the options', () => {
    const rows = toRows(parseBatch({ ...base, create: {} }), { ...opts, rootItemId: 'other', parentItemId: 'other' });
    expect(rows[0]).toMatchObject({ root_item_id: 'i', parent_item_id: null });
  });

  it('needs the root for a batch that does not create the item', () => {
    expect(() => toRows(parseBatch({ ...base, set: { a: 1 } }), opts)).toThrow(/rootItemId/);
    const rows = toRows(parseBatch({ ...base, set: { a: 1 } }), { ...opts, rootItemId: 'r0' });
    expect(rows[0]).toMatchObject({ root_item_id: 'r0', parent_item_id: null, step_name: null, step_index: null, query_tags_json: null });
  });
});
