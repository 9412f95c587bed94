/**
 * Plain assertions of the log's promise about acknowledgements (issue 8, I1-I4), for the fault
 * tests: every acked batch is visible whole at its acked seqs, each event once; at most one ack
 * per checkpoint says `duplicate: false`, and all acks of a checkpoint agree. (To be replaced by
 * the shared invariants checker once it exists.)
 */
import { expect } from 'vitest';
import { NotFoundError } from '../../lib/errors.ts';
import type { CheckpointLog } from '../../lib/api.ts';
import type { Ack, TrajectoryEvent } from '../../lib/types.ts';

/** Every ack any call returned, by checkpoint. */
export class AckLedger {
  private readonly byCheckpoint = new Map<string, Ack[]>();

  add(...acks: Ack[]): void {
    for (const a of acks) this.byCheckpoint.set(a.checkpointId, [...(this.byCheckpoint.get(a.checkpointId) ?? []), a]);
  }

  /** One ack per checkpoint (the first received). */
  acked(): Ack[] {
    return [...this.byCheckpoint.values()].map((l) => l[0]!);
  }

  /** I4's first half: at most one `duplicate: false` per checkpoint, and every ack names the same events at the same seqs. */
  expectConsistent(label: string): void {
    for (const [id, list] of this.byCheckpoint) {
      expect(list.filter((a) => !a.duplicate).length, `${label}: acks of checkpoint ${id} saying duplicate:false`).toBeLessThanOrEqual(1);
      for (const a of list) expect({ ...a, duplicate: null }, `${label}: acks of checkpoint ${id} agree`).toEqual({ ...list[0]!, duplicate: null });
    }
  }
}

/** The item's trajectory, or [] if the item does not exist. */
export async function trajectoryOrNone(log: CheckpointLog, itemId: string): Promise<TrajectoryEvent[]> {
  try {
    return await log.trajectory(itemId);
  } catch (e) {
    if (e instanceof NotFoundError) return [];
    throw e;
  }
}

/**
 * I1/I2 for a set of acks, read through `log`: each acked batch's events are there, at the acked
 * seqs, each once; every item's seqs run 1..lastSeq with no gap or second copy, no violations.
 */
export async function expectAcksVisible(log: CheckpointLog, acks: readonly Ack[], label: string): Promise<void> {
  const items = [...new Set(acks.map((a) => a.itemId))].sort();
  for (const itemId of items) {
    const traj = await trajectoryOrNone(log, itemId);
    const state = await log.fold(itemId);
    expect(state.violations, `${label}: violations of ${itemId}`).toEqual([]);
    expect(
      traj.map((e) => e.itemSeq),
      `${label}: seqs of ${itemId} run 1..lastSeq, each once`,
    ).toEqual(Array.from({ length: traj.length }, (_, i) => i + 1));
    expect(state.lastSeq, `${label}: lastSeq of ${itemId}`).toBe(traj.length);
    for (const a of acks.filter((x) => x.itemId === itemId)) {
      const events = traj.filter((e) => e.checkpointId === a.checkpointId).map((e) => [e.eventId, e.itemSeq]);
      expect(events, `${label}: checkpoint ${a.checkpointId} of ${itemId} at its acked seqs`).toEqual(
        a.eventIds.map((id, i) => [id, a.firstSeq + i]),
      );
    }
  }
}
