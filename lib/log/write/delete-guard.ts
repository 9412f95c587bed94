/**
 * The optional precondition of `deleteItem(itemId, { throughSeq })` (docs/design/deletion.md,
 * "Guarded deletes"): delete only the events up to the seq the caller last saw. A delete whose
 * answer was lost, retried (or delivered twice by an at-least-once queue) after the item was
 * deleted and created again, must not delete the new incarnation; without a seq the writer
 * cannot tell the retry from a delete of the new incarnation. Pure: no request is made here.
 */
import type { DeleteOptions } from '../../api.ts';
import { isPlainObject } from '../../codec.ts';
import { ConflictError, InvalidInputError } from '../../errors.ts';

const DELETE_OPTION_KEYS = ['throughSeq'] as const;

/**
 * The options as given, checked before anything is written (not even the item marker). Unknown
 * keys are refused like a batch's (lib/batch.ts): a misspelt `throughSeq` would otherwise make
 * the delete silently unguarded.
 */
export function checkDeleteOptions(options: unknown): DeleteOptions {
  if (options === undefined) return {};
  if (!isPlainObject(options)) throw new InvalidInputError(`must be an object {throughSeq?}, got ${options === null ? 'null' : Array.isArray(options) ? 'an array' : typeof options}`, { field: 'options' });
  for (const key of Object.keys(options)) {
    if (!(DELETE_OPTION_KEYS as readonly string[]).includes(key)) {
      throw new InvalidInputError(`unknown key ${JSON.stringify(key)}; allowed keys: ${DELETE_OPTION_KEYS.join(', ')}`, { field: `options.${key}` });
    }
  }
  const seq = options.throughSeq;
  if (seq === undefined) return {};
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1) {
    throw new InvalidInputError(`must be a positive integer (the item's last seq the caller saw), got ${typeof seq === 'string' ? JSON.stringify(seq) : String(seq)}`, { field: 'throughSeq' });
  }
  return { throughSeq: seq };
}

/** What the delete read of the item, after the same reads as an unguarded delete. */
export interface DeleteView {
  /** Highest seq a tombstone in the meta listing deletes (0: none). */
  tombstoned: number;
  /** Every deleted-seq record of the item (`_dgcl/deleted/<hash>/<seq>`), in any order. */
  floors: readonly number[];
  /** Seqs of the item's visible rows (after the tombstones). */
  visibleSeqs: readonly number[];
}

/**
 * The highest seq the item is deleted through. A deleted-seq record is written before its
 * tombstone, so one can exist for a delete that died before the tombstone PUT: its seqs are
 * still visible, and it counts only once no visible row is at or below it (the purge drops a
 * tombstone only after the rows it hides are gone, so a completed delete never has one).
 */
export function deletedSeq(v: DeleteView): number {
  let first = Infinity;
  for (const s of v.visibleSeqs) if (s < first) first = s;
  let gone = v.tombstoned;
  for (const f of v.floors) if (f < first && f > gone) gone = f;
  return gone;
}

/** What a guarded delete does: write the tombstone at `throughSeq`, or answer that it happened. */
export interface GuardDecision {
  deleted: boolean;
  throughSeq: number;
}

/**
 * The answer table of docs/design/deletion.md ("Guarded deletes"), `throughSeq` already checked
 * by checkDeleteOptions. Throws ConflictError when the item has events the caller did not see,
 * InvalidInputError for a seq the item never had; nothing is written in either case.
 */
export function guardDecision(itemId: string, throughSeq: number, v: DeleteView): GuardDecision {
  const gone = deletedSeq(v);
  if (throughSeq <= gone) return { deleted: false, throughSeq: gone }; // deleted already: a retry
  let last = 0;
  for (const s of v.visibleSeqs) if (s > last) last = s;
  if (last === throughSeq) return { deleted: true, throughSeq };
  if (last > throughSeq) {
    throw new ConflictError(
      `item ${JSON.stringify(itemId)} has events after seq ${throughSeq} (its last seq is ${last}): appended since, or a new incarnation; nothing deleted. Read the item again and decide`,
      { retryable: false },
    );
  }
  throw new InvalidInputError(
    `item ${JSON.stringify(itemId)} has no seq ${throughSeq} to delete through (its last visible seq is ${last}, deleted through ${gone}); nothing deleted`,
    { field: 'throughSeq' },
  );
}
