import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseBatch, toRows } from '../../lib/batch.ts';
import { blobChecksum } from '../../lib/codec.ts';
import { CorruptError, NotFoundError } from '../../lib/errors.ts';
import { dedupe, foldItem, formatEventTs, summarize, trajectory } from '../../lib/fold.ts';
import type { EventRow, ItemState } from '../../lib/types.ts';

const T0 = 1_700_000_000_000_000;

/**
 * A tiny in-memory writer: seqs per item, root/parent from the item's creation, and (like the
 * real writer) a batch it already holds is acknowledged again instead of written twice.
 */
class Log {
  rows: EventRow[] = [];
  private items = new Map<string, { lastSeq: number; root: string; parent: string | null }>();
  private ts = T0;

  write(input: Record<string, unknown>, epoch = 'w1'): EventRow[] {
    const b = parseBatch({ runId: 'run', ...input });
    const existing = this.rows.filter((r) => r.checkpoint_id === b.checkpointId);
    if (existing.length > 0) return existing;
    const item = this.items.get(b.itemId);
    const rows = toRows(b, {
      firstSeq: (item?.lastSeq ?? 0) + 1,
      writerEpoch: epoch,
      eventTsUs: (this.ts += 1000),
      ...(item ? { rootItemId: item.root, parentItemId: item.parent } : { rootItemId: b.itemId }),
    });
    this.items.set(b.itemId, {
      lastSeq: rows.at(-1)!.item_seq,
      root: b.create?.rootItemId ?? item?.root ?? b.itemId,
      parent: b.create ? b.create.parentItemId : (item?.parent ?? null),
    });
    // Fold reads light rows: value_blob is projected out.
    const light = rows.map((r) => ({ ...r, value_blob: null }));
    this.rows.push(...light);
    return light;
  }
}

function shuffled<T>(a: readonly T[], seed = 42): T[] {
  const out = a.slice();
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe('foldItem', () => {
  it('folds the contract example into the contract state', () => {
    const log = new Log();
    const bytes = randomBytes(1234);
    log.write({ itemId: 'doc-17', create: { rootItemId: 'doc-1', parentItemId: 'doc-1' } });
    const [, ...stepRows] = log.write({
      itemId: 'doc-17',
      step: { name: 'generate', index: 2, instanceId: 'generate', iteration: 0 },
      set: { answer: '42', score: 0.8, n: 3, ok: true, meta: { k: [1, 2] }, image: { $blob: bytes.toString('base64') } },
      append: { messages: [{ role: 'assistant', content: 'hi' }] },
    });
    const s = foldItem('doc-17', log.rows);
    const imageRow = log.rows.find((r) => r.field_name === 'image')!;
    const done = log.rows.find((r) => r.event_type === 'STEP_COMPLETED')!;
    expect(stepRows.length).toBeGreaterThan(0);
    expect(s).toEqual<ItemState>({
      itemId: 'doc-17',
      rootItemId: 'doc-1',
      parentItemId: 'doc-1',
      status: 'in_progress',
      fields: {
        answer: '42',
        score: 0.8,
        n: 3,
        ok: true,
        meta: { k: [1, 2] },
        image: { $blobRef: { eventId: imageRow.event_id, size: 1234, checksum: blobChecksum(bytes) } },
        messages: [{ role: 'assistant', content: 'hi' }],
      },
      cursor: { stepName: 'generate', stepIndex: 2, stepInstanceId: 'generate', iteration: 0, attempt: 1, checkpointId: done.checkpoint_id },
      lastSeq: 9,
      attempts: 1,
      failures: [],
      violations: [],
    });
    expect(JSON.stringify(s)).not.toContain(bytes.toString('base64').slice(0, 40));
  });

  it('replaces on FIELD_SET and accumulates FIELD_APPEND in order across batches', () => {
    const log = new Log();
    log.write({ itemId: 'a', create: {}, set: { x: 1 }, append: { m: ['a', 'b'] } });
    log.write({ itemId: 'a', set: { x: 2 }, append: { m: ['c'] } });
    log.write({ itemId: 'a', append: { m: [{ d: 1 }, ['e']] } });
    const s = foldItem('a', log.rows);
    expect(s.fields).toEqual({ x: 2, m: ['a', 'b', 'c', { d: 1 }, ['e']] });
  });

  it('appends to a set json array, wraps a scalar, and a later set replaces the list', () => {
    const log = new Log();
    log.write({ itemId: 'a', create: {}, set: { arr: [1, 2], sc: 'first' } });
    log.write({ itemId: 'a', append: { arr: [3], sc: ['second'] } });
    expect(foldItem('a', log.rows).fields).toEqual({ arr: [1, 2, 3], sc: ['first', 'second'] });
    log.write({ itemId: 'a', set: { sc: { $int: '9223372036854775807' } } });
    expect(foldItem('a', log.rows).fields.sc).toEqual({ $int: '9223372036854775807' });
  });

  it('keeps int64 values exact through batch -> rows -> fold', () => {
    const log = new Log();
    log.write({
      itemId: 'a',
      create: {},
      set: {
        max: { $int: '9223372036854775807' },
        min: { $int: '-9223372036854775808' },
        above: { $int: '9007199254740993' },
        safe: 9007199254740991,
        neg: -9007199254740991,
      },
    });
    expect(foldItem('a', log.rows).fields).toEqual({
      max: { $int: '9223372036854775807' },
      min: { $int: '-9223372036854775808' },
      above: { $int: '9007199254740993' },
      safe: 9007199254740991,
      neg: -9007199254740991,
    });
  });

  it('tracks failures, retries and the cursor', () => {
    const log = new Log();
    log.write({ itemId: 'a', create: {} });
    const [gen] = log.write({ itemId: 'a', step: { name: 'gen', index: 0 } });
    log.write({ itemId: 'a', step: { name: 'judge', index: 1 }, failed: { errorType: 'RateLimitError', errorDump: '{}', traceback: 'tb1' } });
    let s = foldItem('a', log.rows);
    expect(s.status).toBe('failed');
    expect(s.cursor).toMatchObject({ stepName: 'gen', stepIndex: 0, attempt: 1, checkpointId: gen!.checkpoint_id });
    expect(s.failures).toEqual([{ stepName: 'judge', attempt: 1, errorType: 'RateLimitError', errorDump: '{}', traceback: 'tb1', seq: 3 }]);

    // Field events of a step that is not complete do not clear the failure.
    log.write({ itemId: 'a', step: { name: 'judge', index: 1 }, attempt: 2, complete: false, set: { partial: true } });
    expect(foldItem('a', log.rows).status).toBe('failed');

    const [judged] = log.write({ itemId: 'a', step: { name: 'judge', index: 1 }, attempt: 2, set: { score: 0.5 } });
    s = foldItem('a', log.rows);
    expect(s.status).toBe('in_progress');
    expect(s.attempts).toBe(2);
    expect(s.cursor).toMatchObject({ stepName: 'judge', stepIndex: 1, attempt: 2, checkpointId: judged!.checkpoint_id });
    expect(s.failures).toHaveLength(1);
    expect(s.lastSeq).toBe(6);
  });

  it('the cursor is the completed step last in step order: a step written late does not move it back', () => {
    const log = new Log();
    log.write({ itemId: 'a', create: {} });
    log.write({ itemId: 'a', step: { name: 'gen', index: 0 } });
    const [judged] = log.write({ itemId: 'a', step: { name: 'judge', index: 2 } });
    // Step 1 delivered late (a retry, a redelivery): written after step 2.
    log.write({ itemId: 'a', step: { name: 'score', index: 1 } });
    expect(foldItem('a', log.rows).cursor).toMatchObject({ stepName: 'judge', stepIndex: 2, checkpointId: judged!.checkpoint_id });
    // The same step again (a later attempt) is the cursor: of equal rank, the latest.
    const [again] = log.write({ itemId: 'a', step: { name: 'judge', index: 2 }, attempt: 2 });
    expect(foldItem('a', log.rows).cursor).toMatchObject({ stepIndex: 2, attempt: 2, checkpointId: again!.checkpoint_id });

    // Steps of a loop (each with an iteration) order by iteration, then by index.
    const loop = new Log();
    loop.write({ itemId: 'l', create: {}, step: { name: 'load', index: 0 } });
    loop.write({ itemId: 'l', step: { name: 'gen', index: 1, iteration: 0 } });
    loop.write({ itemId: 'l', step: { name: 'crit', index: 2, iteration: 0 } });
    loop.write({ itemId: 'l', step: { name: 'gen', index: 1, iteration: 1 } });
    expect(foldItem('l', loop.rows).cursor).toMatchObject({ stepName: 'gen', iteration: 1 });
    loop.write({ itemId: 'l', step: { name: 'crit', index: 2, iteration: 0 }, attempt: 2 });
    expect(foldItem('l', loop.rows).cursor).toMatchObject({ stepName: 'gen', iteration: 1 });
    // A step after the loop, without an iteration, comes after every iteration of it (by index).
    const [fanout] = loop.write({ itemId: 'l', step: { name: 'fanout', index: 3 } });
    expect(foldItem('l', loop.rows).cursor).toMatchObject({ stepName: 'fanout', checkpointId: fanout!.checkpoint_id });
    loop.write({ itemId: 'l', step: { name: 'crit', index: 2, iteration: 1 } });
    loop.write({ itemId: 'l', step: { name: 'load', index: 0 }, attempt: 2 });
    expect(foldItem('l', loop.rows).cursor).toMatchObject({ stepName: 'fanout' });
    // A step without an index ranks below the indexed steps.
    loop.write({ itemId: 'l', step: { name: 'note', iteration: 1 } });
    expect(foldItem('l', loop.rows).cursor).toMatchObject({ stepName: 'fanout' });
    loop.write({ itemId: 'l', step: { name: 'render', index: 4 } });
    expect(foldItem('l', loop.rows).cursor).toMatchObject({ stepName: 'render' });

    // Steps named only (no index, no iteration) order by the log: the last one.
    const named = new Log();
    named.write({ itemId: 'n', create: {} });
    named.write({ itemId: 'n', step: { name: 'second' } });
    named.write({ itemId: 'n', step: { name: 'first' } });
    expect(foldItem('n', named.rows).cursor).toMatchObject({ stepName: 'first' });
  });

  it('reports terminal statuses', () => {
    for (const kind of ['completed', 'filtered'] as const) {
      const log = new Log();
      log.write({ itemId: 'a', create: {}, step: { name: 's' }, failed: { errorType: 'E' } });
      log.write({ itemId: 'a', terminal: kind });
      const s = foldItem('a', log.rows);
      expect(s.status).toBe(kind);
      expect(s.violations).toEqual([]);
      expect(summarize(s)).toEqual({ itemId: 'a', status: kind, cursor: null, lastSeq: 3 });
    }
  });

  it('is unaffected by duplicated and shuffled rows', () => {
    const log = new Log();
    log.write({ itemId: 'a', create: { rootItemId: 'r' } });
    for (let i = 0; i < 20; i++) log.write({ itemId: 'a', step: { name: `s${i}`, index: i }, set: { [`f${i % 3}`]: i }, append: { m: [i, `x${i}`] } });
    const clean = foldItem('a', log.rows);
    const noisy = shuffled([...log.rows, ...log.rows.slice(5, 40).map((r) => ({ ...r, writer_epoch: 'w0' })), ...log.rows.slice(0, 10)]);
    expect(foldItem('a', noisy)).toEqual(clean);
    expect(clean.violations).toEqual([]);
    expect((clean.fields.m as unknown[]).slice(0, 4)).toEqual([0, 'x0', 1, 'x1']);
  });

  it('ignores rows of other items and throws NotFoundError for an unknown item', () => {
    const log = new Log();
    log.write({ itemId: 'a', create: {}, set: { x: 1 } });
    log.write({ itemId: 'b', create: {}, set: { x: 2 } });
    expect(foldItem('b', log.rows).fields).toEqual({ x: 2 });
    expect(() => foldItem('c', log.rows)).toThrow(NotFoundError);
    expect(() => foldItem('a', [])).toThrow(NotFoundError);
  });

  it('reports two different events at one seq as a seq_conflict naming both, still applying both', () => {
    const log = new Log();
    log.write({ itemId: 'a', create: {} });
    const [mine] = log.write({ itemId: 'a', set: { x: 'mine' } }, 'w1');
    // A fenced-out writer that still believed seq 2 was free.
    const theirs = toRows(parseBatch({ itemId: 'a', runId: 'other', set: { y: 'theirs' } }), {
      firstSeq: 2,
      writerEpoch: 'w0',
      eventTsUs: T0,
      rootItemId: 'a',
    }).map((r) => ({ ...r, value_blob: null }));
    const s = foldItem('a', [...log.rows, ...theirs]);
    expect(s.violations).toHaveLength(1);
    const v = s.violations[0]!;
    expect(v.kind).toBe('seq_conflict');
    expect(v.seq).toBe(2);
    expect([...v.eventIds].sort()).toEqual([mine!.event_id, theirs[0]!.event_id].sort());
    expect(v.message).toContain(mine!.event_id);
    expect(v.message).toContain(theirs[0]!.event_id);
    expect(s.fields).toEqual({ x: 'mine', y: 'theirs' });
    expect(s.lastSeq).toBe(2);
  });

  it('reports events after a TERMINAL and before ITEM_CREATED', () => {
    const log = new Log();
    log.write({ itemId: 'a', create: {} });
    const [t] = log.write({ itemId: 'a', terminal: 'filtered' });
    const [late] = log.write({ itemId: 'a', set: { late: 1 } });
    let s = foldItem('a', log.rows);
    expect(s.status).toBe('filtered');
    expect(s.fields).toEqual({ late: 1 });
    expect(s.violations).toEqual([expect.objectContaining({ kind: 'event_after_terminal', seq: 3, eventIds: [late!.event_id, t!.event_id] })]);

    // Events are still applied in order: a second TERMINAL decides the status (and is reported).
    const [t2] = log.write({ itemId: 'a', terminal: 'completed' });
    s = foldItem('a', log.rows);
    expect(s.status).toBe('completed');
    expect(s.violations.at(-1)).toMatchObject({ kind: 'event_after_terminal', seq: 4, eventIds: [t2!.event_id, t!.event_id] });
    log.rows.pop();

    // An item whose ITEM_CREATED sits after other events, and one without ITEM_CREATED at all.
    const moved = log.rows.map((r) => (r.event_type === 'ITEM_CREATED' ? { ...r, item_seq: 10 } : r));
    s = foldItem('a', moved);
    expect(s.violations.map((v) => [v.kind, v.seq])).toEqual([
      ['event_before_create', 2],
      ['event_after_terminal', 3],
      ['event_before_create', 3],
      ['event_after_terminal', 10],
    ]);
    const orphan = foldItem('a', log.rows.filter((r) => r.event_type !== 'ITEM_CREATED'));
    expect(orphan.violations.filter((v) => v.kind === 'event_before_create')).toHaveLength(2);
    expect(orphan.violations[0]!.message).toContain('no ITEM_CREATED');
    expect(orphan.rootItemId).toBe('a');
  });

  it('refuses rows it cannot interpret', () => {
    const log = new Log();
    log.write({ itemId: 'a', create: {}, set: { j: { a: 1 } } });
    const bad = log.rows.map((r) => (r.field_name === 'j' ? { ...r, value_json: '{broken' } : r));
    expect(() => foldItem('a', bad)).toThrow(CorruptError);
    const unknown = log.rows.map((r, i) => (i === 0 ? { ...r, event_type: 'ITEM_DELETED' as never } : r));
    expect(() => foldItem('a', unknown)).toThrow(CorruptError);
  });

  it('equals the fold of the clean log for any duplication and order (property)', () => {
    const op = fc.oneof(
      fc.record({ set: fc.dictionary(fc.constantFrom('a', 'b', 'c'), fc.oneof(fc.integer(), fc.string(), fc.boolean()), { minKeys: 1 }) }),
      fc.record({ append: fc.dictionary(fc.constantFrom('a', 'm'), fc.array(fc.integer(), { minLength: 1, maxLength: 3 }), { minKeys: 1 }) }),
      fc.record({ step: fc.record({ name: fc.constantFrom('x', 'y'), index: fc.nat(3) }), attempt: fc.integer({ min: 1, max: 3 }) }),
      fc.record({ step: fc.record({ name: fc.constant('x') }), failed: fc.record({ errorType: fc.constant('E') }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 12 }), fc.array(fc.nat(), { maxLength: 30 }), fc.integer(), (ops, dupIdx, seed) => {
        const log = new Log();
        log.write({ itemId: 'p', create: {} });
        for (const o of ops) log.write({ itemId: 'p', ...o });
        const clean = foldItem('p', log.rows);
        const dups = dupIdx.map((i) => ({ ...log.rows[i % log.rows.length]!, writer_epoch: 'wz' }));
        expect(foldItem('p', shuffled([...log.rows, ...dups], seed))).toEqual(clean);
        expect(clean.violations).toEqual([]);
        expect(clean.lastSeq).toBe(log.rows.length);
        expect(clean.failures.length).toBe(log.rows.filter((r) => r.event_type === 'FAILED').length);
      }),
      { numRuns: 200 },
    );
  });
});

describe('dedupe', () => {
  it('keeps the copy with the smallest seq, then the smallest writer_epoch, ordered by (seq, event_id)', () => {
    const log = new Log();
    log.write({ itemId: 'a', create: {}, set: { x: 1, y: 2 } });
    const [c, x, y] = log.rows;
    const rows = [
      { ...y!, writer_epoch: 'w9' },
      { ...x!, writer_epoch: 'w5' },
      { ...x!, writer_epoch: 'w2' },
      { ...c!, item_seq: 9, writer_epoch: 'w0' },
      c!,
      { ...y!, item_seq: 2 },
    ];
    const out = dedupe(rows);
    expect(out.map((r) => [r.event_id, r.item_seq, r.writer_epoch])).toEqual(
      [
        [c!.event_id, 1, 'w1'],
        [x!.event_id, 2, 'w2'],
        [y!.event_id, 2, 'w1'],
      ].sort((p, q) => (p[1] as number) - (q[1] as number) || String(p[0]).localeCompare(String(q[0]))),
    );
    expect(rows).toHaveLength(6); // input untouched
  });

  it('finds duplicates at different seqs among many rows (not only neighbours)', () => {
    const log = new Log();
    log.write({ itemId: 'a', create: {} });
    for (let i = 0; i < 200; i++) log.write({ itemId: 'a', append: { m: [i] } });
    const far = { ...log.rows[3]!, item_seq: 5000 };
    const out = dedupe([...log.rows, far]);
    expect(out).toHaveLength(log.rows.length);
    expect(out.find((r) => r.event_id === far.event_id)!.item_seq).toBe(4);
    // Non-hex ids take the general path and give the same answer.
    const named = log.rows.map((r) => ({ ...r, event_id: `ev-${r.item_seq}` }));
    expect(dedupe([...named, { ...named[7]!, item_seq: 9999 }, named[8]!]).map((r) => r.event_id)).toEqual(named.map((r) => r.event_id));
  });
});

describe('trajectory', () => {
  it('lists deduplicated events in seq order with only the set columns, values decoded, no bytes', () => {
    const log = new Log();
    const bytes = randomBytes(64);
    log.write({ itemId: 'a', create: { parentItemId: 'p' } });
    log.write({ itemId: 'a', step: { name: 'gen', index: 1 }, set: { img: { $blob: bytes.toString('base64') }, big: { $int: '-9223372036854775808' } }, queryTags: { model: 'm' } });
    log.write({ itemId: 'a', failed: { errorType: 'E', traceback: 'tb' }, terminal: 'completed' });
    const t = trajectory(shuffled([...log.rows, ...log.rows]));
    expect(t.map((e) => e.itemSeq)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(t.map((e) => e.eventType)).toEqual(['ITEM_CREATED', 'FIELD_SET', 'FIELD_SET', 'STEP_COMPLETED', 'FAILED', 'TERMINAL']);
    expect(t[0]).toEqual({
      eventId: log.rows[0]!.event_id,
      itemId: 'a',
      rootItemId: 'a',
      parentItemId: 'p',
      itemSeq: 1,
      checkpointId: log.rows[0]!.checkpoint_id,
      eventType: 'ITEM_CREATED',
      attempt: 1,
      runId: 'run',
      writerEpoch: 'w1',
      eventTs: formatEventTs(log.rows[0]!.event_ts),
      schemaVersion: 1,
    });
    expect(t[1]).toMatchObject({ fieldName: 'big', valueKind: 'int', value: { $int: '-9223372036854775808' }, stepName: 'gen', stepIndex: 1, queryTags: { model: 'm' }, codecVersion: 1 });
    expect(t[2]).toMatchObject({ fieldName: 'img', valueKind: 'blob', value: { $blobRef: { eventId: log.rows[2]!.event_id, size: 64, checksum: blobChecksum(bytes) } } });
    expect(t[4]).toMatchObject({ errorType: 'E', traceback: 'tb' });
    expect(t[5]).toMatchObject({ terminal: 'completed' });
    for (const e of t) for (const v of Object.values(e)) expect(v).not.toBeNull();
    const text = JSON.stringify(t);
    expect(text).not.toMatch(/_[a-z]+"\s*:/); // camelCase only
    expect(text).not.toContain(bytes.toString('base64').slice(0, 40));
  });

  it('formats event times as ISO-8601 UTC with microseconds', () => {
    const us = 1_700_000_000_123_456;
    expect(formatEventTs(us)).toBe(new Date(1_700_000_000_123).toISOString().replace('Z', '456Z'));
    expect(formatEventTs(0)).toBe('1970-01-01T00:00:00.000000Z');
    expect(formatEventTs(7)).toBe('1970-01-01T00:00:00.000007Z');
    expect(formatEventTs(-1)).toBe('1969-12-31T23:59:59.999999Z');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4_102_444_800_000_000 }), (u) => {
        const s = formatEventTs(u);
        expect(s).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
        expect(Date.parse(s) * 1000 + Number(s.slice(23, 26))).toBe(u);
      }),
    );
  });
});

describe('fold performance', () => {
  /** n events: a creation, then batches of 1000 (one set, 998 appends, a completion). */
  function bigLog(n: number): EventRow[] {
    const hex = (x: number) => x.toString(16).padStart(32, '0');
    const rows: EventRow[] = [];
    rows.push(...toRows(parseBatch({ itemId: 'big', runId: 'r', create: {} }), { firstSeq: 1, writerEpoch: 'w', eventTsUs: T0 }));
    // One real batch as a template; copies get their own ids, seqs and step index (fold does
    // not recompute ids, and hashing a million events would only slow the test down).
    const template = toRows(
      parseBatch({ itemId: 'big', runId: 'r', step: { name: 'gen', index: 0 }, set: { last: 0 }, append: { log: Array.from({ length: 998 }, (_, i) => ({ i })) } }),
      { firstSeq: 0, writerEpoch: 'w', eventTsUs: T0, rootItemId: 'big' },
    );
    for (let k = 0; rows.length < n; k++) {
      const cp = hex(2 ** 40 + k);
      for (const r of template) {
        const seq = rows.length + 1;
        rows.push({
          ...r,
          event_id: hex(seq),
          item_seq: seq,
          checkpoint_id: cp,
          step_index: k,
          value_i64: r.field_name === 'last' ? BigInt(k) : null,
          value_blob: null,
          event_ts: T0 + k,
        });
      }
    }
    return rows;
  }

  // Timing is measured in bench/ (npm run bench -- fold), never asserted here.
  it('folds 10^6 events of one item, in order and shuffled, to the same state', () => {
    const rows = bigLog(1_000_000);
    const s = foldItem('big', rows);
    expect(s.lastSeq).toBe(rows.length);
    const batches = rows.filter((r) => r.event_type === 'STEP_COMPLETED').length;
    expect((s.fields.log as unknown[]).length).toBe(998 * batches);
    expect(s.fields.last).toBe(batches - 1);
    expect(s.violations).toEqual([]);
    const s2 = foldItem('big', shuffled(rows, 7));
    expect(s2.cursor).toEqual(s.cursor);
    expect(s2.lastSeq).toBe(s.lastSeq);
  });
});
