/**
 * `log.fork` on an s3:// root (Ceph RGW, leases and coordination in DynamoDB Local): the kept
 * events equal the source's before the step (blob bytes included), the fork's own records let
 * durable steps resume it at that step (only later steps run), and the same fork again writes
 * nothing.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openLog, parseWhere, type CheckpointLog } from '../lib/index.ts';
import { servers, useLeaseTable } from './support/servers.ts';

const table = useLeaseTable();

describe('fork on an s3:// root (RGW)', () => {
  it('forks a where cohort before a step; durable steps on the fork run that step onward; the same fork again writes nothing', async () => {
    const root = `s3://${servers.bucket}/fork-${randomUUID().slice(0, 8)}`;
    const env = { ...(process.env as Record<string, string>), DGCL_LEASE_TABLE: table };
    const open = (experiment: string) => openLog({ root, pipeline: 'p', experiment, env, mergeIdleMs: 0 });
    const logs: CheckpointLog[] = [];
    try {
      const src = await open('e');
      logs.push(src);
      for (let i = 0; i < 4; i++) {
        const it = await src.item(`i${i}`, { runId: 'r1' });
        await it.step('gen', 0, () => ({ set: { keep: i < 2, raw: { $blob: Buffer.from(`blob ${i}`).toString('base64') } } }));
        await it.step('judge', 1, () => ({ set: { score: i } }));
      }
      const r = await src.fork({ where: parseWhere('keep = true'), fromStep: 'judge', to: { experiment: 'f' } });
      expect(r).toMatchObject({ items: 2, unchanged: false });

      const fork = await open('f');
      logs.push(fork);
      expect((await fork.items()).items.map((s) => [s.itemId, s.cursor?.stepName, s.forkedFrom?.experiment])).toEqual([
        ['i0', 'gen', 'e'],
        ['i1', 'gen', 'e'],
      ]);
      for (const id of ['i0', 'i1']) {
        const srcEvents = (await src.trajectory(id)).filter((e) => e.stepName === 'gen');
        const forkEvents = (await fork.trajectory(id)).filter((e) => e.stepName === 'gen');
        expect(forkEvents).toEqual(srcEvents);
        expect(Buffer.from(await fork.blob(id, 'raw')).toString()).toBe(`blob ${id.slice(1)}`);
      }
      const calls: string[] = [];
      for (const id of ['i0', 'i1']) {
        const it = await fork.item(id, { runId: 'r2' });
        await it.step('gen', 0, () => void calls.push(`${id}:gen`));
        await it.step('judge', 1, () => void calls.push(`${id}:judge`));
      }
      expect(calls).toEqual(['i0:judge', 'i1:judge']);
      const lastSeqs = (await fork.items()).items.map((s) => s.lastSeq);
      expect(await src.fork({ where: parseWhere('keep = true'), fromStep: 'judge', to: { experiment: 'f' } })).toMatchObject({ unchanged: true, events: 0 });
      expect((await fork.items()).items.map((s) => s.lastSeq)).toEqual(lastSeqs);
    } finally {
      for (const l of logs) await l.close();
    }
  });
});
