/**
 * Adversarial review 5 (issue 9 performance work, 12bb486: the shard item index). Real Lance
 * datasets in temp folders, the real local store; schedules forced with promises.
 *
 * F1 (older than 12bb486, on the read path it changed): `fields()` and `latestEvents()` decide
 * "not found" INSIDE the consistent read, and LogReader.read() threw such errors at once, before
 * its re-listing. A generation being deleted after its merge shows an OLDER version meanwhile:
 * Lance names manifests newest-first (V2 naming), so a delete in key order (S3's, and the tapped
 * store's) removes the newest manifest first. A read that listed the generation before the merge
 * then saw none of the item's rows and answered NotFound for an acknowledged item (I1), where
 * the re-listing would have started it over. Fixed on h-review5: read() re-lists before any error.
 */
import { describe, expect, it } from 'vitest';
import type { LanceCheckpointLog } from '../lib/log/log.ts';
import { createBatch } from './support/batches.ts';
import { Pause, raceFixture, settle } from './support/race-kit.ts';

const LONG_TTL = 10 * 3_600_000;
const { setup } = raceFixture(LONG_TTL);

/**
 * The writer creates `item` (one commit to its generation g), a reader lists the meta folder
 * (g visible, no base yet) and is held there; the writer merges g and is held while g's
 * deletion has removed g's newest manifest (before its older ones); then the reader goes on.
 */
async function readDuringDeletion<T>(probe: (log: LanceCheckpointLog, item: string) => Promise<T>) {
  const { open } = setup();
  const writer = open({ slot: 0, mergeEveryCommits: 1000 });
  const item = 'x-1';
  const [ack] = await writer.log.append([createBatch(item)]);
  expect(ack!.duplicate).toBe(false);
  expect((await writer.log.stats()).shards, 'one unmerged generation').toHaveLength(1);

  const reader = open({});
  const listed = new Pause();
  let lists = 0;
  reader.objects.tap.after = async (op, key) => {
    if (op === 'list' && key === '_dgcl/meta' && ++lists === 1) await listed.hit();
  };
  const read = settle(probe(reader.log, item));
  await listed.reached.promise;

  // The merge: base commit, retired marker, then the deletion in key order. Held at the second
  // manifest: the newest one is gone, the older ones (version 1: the empty dataset) are not.
  const deleting = new Pause();
  let manifests = 0;
  writer.objects.tap.before = async (op, key) => {
    if (op === 'deleteKey' && /\/_versions\/\d+\.manifest$/.test(key) && ++manifests === 2) await deleting.hit();
  };
  const merge = settle(writer.log.mergeOwnShard());
  await deleting.reached.promise;
  listed.release();
  const outcome = await read;
  deleting.release();
  const merged = await merge;
  expect(merged.ok && merged.value.mergedRows, 'the merge finished').toBe(3);
  return { outcome, item };
}

describe('review5 F1: a point read during a merged generation\'s deletion never answers NotFound for an acked item', () => {
  it('fields(): the item created and acked before the read is found', async () => {
    const { outcome, item } = await readDuringDeletion((log, id) => log.fields(id));
    expect(outcome.ok ? outcome.value.fields : (outcome.error as Error).message).toEqual({ prompt: `about ${item}` });
  });

  it('latestEvents(): the item created and acked before the read shows its events', async () => {
    const { outcome } = await readDuringDeletion((log, id) => log.latestEvents(id, { limit: 5 }));
    expect(outcome.ok ? outcome.value.map((e) => e.eventType) : (outcome.error as Error).message).toEqual(['ITEM_CREATED', 'FIELD_SET', 'STEP_COMPLETED']);
  });
});
