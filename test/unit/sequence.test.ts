import { describe, expect, it } from 'vitest';
import { parseBatch, toRows } from '../../lib/batch.ts';
import { buildTracks, cloneTrack, sequence } from '../../lib/log/sequence.ts';

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

  it('refuses a second creation, an uncreated item, and anything after TERMINAL', () => {
    expect(() => sequence(step1, cloneTrack(undefined), 'e', T)).toThrow(/does not exist/);
    const t = cloneTrack(undefined);
    sequence(create, t, 'e', T);
    const other = parseBatch({ itemId: 'a', runId: 'r2', create: {} });
    expect(() => sequence(other, t, 'e', T)).toThrow(/already exists/);
    sequence(done, t, 'e', T);
    expect(() => sequence(step1, t, 'e', T)).toThrow(/terminal/);
  });
});
