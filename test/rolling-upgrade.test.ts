/**
 * Rolling upgrade beside versions before 0.2.0 (I4): 0.2.0 writes claims without event ids in a
 * coordination store (`events`: the count). The versions before lib/coord (up to 2d9ee09, the
 * "old process" docs/operations.md "Upgrades and migrations" tells to run beside 0.2.0 with
 * `coordination: 'objects'`) still read a claim as a whole ack: when one loses a claim race to a
 * 0.2.0 writer it answers `{duplicate: true, eventIds: <the claim's eventIds>}`, so a claim kept
 * as an object must keep the ids, or the old writer answers `eventIds: undefined`.
 *
 * The old code is not run here (that needed `git archive` of 2d9ee09, so the test failed in a
 * tarball or a shallow clone). Instead the claim a 0.2.0 writer leaves as an object is the
 * fixture, and the old writer's losing branch of `claim` (lib/log/writer.ts at 2d9ee09, copied
 * verbatim below) reads it, as it would after meeting it in the race.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { claimKey } from '../lib/log/layout.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logLocation, parseRoot } from '../lib/storage/location.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch } from './support/batches.ts';

const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

/**
 * What a writer before 0.2.0 does with its own ack after its claim PUT found another writer's
 * claim (2d9ee09, lib/log/writer.ts `claim`, the lines after `putIfAbsent` failed).
 */
function oldWriterLosesClaim(ack: Ack, body: string, by: string): void {
  const first = JSON.parse(body) as Ack & { claimedBy?: string };
  if (first.claimedBy === by) return; // our own earlier attempt landed
  Object.assign(ack, { itemId: first.itemId, checkpointId: first.checkpointId, eventIds: first.eventIds, firstSeq: first.firstSeq, lastSeq: first.lastSeq, duplicate: true });
}

describe('rolling upgrade from versions before 0.2.0', () => {
  it('a pre-0.2.0 writer that loses a claim race to a 0.2.0 writer still names the events of its duplicate ack (I4)', async () => {
    const rootDir = mkdtempSync(path.join(tmpdir(), 'dgcl-upgrade-'));
    roots.push(rootDir);
    const root = `file://${rootDir}`;
    const experiment = `e-${randomUUID().slice(0, 8)}`;
    const fresh = await openLog({ root, pipeline: 'p', experiment, owner: 'new', slots: 2, slot: 0, coordination: 'objects' });
    let n: Ack;
    try {
      [n] = (await fresh.append([createBatch('i1')])) as [Ack];
    } finally {
      await fresh.close();
    }
    expect(n.duplicate).toBe(false);
    expect(n.eventIds).toHaveLength(3);
    // The claim the 0.2.0 writer left, as an object where the old writer looks for it.
    const loc = logLocation(parseRoot(root), 'p', experiment);
    if (loc.kind !== 'file') throw new Error('a local root');
    const body = await new LocalObjectStore(loc.dir).get(claimKey(n.checkpointId));
    expect(body).not.toBeNull();
    // The old writer committed its identical copy of the batch (other seqs) and met the new claim.
    const o: Ack = { itemId: 'i1', checkpointId: n.checkpointId, eventIds: ['old-1', 'old-2', 'old-3'], firstSeq: n.lastSeq + 1, lastSeq: n.lastSeq + 3, duplicate: false };
    oldWriterLosesClaim(o, body!, `old-epoch/${randomUUID()}`);
    // The old writer lost the claim: a duplicate of the new writer's ack, naming its events.
    expect(o.duplicate).toBe(true);
    expect({ eventIds: o.eventIds, firstSeq: o.firstSeq, lastSeq: o.lastSeq }).toEqual({ eventIds: n.eventIds, firstSeq: n.firstSeq, lastSeq: n.lastSeq });
  });
});
