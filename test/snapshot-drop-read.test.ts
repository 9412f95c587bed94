/**
 * Reading a snapshot that is dropped after the reader looked it up (real Lance, a local root). A
 * drop deletes the record, then the base's tag, then the tail (lib/log/snapshot/catalog.ts); each
 * test stops the drop between those steps by doing them one at a time, in that order, with the
 * store's own parts. A read that fails because the snapshot was dropped is NOT_FOUND naming the
 * snapshot and the log, not retryable; CORRUPT is only for a record that is still there while its
 * tag or tail is gone or moved.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { describe, expect, it } from 'vitest';
import { openLog, type CheckpointLog } from '../lib/index.ts';
import { snapshotRecordKey, snapshotTag, SNAPSHOT_TAILS_DIR } from '../lib/log/layout.ts';
import { readsOf } from '../lib/log/reads.ts';
import { SummaryVisitor, SUMMARY_SCAN_COLUMNS } from '../lib/log/read/summary.ts';
import type { SnapshotView } from '../lib/log/snapshot/view.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';

const batch = (itemId: string, extra: Record<string, unknown> = {}) => ({ itemId, runId: 'r', create: {}, step: { name: 's', index: 0 }, set: { v: itemId, ...extra } });
const logDir = (root: string) => path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance');
const baseOf = async (root: string) => (await lancedb.connect(path.join(root, 'datagen_checkpoints', 'p', 'e'))).openTable('log');

interface Fixture {
  root: string;
  log: CheckpointLog;
  /** The log's own object store (rooted at log.lance), as the drop uses it. */
  objects: LocalObjectStore;
  uri: string;
}

/** A log with a merged base (a, with a blob) and unmerged rows (b), and snapshot `s` of it: a tag and a tail. */
async function fixture(prefix: string, o: { merged: boolean } = { merged: true }): Promise<Fixture> {
  const root = mkdtempSync(path.join(tmpdir(), prefix));
  const log = await openLog({ root, pipeline: 'p', experiment: 'e', mergeIdleMs: 0 });
  await log.append([batch('a', { image: { $blob: Buffer.from('bytes').toString('base64') } })]);
  if (o.merged) await log.mergeOwnShard();
  await log.append([batch('b')]);
  await log.snapshot('s');
  return { root, log, objects: new LocalObjectStore(logDir(root)), uri: log.uri };
}

const itemsOf = async (v: SnapshotView) => (await v.aggregates()).map((a) => a.itemId).sort();

/** What a dropped snapshot's read answers. */
const droppedError = (uri: string, since: RegExp) => ({
  code: 'NOT_FOUND',
  retryable: false,
  message: expect.stringMatching(new RegExp(`^snapshot "s" of ${uri.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} was dropped while it was being read; ${since.source}`)),
});
const LISTED = /dgcl snapshot --list lists the snapshots it has$/;

describe('reading a snapshot that is being dropped', () => {
  it('a snapshot dropped between its lookup and its read is NOT_FOUND naming it and the log (scan, blob, stats), not CORRUPT', async () => {
    const { log, uri } = await fixture('dgcl-snap-dropread-');
    try {
      const blobId = (await log.trajectory('a')).find((e) => e.fieldName === 'image')!.eventId;
      const view = await readsOf(log).openSnapshot('s');
      await log.dropSnapshot('s');
      await expect(view.scanEvents({ columns: SUMMARY_SCAN_COLUMNS }, () => new SummaryVisitor())).rejects.toMatchObject(droppedError(uri, LISTED));
      await expect(view.loadBlob(blobId)).rejects.toMatchObject(droppedError(uri, LISTED));
      await expect(view.stats()).rejects.toMatchObject(droppedError(uri, LISTED));
      // Looked up after the drop: the ordinary NOT_FOUND of an unknown name.
      await expect(readsOf(log).openSnapshot('s')).rejects.toMatchObject({ code: 'NOT_FOUND', message: `no snapshot "s" in ${uri}; the log has no snapshots` });
    } finally {
      await log.close();
    }
  });

  it('half dropped: with the record gone and the tag still there a view opened before reads the snapshot; once the tag goes it is NOT_FOUND', async () => {
    const { root, log, objects, uri } = await fixture('dgcl-snap-halfdrop-');
    try {
      const nonce = (await readsOf(log).openSnapshot('s')).record.nonce;
      const early = await readsOf(log).openSnapshot('s');
      const late = await readsOf(log).openSnapshot('s');
      // The drop's first step: the record (from here on the snapshot does not exist).
      await objects.delete(snapshotRecordKey('s'));
      // Tag and tail still hold the state it was opened at: the read succeeds, as one that ran just before the drop.
      expect(await itemsOf(early)).toEqual(['a', 'b']);
      // Its second step: the base's tag.
      await (await (await baseOf(root)).tags()).delete(snapshotTag(nonce));
      await expect(itemsOf(late)).rejects.toMatchObject(droppedError(uri, LISTED));
    } finally {
      await log.close();
    }
  });

  it('a snapshot with no base, dropped down to its tail, is NOT_FOUND', async () => {
    const { log, objects, uri } = await fixture('dgcl-snap-taildrop-', { merged: false });
    try {
      const view = await readsOf(log).openSnapshot('s');
      expect(view.record.baseTag).toBeNull();
      await objects.delete(snapshotRecordKey('s'));
      await objects.deletePrefix(`${SNAPSHOT_TAILS_DIR}/${view.record.tail}.lance`);
      await expect(itemsOf(view)).rejects.toMatchObject(droppedError(uri, LISTED));
    } finally {
      await log.close();
    }
  });

  it('dropped and taken again under the same name: the old view is NOT_FOUND and says to open the new one', async () => {
    const { log, uri } = await fixture('dgcl-snap-retaken-');
    try {
      const view = await readsOf(log).openSnapshot('s');
      await log.dropSnapshot('s');
      await log.append([batch('c')]);
      await log.snapshot('s');
      await expect(itemsOf(view)).rejects.toMatchObject(droppedError(uri, /a snapshot of that name was taken again since: open it again to read that one$/));
      expect(await itemsOf(await readsOf(log).openSnapshot('s'))).toEqual(['a', 'b', 'c']);
    } finally {
      await log.close();
    }
  });

  it('with its record still there, a tag deleted or moved outside dgcl, or a tail deleted, is CORRUPT', async () => {
    const { root, log, uri } = await fixture('dgcl-snap-corrupt-');
    try {
      const view = await readsOf(log).openSnapshot('s');
      const { nonce, baseVersion, tail } = view.record;
      const tags = await (await baseOf(root)).tags();
      await tags.delete(snapshotTag(nonce));
      await expect(itemsOf(view)).rejects.toMatchObject({
        code: 'CORRUPT',
        message: `snapshot "s" of ${uri}: the base's tag ${snapshotTag(nonce)} is gone (deleted outside dgcl?): the snapshot cannot be read`,
      });
      // Moved: the same tag at the version before.
      await tags.create(snapshotTag(nonce), baseVersion! - 1);
      await expect(itemsOf(await readsOf(log).openSnapshot('s'))).rejects.toMatchObject({
        code: 'CORRUPT',
        message: `snapshot "s" of ${uri}: the base's tag ${snapshotTag(nonce)} points at version ${baseVersion! - 1}, the snapshot was taken at ${baseVersion}`,
      });
      await tags.delete(snapshotTag(nonce));
      await tags.create(snapshotTag(nonce), baseVersion!);
      expect(await itemsOf(await readsOf(log).openSnapshot('s'))).toEqual(['a', 'b']);
      rmSync(path.join(logDir(root), SNAPSHOT_TAILS_DIR, `${tail}.lance`), { recursive: true });
      await expect(itemsOf(await readsOf(log).openSnapshot('s'))).rejects.toMatchObject({
        code: 'CORRUPT',
        message: `snapshot "s" of ${uri}: its tail dataset ${SNAPSHOT_TAILS_DIR}/${tail}.lance is gone (deleted outside dgcl?): the snapshot cannot be read`,
      });
    } finally {
      await log.close();
    }
  });
});
