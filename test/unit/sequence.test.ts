import { describe, expect, it } from 'vitest';
import { parseBatch, toRows } from '../../lib/batch.ts';
import { ItemExistsError, ItemNotFoundError, ItemTerminalError } from '../../lib/errors.ts';
import { buildTracks, cloneTrack, sequence } from '../../lib/log/write/sequence.ts';

const T = 1_700_000_000_000_000;
const create = parseBatch({ itemId: 'a', runId: 'r', create: { rootItemId: 'root', parentItemId: 'root' }, step: { name: 'load', index: 0 } });
const step1 = parseBatch({ itemId: 'a', runId: 'r', step: { name: 's1', index: 1 }, set: { x: 1 } });
const done = parseBatch({ itemId: 'a', runId: 'r', terminal: 'completed' });

describe('sequence', () => {
  it('gives consecutive seqs after the last one and carries root/parent from the creation', () => {
    const t = cloneTrack(undefined);
    const a = sequence(create, t, 's00-e000001', T);
    expect(a.ack).toMatchObject({ firstSeq: 1, lastSeq: 2, duplicate: false });
    const b = sequence(step1, t, 's00-e000001', T);
    expect(b.ack).toMatchObject({ firstSeq: 3, lastSeq: 4, duplicate: false });
    expect(b.rows.map((r) => [r.item_seq, r.root_item_id, r.parent_item_id])).toEqual([
      [3, 'root', 'root'],
      [4, 'root', 'root'],
    ]);
  });

  it('answers a checkpoint already in the log from the log, with the first copy seqs', () => {
    const rows = [
      ...toRows(create, { firstSeq: 1, writerEpoch: 's01-e000001', eventTsUs: T }),
      ...toRows(step1, { firstSeq: 3, writerEpoch: 's01-e000001', eventTsUs: T, rootItemId: 'root', parentItemId: 'root' }),
      // a second copy of step1 at other seqs, from another writer: the lower seqs win
      ...toRows(step1, { firstSeq: 7, writerEpoch: 's02-e000001', eventTsUs: T, rootItemId: 'root', parentItemId: 'root' }),
    ];
    const t = buildTracks(rows).get('a')!;
    const again = sequence(step1, t, 's03-e000001', T);
    expect(again.rows).toEqual([]);
    expect(again.ack).toMatchObject({ firstSeq: 3, lastSeq: 4, duplicate: true, eventIds: step1.events.map((e) => e.eventId) });
  });

  it('refuses a second creation, an uncreated item, and anything after TERMINAL, each with its own code', () => {
    expect(() => sequence(step1, cloneTrack(undefined), 'e', T)).toThrow(ItemNotFoundError);
    expect(() => sequence(step1, cloneTrack(undefined), 'e', T)).toThrow(/does not exist/);
    const t = cloneTrack(undefined);
    sequence(create, t, 'e', T);
    const other = parseBatch({ itemId: 'a', runId: 'r2', create: {} });
    expect(() => sequence(other, t, 'e', T)).toThrow(ItemExistsError);
    sequence(done, t, 'e', T);
    expect(() => sequence(step1, t, 'e', T)).toThrow(ItemTerminalError);
    const codes = [other, step1].map((b) => {
      try {
        sequence(b, b === other ? t : cloneTrack(undefined), 'e', T);
      } catch (e) {
        return [(e as ItemExistsError).code, (e as ItemExistsError).field, (e as ItemExistsError).itemId];
      }
      return null;
    });
    expect(codes).toEqual([
      ['ITEM_EXISTS', 'create', 'a'],
      ['ITEM_NOT_FOUND', 'itemId', 'a'],
    ]);
  });

  it('create "ifMissing" creates a missing item, and leaves the creation out for an existing one', () => {
    const b = parseBatch({ itemId: 'a', runId: 'r', create: 'ifMissing', step: { name: 's1', index: 1 }, set: { x: 1 } });
    expect(parseBatch({ itemId: 'a', runId: 'r', create: { ifMissing: true }, step: { name: 's1', index: 1 }, set: { x: 1 } })).toEqual(b);
    const fresh = cloneTrack(undefined);
    const made = sequence(b, fresh, 'e', T);
    expect(made.rows.map((r) => r.event_type)).toEqual(['ITEM_CREATED', 'FIELD_SET', 'STEP_COMPLETED']);
    expect(made.ack).toMatchObject({ firstSeq: 1, lastSeq: 3, duplicate: false, eventIds: b.events.map((e) => e.eventId) });
    const existing = cloneTrack(undefined);
    sequence(create, existing, 'e', T);
    const applied = sequence(b, existing, 'e', T);
    expect(applied.rows.map((r) => [r.event_type, r.item_seq, r.root_item_id])).toEqual([
      ['FIELD_SET', 3, 'root'],
      ['STEP_COMPLETED', 4, 'root'],
    ]);
    expect(applied.ack).toMatchObject({ firstSeq: 3, lastSeq: 4, duplicate: false, eventIds: b.events.slice(1).map((e) => e.eventId) });
    // sent again: the same ack, as a duplicate
    expect(sequence(b, existing, 'e', T).ack).toEqual({ ...applied.ack, duplicate: true });
    // a creation alone for an existing item writes nothing
    const only = sequence(parseBatch({ itemId: 'a', runId: 'r', create: 'ifMissing' }), existing, 'e', T);
    expect(only).toEqual({ ack: expect.objectContaining({ eventIds: [], firstSeq: 5, lastSeq: 4, duplicate: true }), rows: [] });
    // a plain create of the same batch has another checkpoint id
    expect(parseBatch({ itemId: 'a', runId: 'r', create: {}, step: { name: 's1', index: 1 }, set: { x: 1 } }).checkpointId).not.toBe(b.checkpointId);
    expect(() => parseBatch({ itemId: 'a', runId: 'r', create: 'always' })).toThrow(/batch\.create/);
  });
});
