/**
 * The purge step with a tombstone it cannot use: the others are still purged, and the bad one
 * is reported (a body that is not JSON, or one naming another item than its name says: purging
 * by it would delete rows that readers do not hide).
 */
import { describe, expect, it } from 'vitest';
import { META_DIR } from '../lib/log/layout.ts';
import { PROJECTION_DIR } from '../lib/log/projection/stored.ts';
import { createBatch } from './support/batches.ts';
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

// The purge drops the projection documents of the fragments its own commit rewrote; a pass that
// stopped between that commit and the drop kept the tombstone, but the next pass found no row to
// purge, so no fragment to drop either, and dropped the tombstone: the documents holding the
// deleted item stayed while the projection step kept failing (docs/design/projection.md,
// deletion.md: "a pass that fails after this keeps the tombstone and redoes it").
describe('a purge pass that stops between its commit and dropping the projection documents', () => {
  it('leaves no projection document holding the purged item once the tombstone is gone', async () => {
    const { open, clock } = setup();
    const A = open({ slot: 0, slots: 2 });
    for (let i = 0; i < 5; i++) await A.log.append([createBatch(`it-${i}`)]);
    await A.log.append([{ itemId: 'it-3', runId: 'r', step: { name: 'gen', index: 1 }, failed: { errorType: 'Secret', traceback: 'the doomed item says hi' } }]);
    await A.log.mergeOwnShard();
    const M = open({ slot: 1, slots: 2, owner: 'maintainer' });
    expect((await M.log.maintain()).failures).toEqual([]);
    const docsMentioning = async (needle: string) => {
      const hits: string[] = [];
      for (const name of await M.objects.list(PROJECTION_DIR)) if ((await M.objects.get(`${PROJECTION_DIR}/${name}`))?.includes(needle)) hits.push(name);
      return hits;
    };
    expect(await docsMentioning('the doomed item says hi'), 'the check below can fail: a document holds the item').not.toEqual([]);
    await A.log.deleteItem('it-3');
    await A.log.close();
    clock.advance(2 * 3_600_000); // past the deletion retention (1 h)

    // Pass 1: the purge stops at its first request after its checks (the listing of the
    // projection folder by dropStaleDocs: a crash or an error there); the projection step of
    // the pass fails too (its writes refused), as in test/projection.test.ts.
    let purgeStopped = false;
    let stopArmed = false;
    M.objects.tap.before = (op, key) => {
      if (op === 'list' && key === PROJECTION_DIR && stopArmed && !purgeStopped) {
        purgeStopped = true;
        throw new Error('the purge stops here (crash after its commit)');
      }
      if ((op === 'put' || op === 'putIfAbsent') && key.startsWith(PROJECTION_DIR)) throw new Error('projection writes refused by the test');
    };
    // Pass 0: the purge commits (the rows leave the base); the tombstone stays one retention
    // more (stalled mergers), so the documents are dropped by the pass that drops it.
    const removal = await M.log.maintain();
    expect([removal.purgedItems, removal.pendingDeletions]).toEqual([0, 1]);
    expect(await docsMentioning('the doomed item says hi'), 'still a document of a rewritten fragment').not.toEqual([]);
    clock.advance(3_600_000);
    stopArmed = true;
    const first = await M.log.maintain();
    expect(purgeStopped, 'the purge reached the point after its commit').toBe(true);
    expect(first.purgedItems).toBe(0);
    expect(first.failures.map((f) => f.step)).toEqual(['deletions', 'projection']);
    // Pass 2: the purge runs to its end (it drops the tombstone); the projection step still fails.
    const second = await M.log.maintain();
    expect(second.purgedItems, 'the tombstone is dropped by the second pass').toBe(1);
    expect(second.failures.map((f) => f.step)).toEqual(['projection']);
    expect(await docsMentioning('the doomed item says hi'), 'no projection document keeps the purged item').toEqual([]);
  });
});
