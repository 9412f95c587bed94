/**
 * A live writer whose process runs in a pid namespace of its own under the same host name (a
 * container with host networking, sharing the lease folder through a volume): `kill(pid, 0)` in
 * the maintainer's namespace says ESRCH, yet the writer runs. Its lease records its pid namespace
 * (lib/lease/holder.ts), so maintenance in another namespace does not judge it dead: it keeps its
 * slot (its epoch is not fenced, nothing of it merged) until its lease expires. Needs root
 * (unshare -p); skipped otherwise.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import { slotKey } from '../lib/lease/slots.ts';
import { leaseLogIdAt } from './support/coord.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const root = process.getuid?.() === 0;

describe.skipIf(!root)('a live writer in another pid namespace, same host name', () => {
  it('keeps its slot when maintenance runs (its lease has not expired)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-pidns-'));
    const task = JSON.stringify({ root: dir, pipeline: 'p', experiment: 'e', slots: 1, leaseTtlMs: 600_000, itemId: 'held' });
    // Forks a few hundred times first so the writer's pid in its namespace is not 1 (and not a pid
    // alive here); `; :` keeps sh from exec'ing node (node stays a child, pid > 1).
    const script = `for i in $(seq 300); do /bin/true; done; ${JSON.stringify(process.execPath)} --import tsx test/support/slot-holder.ts; :`;
    const child = spawn('unshare', ['-p', '-f', '--kill-child', '--mount-proc', 'sh', '-c', script], { cwd: REPO, env: { ...process.env, DGCL_TEST_TASK: task }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += String(d)));
    try {
      const epoch = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout! }).on('line', (l) => l.startsWith('acked ') && resolve(l.slice(6)));
        child.on('close', () => reject(new Error(`holder exited: ${stderr}`)));
      });
      const leases = new LocalLeaseStore({ dir: path.join(dir, '.dgcl', 'leases') });
      const logId = leaseLogIdAt(path.join(dir, 'datagen_checkpoints', 'p', 'e', 'log.lance'));
      expect(logId, 'the holder made a log whose leases are scoped by its id').toMatch(/^[0-9a-f-]{36}$/);
      const before = await leases.read(slotKey('p', 'e', 0, logId));
      const m = await openLog({ root: dir, pipeline: 'p', experiment: 'e', slots: 1 });
      const report = await m.maintain();
      await m.close();
      const after = await leases.read(slotKey('p', 'e', 0, logId));
      expect({ epoch, owner: after?.owner, leaseEpoch: after?.epoch, merged: report.mergedShards }).toEqual({ epoch, owner: before?.owner, leaseEpoch: before?.epoch, merged: [] });
    } finally {
      child.kill('SIGKILL');
    }
  }, 60_000);
});
