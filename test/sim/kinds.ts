/**
 * What a violation of a simulated schedule breaks, from the tag its message starts with: an
 * invariant (I1-I5, D1: docs/design/invariants.md), or one of the checks the simulation adds:
 *  AVAIL     a read with nothing running and no faults failed (a live log must stay readable);
 *  FINAL     the final maintenance or read failed, or disagreed with itself;
 *  READ      a read failed with an error other than UNAVAILABLE;
 *  ERROR     an append or a delete failed with an untyped error (no code to act on);
 *  LIVENESS  the schedule, or an append, a delete or a quiescing phase, did not end;
 *  CRASH     an unhandled rejection (it would end a real process).
 */
export const VIOLATION_KINDS = ['I1', 'I2', 'I3', 'I4', 'I5', 'D1', 'AVAIL', 'FINAL', 'READ', 'ERROR', 'LIVENESS', 'CRASH'] as const;
export type ViolationKind = (typeof VIOLATION_KINDS)[number] | 'OTHER';

export function violationKind(message: string): ViolationKind {
  const tag = /^([A-Z0-9]+)\b/.exec(message)?.[1];
  return (VIOLATION_KINDS as readonly string[]).includes(tag ?? '') ? (tag as ViolationKind) : 'OTHER';
}
