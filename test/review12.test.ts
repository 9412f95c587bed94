/**
 * review12: findings of the adversarial review of 3022095..e8ebab4, each as a test that fails on
 * the reviewed commit (they document the fix each needs; see the review report).
 *
 * F1: a log closed before its first append or delete has no writer yet; `getWriter()` makes one
 *     after close, so an append of a new item (no marker: sequencing reads nothing) is
 *     acknowledged, takes a writer slot and starts a lease keeper nobody will stop, against
 *     api.ts ("Every later call fails (INTERNAL: the log is closed)"); a delete writes the
 *     item's marker before its read refuses.
 * F2: the purge drops the projection documents of the fragments its own commit rewrote; a pass
 *     that stops between that commit and the drop keeps the tombstone, but the next pass finds
 *     no row to purge, so no fragment to drop either, and drops the tombstone: the documents
 *     holding the deleted item stay while the projection step keeps failing
 *     (docs/design/projection.md, deletion.md: "a pass that fails after this keeps the
 *     tombstone and redoes it").
 * F3: S3 plain PUTs are sent once (lib/storage/s3.ts sendOnce), so a transient failure of an
 *     item marker PUT (S3 SlowDown) failed the whole group; the writer now retries it with a new
 *     body each time (a body that failed is never trusted, so one landing late is harmless).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UnavailableError } from '../lib/errors.ts';
import { openLog } from '../lib/index.ts';
import { itemKey } from '../lib/log/layout.ts';
import { PROJECTION_DIR } from '../lib/log/projection/stored.ts';
import { tree } from './support/tree.ts';
import { createBatch } from './support/batches.ts';
import { raceFixture } from './support/race-kit.ts';

describe('review12 F1: a log closed before it ever wrote', () => {
  it('refuses an append of a new item and a delete, and writes nothing', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-rev12-closed-'));
    const w = await openLog({ root, pipeline: 'p', experiment: 'e' });
    const [ack] = await w.append([createBatch('t')]);
    await w.close();
    // A reader process (never appended), closed.
    const r = await openLog({ root, pipeline: 'p', experiment: 'e', owner: 'reader' });
    expect((await r.fold('t')).lastSeq, 'the check below can fail: it reads while open').toBe(ack!.lastSeq);
    await r.close();
    const before = tree(root);
    const outcomes: Array<[string, unknown]> = [];
    for (const [name, call] of [
      ['append of a new item', () => r.append([createBatch('new-item')])],
      ['deleteItem', () => r.deleteItem('t')],
    ] as const) {
      const got = await call().then(
        (v: unknown) => ({ answered: v }),
        (e: unknown) => ({ code: (e as { code?: string }).code }),
      );
      outcomes.push([name, got]);
    }
    const after = tree(root);
    try {
      expect({ outcomes, written: after.filter((l) => !before.includes(l)) }).toEqual({
        outcomes: [
          ['append of a new item', { code: 'INTERNAL' }],
          ['deleteItem', { code: 'INTERNAL' }],
        ],
        written: [],
      });
    } finally {
      await r.close(); // stops the lease keeper the append started (if it did)
    }
  });
});

describe('review12 F2: a purge pass that stops between its commit and dropping the documents', () => {
  const { setup } = raceFixture(60_000);
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

describe('review12 F3: a transient failure of an item marker PUT', () => {
  const { setup } = raceFixture(60_000);
  it('is retried with a new body, and the group is acked; three in a row fail it', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 1 });
    await A.log.append([createBatch('warm')]);
    const bodies: string[] = [];
    let refuse = 1;
    A.objects.tap.before = (op, key) => {
      if (op !== 'put' || key !== itemKey('x')) return;
      if (refuse-- > 0) throw new UnavailableError('SlowDown (refused by the test, nothing landed)');
    };
    A.objects.tap.after = (op, key) => {
      if (op === 'put' && key === itemKey('x')) bodies.push('landed');
    };
    const [ack] = await A.log.append([createBatch('x')]);
    expect(ack!.duplicate).toBe(false);
    expect(bodies).toEqual(['landed']);
    const marker = await A.objects.get(itemKey('x'));
    expect(marker, 'the marker names this writer').toMatch(new RegExp(`^${A.log.writerEpoch} `));
    expect((await A.log.fold('x')).lastSeq).toBe(ack!.lastSeq);

    A.objects.tap = {};
    refuse = 3;
    A.objects.tap.before = (op, key) => {
      if (op === 'put' && key === itemKey('z') && refuse-- > 0) throw new UnavailableError('SlowDown (refused by the test)');
    };
    const failed = await A.log.append([createBatch('z')]).catch((e: unknown) => e);
    expect(failed).toMatchObject({ code: 'UNAVAILABLE' });
    expect(refuse, 'three tries, each refused').toBe(0);
    A.objects.tap = {};
    const [retried] = await A.log.append([createBatch('z')]);
    expect(retried!.duplicate, 'nothing of z was committed').toBe(false);
  });
});

describe('review13 F2: a marker PUT retry of a group that fails on another item', () => {
  const { setup } = raceFixture(60_000);
  it('ends before the group is answered, so nothing is written after the answer or after close()', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 1 });
    await A.log.append([createBatch('warm')]);
    const order: string[] = [];
    let xTries = 0;
    let closed = false;
    A.objects.tap.before = (op, key) => {
      if (op !== 'put') return;
      if (key === itemKey('y')) throw new Error('AccessDenied (refused by the test): not retried, fails the group');
      if (key === itemKey('x') && ++xTries === 1) throw new UnavailableError('SlowDown (refused by the test, nothing landed)');
    };
    A.objects.tap.after = (op, key) => {
      if (op === 'put' && key === itemKey('x')) order.push(closed ? 'x landed after close' : 'x landed');
    };
    const answer = await A.log.append([createBatch('x'), createBatch('y')]).then(
      () => 'acked',
      (e: unknown) => String(e),
    );
    order.push('answered');
    expect(answer).toMatch(/AccessDenied/);
    await A.log.close();
    closed = true;
    await new Promise((r) => setTimeout(r, 50)); // a retry still under way would land now
    expect(xTries, 'x was tried twice').toBe(2);
    expect(order).toEqual(['x landed', 'answered']);
  });
});
