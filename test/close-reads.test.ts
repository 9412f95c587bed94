/**
 * close() with a read in flight (review19: the read went on after close() had closed the tables,
 * and opened a Lance connection again that nobody closed). close() now waits for reads started
 * before it; reads after it fail.
 * Real Lance on a local root; the read is held in its meta listing by a gate, no sleeps.
 */
import { describe, expect, it } from 'vitest';
import { holdFirstList, raceFixture, resolvesAfterRelease, settle } from './support/race-kit.ts';

const { setup } = raceFixture(60_000);

describe('close() with a read in flight', () => {
  it('waits for the read, which then answers from open tables; no Lance connection is left open', async () => {
    const { open } = setup();
    const W = open({});
    await W.log.append([{ itemId: 'x', runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: 1 } }]);
    await W.log.mergeOwnShard();
    await W.log.close();

    const R = open({});
    const hold = holdFirstList(R);
    const folding = settle(R.log.fold('x'));
    await hold.reached.promise;
    expect(await resolvesAfterRelease(R.log.close(), hold), 'close() returned while a read was in flight').toBe(true);
    const folded = await folding;
    expect(folded.ok && folded.value.lastSeq, 'the read answered, with the three events').toBe(3);
    const tables = (R.log as unknown as { tables: { baseConn: unknown; shardConn: unknown } }).tables;
    expect([tables.baseConn, tables.shardConn], 'Lance connections after close() and the read').toEqual([null, null]);
    const after = await settle(R.log.fold('x'));
    expect(after.ok ? 'answered' : (after.error as { code?: string }).code, 'a read after close()').toBe('INTERNAL');
  });
});
