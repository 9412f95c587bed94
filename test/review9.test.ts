/**
 * Review 9 (the listing projection per base fragment). Real Lance, the real local object and
 * lease stores.
 *
 * F1: maintenance decided which fragments needed a document from the names in the projection
 *     folder alone, while readers ignore a document of another format. A document stored under
 *     the name this release looks up but written by another release (the next FORMAT bump: the
 *     name did not carry the format) was taken as written: never counted again, named by every
 *     index, and every listing scanned the log from then on (a full-size fragment never changes,
 *     so nothing ever replaced it). The single document before this version was rebuilt whole
 *     when unusable.
 */
import { describe, expect, it } from 'vitest';
import type { LanceCheckpointLog } from '../lib/log/log.ts';
import { PROJECTION_DIR, PROJECTION_KEY } from '../lib/log/projection/stored.ts';
import { SUMMARY_SCAN_COLUMNS, SummaryVisitor } from '../lib/log/read/summary.ts';
import { createBatch } from './support/batches.ts';
import { raceFixture } from './support/race-kit.ts';

const { setup } = raceFixture(10_000);

function stepBatch(itemId: string, name: string, index: number): unknown {
  return { itemId, runId: 'r', step: { name, index }, set: { [name]: index } };
}

const scanned = (log: LanceCheckpointLog) => log.scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor());

describe('review 9', () => {
  it('F1: a fragment document of another format under the looked-up name is counted again by the next pass', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 1 });
    await A.log.append([createBatch('a'), createBatch('b')]);
    await A.log.append([stepBatch('a', 'load', 0), stepBatch('b', 'load', 0)]);
    await A.log.mergeOwnShard();
    const rows = (await A.log.stats()).base.rows;
    // What the release before the next FORMAT bump leaves: its index and, per fragment, a
    // document under `frag-<id>-<rows>.json` in its own format. Fragment and row count as this
    // base has them (one merge: one fragment, id 0).
    const oldIndex = { format: 1, baseVersion: 1, fragments: [[0, rows]] };
    const oldDoc = { format: 1, fragment: 0, rows, items: [] };
    await A.objects.inner.put(PROJECTION_KEY, JSON.stringify(oldIndex));
    await A.objects.inner.put(`${PROJECTION_DIR}/frag-0-${rows}.json`, JSON.stringify(oldDoc));

    const M = open({ slot: 0, slots: 1, owner: 'maintainer' });
    const rep = await M.log.maintain();
    expect(rep.failures).toEqual([]);
    expect(rep.projection, 'every row counted in this format').toMatchObject({ fragments: 1, countedRows: rows });
    const R = open({ slot: 0, slots: 1, owner: 'reader' });
    expect(await R.log.projected(), 'a fresh reader uses the projection').toEqual(await scanned(R.log));
    expect(await A.objects.inner.list(PROJECTION_DIR), 'the other release\'s document is gone').not.toContain(`frag-0-${rows}.json`);
  });
});
