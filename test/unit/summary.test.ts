import * as arrow from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CorruptError } from '../../lib/errors.ts';
import { dedupe, foldItem, summarize } from '../../lib/fold.ts';
import { decodeAggregate, encodeAggregate } from '../../lib/log/projection/projection-codec.ts';
import { compareUtf8, failureOf, lineageOf, mergeAggregates, summaryOf, SummaryVisitor, type ItemAggregate } from '../../lib/log/read/summary.ts';
import { rowsToArrow } from '../../lib/schema.ts';
import type { EventRow, EventType } from '../../lib/types.ts';

function row(p: Partial<EventRow> & Pick<EventRow, 'item_id' | 'item_seq' | 'event_id' | 'event_type'>): EventRow {
  return {
    root_item_id: 'root',
    parent_item_id: null,
    checkpoint_id: `cp-${p.item_seq}`,
    step_name: null,
    step_index: null,
    step_instance_id: null,
    iteration: null,
    attempt: 1,
    run_id: 'run',
    writer_epoch: 's00/e000001',
    field_name: null,
    field_type: null,
    codec_version: null,
    value_kind: null,
    value_i64: null,
    value_f64: null,
    value_bool: null,
    value_str: null,
    value_json: null,
    value_blob: null,
    payload_size: null,
    payload_checksum: null,
    query_tags_json: null,
    terminal: null,
    error_type: null,
    error_dump: null,
    traceback: null,
    event_ts: 1_700_000_000_000_000,
    schema_version: 1,
    ...p,
  };
}

const TYPES: EventType[] = ['ITEM_CREATED', 'FIELD_SET', 'FIELD_APPEND', 'STEP_COMPLETED', 'FAILED', 'TERMINAL'];

const arbRow = fc
  .record({
    item: fc.constantFrom('a', 'b', 'c', 'é-item'),
    seq: fc.integer({ min: 1, max: 12 }),
    id: fc.constantFrom('e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e7', 'e8'),
    type: fc.constantFrom(...TYPES),
    attempt: fc.integer({ min: 1, max: 4 }),
    step: fc.option(fc.constantFrom('gen', 'judge'), { nil: null }),
    // Step ranks in any order (the cursor is chosen by step order, then seq).
    index: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
    iteration: fc.option(fc.integer({ min: 1, max: 2 }), { nil: null }),
    terminal: fc.constantFrom('completed' as const, 'filtered' as const),
    root: fc.constantFrom('r1', 'r2'),
    parent: fc.option(fc.constantFrom('p1', 'p2'), { nil: null }),
  })
  .map((x) =>
    row({
      item_id: x.item,
      item_seq: x.seq,
      // Ids unique per item (another item's e1 is another event).
      event_id: `${x.item}-${x.id}`,
      event_type: x.type,
      attempt: x.attempt,
      step_name: x.step,
      step_index: x.step ? x.index : null,
      iteration: x.step ? x.iteration : null,
      checkpoint_id: `cp-${x.seq}-${x.id}`,
      root_item_id: x.root,
      parent_item_id: x.parent,
      field_name: x.type.startsWith('FIELD') ? 'f' : null,
      terminal: x.type === 'TERMINAL' ? x.terminal : null,
      error_type: x.type === 'FAILED' ? `E${x.seq}` : null,
      error_dump: x.type === 'FAILED' ? `{"seq":${x.seq}}` : null,
      traceback: x.type === 'FAILED' ? `tb ${x.id}` : null,
    }),
  );

function batchesOf(rows: readonly EventRow[], cuts: readonly number[]): arrow.RecordBatch[] {
  const out: arrow.RecordBatch[] = [];
  let start = 0;
  for (const c of [...cuts.filter((x) => x > 0 && x < rows.length)].sort((a, b) => a - b).concat(rows.length)) {
    if (c > start) out.push(...rowsToArrow(rows.slice(start, c)).batches);
    start = c;
  }
  return out;
}

/** The aggregate as the listing projection stores it and a reader decodes it. */
const stored = (a: ItemAggregate) => decodeAggregate(JSON.parse(JSON.stringify(encodeAggregate(a))));

/** Frozen with its parts, as the projection cache holds it. */
function frozen(a: ItemAggregate): ItemAggregate {
  for (const v of [a.first, a.created, a.cursorAt, a.cursor, a.loopCursorAt, a.loopCursor, a.stepAt, a.failureAt, a.failure, a.terminalAt]) if (v) Object.freeze(v);
  return Object.freeze(a);
}

describe('SummaryVisitor', () => {
  it('equals fold for any events in any order and batching (each event delivered once)', () => {
    fc.assert(
      fc.property(fc.array(arbRow, { minLength: 1, maxLength: 40 }), fc.array(fc.nat(40), { maxLength: 4 }), fc.nat(), (raw, cuts, seed) => {
        // What the stream delivers: one copy per event id, its lowest-seq copy.
        const delivered = dedupe(raw);
        const order = delivered.map((r, i) => ({ r, k: (i * 7919 + seed) % 1009 })).sort((a, b) => a.k - b.k).map((x) => x.r);
        const v = new SummaryVisitor();
        for (const b of batchesOf(order, cuts)) v.batch(b, () => true);
        const aggs = v.done();
        const ids = [...new Set(raw.map((r) => r.item_id))].sort();
        expect(aggs.map((a) => a.itemId)).toEqual(ids);
        for (const a of aggs) {
          const state = foldItem(a.itemId, raw, { fields: false });
          expect(summaryOf(a)).toEqual(summarize(state));
          expect(a.attempts).toBe(state.attempts);
          expect(lineageOf(a)).toEqual({ rootItemId: state.rootItemId, parentItemId: state.parentItemId });
          const f = failureOf(a);
          if (state.status === 'failed') expect(f).toEqual({ itemId: a.itemId, status: 'failed', ...state.failures.at(-1)! });
          else expect(f).toBeNull();
        }
      }),
      { numRuns: 400 },
    );
  });

  it('split anyhow, the parts merged (mergeAggregates) or one seeding the other equal the whole (the listing projection)', () => {
    fc.assert(
      fc.property(fc.array(arbRow, { minLength: 1, maxLength: 40 }), fc.array(fc.nat(2), { minLength: 40, maxLength: 40 }), (raw, part) => {
        const delivered = dedupe(raw);
        const visit = (rows: readonly EventRow[], seed?: ReadonlyMap<string, ItemAggregate>) => {
          const v = new SummaryVisitor(seed);
          if (rows.length > 0) for (const b of rowsToArrow([...rows]).batches) v.batch(b, () => true);
          return v.done();
        };
        const whole = visit(delivered);
        const parts = [0, 1, 2].map((k) => visit(delivered.filter((_, i) => part[i] === k)));
        const merged = new Map<string, ItemAggregate>();
        for (const p of parts) for (const a of p) merged.set(a.itemId, merged.has(a.itemId) ? mergeAggregates(merged.get(a.itemId)!, a) : a);
        expect([...merged.values()].sort((a, b) => compareUtf8(a.itemId, b.itemId))).toEqual(whole);
        // Seeded with part 0's aggregates as a reader holds them (stored, decoded with equal
        // positions shared, frozen: the seed must not change), fed the rest.
        const seed = new Map(parts[0]!.map((a) => [a.itemId, frozen(stored(a))]));
        expect(visit(delivered.filter((_, i) => part[i] !== 0), seed)).toEqual(whole);
        // The stored form decodes to the same aggregate.
        for (const a of whole) expect(stored(a)).toEqual(a);
      }),
      { numRuns: 400 },
    );
  });

  it('a decoded aggregate holds one copy of equal positions', () => {
    const at = (seq: number, id: string) => ({ seq, id });
    const a: ItemAggregate = {
      itemId: 'x', lastSeq: 3, attempts: 1, first: at(1, 'e1'), firstRoot: 'x', firstParent: null, created: at(1, 'e1'), root: 'x', parent: null,
      cursorAt: at(3, 'e3'), cursor: { stepName: 's', stepIndex: 0, stepInstanceId: null, iteration: null, attempt: 1, checkpointId: 'c' },
      loopCursorAt: null, loopCursor: null, stepAt: at(3, 'e3'), stepFailed: false, failureAt: null, failure: null, terminalAt: at(3, 'e3'), terminal: 'completed',
    };
    const d = stored(a);
    expect(d).toEqual(a);
    expect([d.created === d.first, d.stepAt === d.cursorAt, d.terminalAt === d.cursorAt, d.cursorAt === d.first]).toEqual([true, true, true, false]);
  });

  it('skips rows the stream marks as copies', () => {
    const rows = [
      row({ item_id: 'x', item_seq: 1, event_id: 'c', event_type: 'ITEM_CREATED' }),
      row({ item_id: 'x', item_seq: 2, event_id: 'f', event_type: 'FAILED', error_type: 'Boom' }),
      row({ item_id: 'x', item_seq: 9, event_id: 'g', event_type: 'STEP_COMPLETED' }),
    ];
    const v = new SummaryVisitor();
    for (const b of rowsToArrow(rows).batches) v.batch(b, (r) => r !== 2);
    const [a] = v.done();
    expect(summaryOf(a!)).toMatchObject({ status: 'failed', lastSeq: 2, cursor: null });
  });

  it('rejects an unknown event type as corrupt, naming it', () => {
    const v = new SummaryVisitor();
    const b = rowsToArrow([row({ item_id: 'x', item_seq: 1, event_id: 'c', event_type: 'ITEM_DELETED' as EventType })]).batches[0]!;
    expect(() => v.batch(b, () => true)).toThrow(CorruptError);
    expect(() => new SummaryVisitor().batch(b, () => true)).toThrow(/ITEM_DELETED/);
  });
});

describe('compareUtf8', () => {
  it('orders like UTF-8 bytes (what Lance compares), also where UTF-16 order differs', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => {
        expect(Math.sign(compareUtf8(a, b))).toBe(Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b))));
      }),
      { numRuns: 2000 },
    );
    // U+E000 sorts after an astral character in UTF-8, before it in UTF-16.
    expect(compareUtf8('\ue000', '\u{1f600}')).toBeLessThan(0);
    expect('\ue000' < '\u{1f600}').toBe(false);
  });
});
