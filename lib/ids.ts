/**
 * Deterministic identities (seed: "event_id is a deterministic idempotency key"). Retrying a batch
 * (ambiguous ack, retried Lambda, duplicate queue delivery, another writer) recomputes the same
 * ids, so the log never holds a second copy of an event.
 *
 * Both ids are the first 128 bits of a domain-separated SHA-256, as 32 lowercase hex characters.
 * What goes into a checkpoint id is decided by lib/batch.ts (`checkpointContent`): the canonical
 * JSON of the whole normalized batch, so key order in the input does not matter.
 */
import { hash } from 'node:crypto';
import { InternalError } from './errors.ts';

export const ID_HEX_LENGTH = 32;
const ID_RE = /^[0-9a-f]{32}$/;

function digest32(domain: string, content: string): string {
  // One-shot hash: a Hash object per id was a visible part of a batch's parsing (11 ids each).
  return hash('sha256', `${domain}\n${content}`, 'hex').slice(0, ID_HEX_LENGTH);
}

/** Id of a checkpoint batch from its canonical content. */
export function checkpointId(canonicalContent: string): string {
  return digest32('dgcl.checkpoint.v1', canonicalContent);
}

/** Id of the `index`-th event (0-based, in batch order) of checkpoint `checkpointId`. */
export function eventId(checkpointId: string, index: number): string {
  if (!Number.isSafeInteger(index) || index < 0) throw new InternalError(`eventId: index must be a non-negative integer, got ${index}`);
  return digest32('dgcl.event.v1', `${checkpointId}\n${index}`);
}

/**
 * Id of a checkpoint of a re-created item (docs/design/deletion.md): the batch's own checkpoint
 * id bound to the incarnation, named by the seq its creation follows (`base` > 0). Rows of an
 * earlier incarnation may still be in the base until maintenance purges them, and merges insert
 * by event_id, so a batch repeated in a new incarnation must not reuse the old ids.
 */
export function incarnationCheckpointId(checkpointId: string, base: number): string {
  if (!Number.isSafeInteger(base) || base < 1) throw new InternalError(`incarnationCheckpointId: base must be a positive integer, got ${base}`);
  return digest32('dgcl.checkpoint.incarnation.v1', `${checkpointId}\n${base}`);
}

/** True for strings shaped like the ids above. */
export function isId(s: unknown): s is string {
  return typeof s === 'string' && ID_RE.test(s);
}
