/** The CLI on an s3:// root (Ceph RGW) with its lease table on DynamoDB Local, set up by dgcl. */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { dgcl } from './support/proc.ts';
import { servers } from './support/servers.ts';

describe('dgcl on s3://', () => {
  it('sets up the lease table (idempotently), appends, folds and maintains', async () => {
    const table = `dgcl-cli-${randomUUID().slice(0, 8)}`;
    const env = { DGCL_LEASE_TABLE: table };
    for (let i = 0; i < 2; i++) {
      const r = await dgcl(['setup-lease-table'], { env });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(table);
    }
    const flags = ['--root', `s3://${servers.bucket}/cli-${randomUUID().slice(0, 8)}`, '--pipeline', 'p', '--experiment', 'e'];
    const batch = { itemId: 'a', runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { n: 1 } };
    const a = await dgcl(['append', ...flags], { env, stdin: `${JSON.stringify(batch)}\n` });
    expect(a.code, a.stderr).toBe(0);
    expect(JSON.parse(a.stdout)).toMatchObject({ itemId: 'a', firstSeq: 1, lastSeq: 3, duplicate: false });
    const f = await dgcl(['fold', ...flags, '--item', 'a', '--json'], { env });
    expect(JSON.parse(f.stdout)).toMatchObject({ status: 'in_progress', fields: { n: 1 } });
    const m = await dgcl(['maintain', ...flags, '--json'], { env });
    expect(JSON.parse(m.stdout).ran).toBe(true);
    const none = await dgcl(['append', ...flags], { env: { DGCL_LEASE_TABLE: '' }, stdin: `${JSON.stringify(batch)}\n` });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('DGCL_LEASE_TABLE');
    // Reads take no lease: they work without the table.
    const read = await dgcl(['fold', ...flags, '--item', 'a', '--json'], { env: { DGCL_LEASE_TABLE: '' } });
    expect(read.code, read.stderr).toBe(0);
    expect(JSON.parse(read.stdout)).toMatchObject({ status: 'in_progress', fields: { n: 1 } });
    const items = await dgcl(['items', ...flags, '--json'], { env: { DGCL_LEASE_TABLE: '' } });
    expect(items.code, items.stderr).toBe(0);
    expect(items.stdout.split('\n').map((l) => JSON.parse(l).itemId)).toEqual(['a']);
  });
});
