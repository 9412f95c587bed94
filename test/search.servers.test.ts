/**
 * `search` on an s3:// root (Ceph RGW, leases in DynamoDB Local): the fixture's queries answer
 * alike from a live writer's unmerged shard (scanned) and, after the writer merged and a
 * maintenance pass indexed the base, through the base's full-text indexes on S3.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLog, type OpenLogOptions } from '../lib/index.ts';
import { TEXT_COLUMNS, textIndexName } from '../lib/log/text-index.ts';
import { describeHits, SEARCH_BATCHES, SEARCH_CASES } from './support/search-fixture.ts';
import { servers, useLeaseTable } from './support/servers.ts';

const table = useLeaseTable();
type Log = Awaited<ReturnType<typeof openLog>>;

describe('search on an s3:// root', () => {
  const at = { root: `s3://${servers.bucket}/search-${randomUUID().slice(0, 8)}`, pipeline: 'p', experiment: 'e' };
  const open = (extra: Partial<OpenLogOptions> = {}) => openLog({ ...at, env: { ...process.env, DGCL_LEASE_TABLE: table }, ...extra });
  let writer: Log;
  let reader: Log;

  beforeAll(async () => {
    writer = await open({ mergeEveryCommits: 1_000_000, mergeIdleMs: 0 });
    for (const b of SEARCH_BATCHES) await writer.append([b]);
    reader = await open();
  });
  afterAll(async () => {
    await reader?.close();
    await writer?.close();
  });

  it('finds the matches of an unmerged shard (no base yet)', async () => {
    expect((await reader.stats()).base.rows).toBe(0);
    for (const c of SEARCH_CASES) expect(await describeHits(reader, c.text, c.options), c.what).toEqual(c.hits);
  });

  it('finds the same matches in the base through its full-text indexes once merged and maintained', async () => {
    await writer.close();
    const report = await reader.maintain();
    expect(report.failures).toEqual([]);
    expect(report.indexes).toEqual(expect.arrayContaining(TEXT_COLUMNS.map(textIndexName)));
    const stats = await reader.stats();
    expect(stats.shards).toEqual([]);
    expect(stats.base.rows).toBeGreaterThan(SEARCH_BATCHES.length);
    for (const c of SEARCH_CASES) expect(await describeHits(reader, c.text, c.options), c.what).toEqual(c.hits);
  });
});
