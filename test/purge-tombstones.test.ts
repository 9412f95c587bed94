/**
 * The purge step with a tombstone it cannot use: the others are still purged, and the bad one
 * is reported (a body that is not JSON, or one naming another item than its name says: purging
 * by it would delete rows that readers do not hide).
 */
import { describe, expect, it } from 'vitest';
import { META_DIR } from '../lib/log/layout.ts';
import { raceFixture } from './support/race-kit.ts';

const { setup } = raceFixture(60_000);

describe('purge with unreadable tombstones', () => {
  it('purges the valid tombstones, reports the others, and purges nothing by a mismatched body', async () => {
    const { open, clock } = setup();
    const A = open({ slot: 0, slots: 2 });
    for (const itemId of ['doomed', 'bystander']) await A.log.append([{ itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: itemId } }]);
    await A.log.mergeOwnShard();
    expect((await A.log.deleteItem('doomed')).deleted).toBe(true);
    const bystanderRows = (await A.log.trajectory('bystander')).length;
    // Names readers parse (a hash no item has), bodies the purge cannot use.
    const notJson = `${META_DIR}/tomb.${'0'.repeat(40)}.000000000001`;
    const otherItem = `${META_DIR}/tomb.${'1'.repeat(40)}.000000000009`;
    await A.objects.put(notJson, '{not json');
    await A.objects.put(otherItem, JSON.stringify({ itemId: 'bystander', throughSeq: 9, deletedAtMs: 0 }));
    await A.log.close();

    clock.advance(2 * 3_600_000); // past the deletion retention
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    // The first pass removes the rows; the tombstone stays one retention more (stalled mergers).
    expect((await M.log.maintain()).pendingDeletions).toBe(1);
    clock.advance(3_600_000);
    const rep = await M.log.maintain();
    expect(rep.purgedItems, 'the valid tombstone was purged').toBe(1);
    expect(rep.failures.map((f) => [f.step, f.code])).toEqual([['deletions', 'CORRUPT']]);
    expect(rep.failures[0]!.message).toContain(notJson);
    expect(rep.failures[0]!.message).toContain(otherItem);
    expect((await M.objects.list(META_DIR)).filter((n) => n.startsWith('tomb.')).sort(), 'only the bad ones are left').toEqual(
      [notJson, otherItem].map((k) => k.slice(META_DIR.length + 1)).sort(),
    );
    expect((await M.log.stats()).base.rows, 'the doomed item has no row left in the base').toBe(bystanderRows);
    expect(await M.log.trajectory('bystander')).toHaveLength(bystanderRows);
  });
});
