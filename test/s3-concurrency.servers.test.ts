/**
 * The log on S3 (Ceph RGW) under concurrent writer processes and a faulty network.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import type { Ack } from '../lib/types.ts';
import { startTs } from './support/proc.ts';
import { servers, useLeaseTable } from './support/servers.ts';

const { bucket } = servers;
const table = useLeaseTable();

describe('s3:// root under load', () => {
  it('four writer processes, 2,000 batches plus 10% duplicate deliveries: every event once, no commit lost, no violation', async () => {
    const root = `s3://${bucket}/load-${randomUUID().slice(0, 8)}`;
    const env = { DGCL_LEASE_TABLE: table };
    const procs = [0, 1, 2, 3].map((p) =>
      startTs('test/support/writer-proc.ts', [], {
        ...env,
        DGCL_TEST_TASK: JSON.stringify({ root, pipeline: 'p', experiment: 'load', mode: 'load', prefix: `w${p}`, items: 125, steps: 3, dupEvery: 10, inFlight: 8 }),
      }),
    );
    const results = await Promise.all(procs.map((p) => p.exit));
    for (const r of results) expect(r.code, r.stderr.slice(-2000)).toBe(0);
    const acks = procs.flatMap((p) => p.lines.filter((l) => l.startsWith('ack ')).map((l) => JSON.parse(l.slice(4)) as Ack));
    expect(acks).toHaveLength(2000 + 200);
    // each duplicated delivery: one original, one duplicate, identical ids and seqs
    const byCheckpoint = new Map<string, Ack[]>();
    for (const a of acks) byCheckpoint.set(a.checkpointId, [...(byCheckpoint.get(a.checkpointId) ?? []), a]);
    expect(byCheckpoint.size).toBe(2000);
    for (const list of byCheckpoint.values()) {
      expect(list.filter((a) => !a.duplicate)).toHaveLength(1);
      for (const a of list) expect({ ...a, duplicate: null }).toEqual({ ...list[0], duplicate: null });
    }
    const log = await openLog({ root, pipeline: 'p', experiment: 'load', env: { ...process.env, ...env } });
    try {
      const states = await log.allStates();
      expect(states).toHaveLength(500);
      for (const s of states) {
        expect(s.violations, s.itemId).toEqual([]);
        expect(s.lastSeq, s.itemId).toBe(3 + 3 * 2);
        expect(s.cursor?.stepIndex).toBe(3);
      }
      // every acknowledged event is read back exactly once, at its acknowledged seq
      const seqOf = new Map<string, number>();
      for (const s of states) for (const e of await log.trajectory(s.itemId)) {
        expect(seqOf.has(e.eventId)).toBe(false);
        seqOf.set(e.eventId, e.itemSeq);
      }
      for (const a of acks) a.eventIds.forEach((id, i) => expect(seqOf.get(id)).toBe(a.firstSeq + i));
      expect(seqOf.size).toBe(500 * 9);
    } finally {
      await log.close();
    }
  });
});
