/**
 * The reads of a simulated schedule, each recorded with what the checker needs of its answer
 * (test/support/invariants.ts): events (trajectory, latest events), folds, views of item states
 * (listing lines, fields, failures: test/support/views.ts), blob bytes, and "not found".
 */
import { CorruptError, NotFoundError } from '../../lib/errors.ts';
import { MAX_LATEST_EVENTS } from '../../lib/log/read/item-reads.ts';
import type { CheckpointLog } from '../../lib/api.ts';
import { trajectoryObservation, type ReadResult } from '../support/invariants.ts';

export const READ_KINDS = ['fold', 'trajectory', 'latest', 'fields', 'all', 'items', 'failures', 'loadBlob', 'blob'] as const;
export type ReadKind = (typeof READ_KINDS)[number];

/** Every field the workload sets (fields reads ask for all of them). */
export const FIELD_NAMES = ['prompt', 'img', 'log', ...Array.from({ length: 8 }, (_, i) => `f${i}`)];

/** Reads of the whole log (an item they do not list is absent). */
export function isWholeLog(kind: ReadKind): boolean {
  return kind === 'all' || kind === 'items';
}

/** What `kind` read of `log` answered about item `x` (or blob event `blobId`), as the checker records it. */
export async function observe(log: CheckpointLog, kind: ReadKind, x: string, blobId: string, sent: ReadonlyMap<string, { itemId: string; bytes: Uint8Array }>): Promise<ReadResult> {
  try {
    switch (kind) {
      case 'fold':
        return { items: [{ itemId: x, state: await log.fold(x) }] };
      case 'trajectory':
        return { items: [trajectoryObservation(x, await log.trajectory(x))] };
      case 'latest':
        // More than any simulated item holds: the whole trajectory.
        return { items: [trajectoryObservation(x, await log.latestEvents(x, { limit: MAX_LATEST_EVENTS }))] };
      case 'fields': {
        const got = await log.fields(x, { names: FIELD_NAMES });
        if (got.itemId !== x) return { items: [{ itemId: x, absent: true }] };
        const value = Object.fromEntries(Object.entries(got.fields).sort(([a], [b]) => (a < b ? -1 : 1)));
        return { items: [{ itemId: x, view: { kind: 'fields', value, names: FIELD_NAMES } }] };
      }
      case 'all':
        return { items: (await log.allStates()).map((s) => ({ itemId: s.itemId, state: s })), allItems: true };
      case 'items':
        return {
          items: (await log.items()).items.map((s) => ({ itemId: s.itemId, listedSeq: s.lastSeq, view: { kind: 'summary', value: { status: s.status, cursor: s.cursor, lastSeq: s.lastSeq } } })),
          allItems: true,
        };
      case 'failures':
        return {
          items: (await log.failures()).map(({ itemId, ...f }) => ({ itemId, view: { kind: 'failure', value: f } })),
        };
      case 'loadBlob':
        return { blobs: [{ eventId: blobId, ...(await loadChecked(() => log.loadBlob(blobId))) }] };
      case 'blob': {
        // The item's current `img` value (its own read: it may be newer than the fold's): checked
        // as the event whose bytes it returned, or, when none of the item's blobs has them, as
        // the one the fold named (whose bytes then differ: I1).
        const state = await log.fold(x);
        const ref = state.fields.img as { $blobRef?: { eventId: string } } | undefined;
        if (!ref?.$blobRef) return { items: [{ itemId: x, state }] };
        const got = await loadChecked(() => log.blob(x, 'img'));
        const same = got.bytes && [...sent].find(([, b]) => b.itemId === x && Buffer.from(b.bytes).equals(got.bytes!))?.[0];
        return { items: [{ itemId: x, state }], blobs: [{ eventId: same ?? ref.$blobRef.eventId, ...got }] };
      }
    }
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
    if (kind === 'loadBlob') return { blobs: [{ eventId: blobId, bytes: null }] };
    return { items: [{ itemId: x, absent: true }] };
  }
}

/** The bytes, or none with `corrupt` when they did not match their checksum (checked as I1). */
async function loadChecked(load: () => Promise<Uint8Array>): Promise<{ bytes: Uint8Array | null; corrupt?: true }> {
  try {
    return { bytes: await load() };
  } catch (e) {
    if (e instanceof CorruptError) return { bytes: null, corrupt: true };
    throw e;
  }
}
