/**
 * LOG_NOT_FOUND on an s3:// root (Ceph RGW, leases on DynamoDB Local): a misspelt experiment or
 * pipeline names what exists, a missing bucket says so, and maintain takes no lease and puts no
 * object.
 */
import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoLeaseStore } from '../lib/lease/dynamo.ts';
import { maintainerKey } from '../lib/lease/slots.ts';
import { LogNotFoundError } from '../lib/errors.ts';
import { openLog } from '../lib/index.ts';
import { S3ObjectStore } from '../lib/storage/s3.ts';
import { s3ClientConfig } from '../lib/storage/location.ts';
import { createBatch } from './support/batches.ts';
import { dgcl } from './support/proc.ts';
import { servers, useLeaseTable } from './support/servers.ts';

const { bucket } = servers;
const table = useLeaseTable();
const prefix = `nolog-${randomUUID().slice(0, 8)}`;
const root = `s3://${bucket}/${prefix}`;
const env = { ...process.env, DGCL_LEASE_TABLE: table };
const s3 = new S3Client(s3ClientConfig());
const everything = new S3ObjectStore({ client: s3, bucket, basePrefix: prefix });

/** Every key below the root (recursively), for "nothing was written" checks. */
async function keys(): Promise<string[]> {
  const out: string[] = [];
  const walk = async (p: string): Promise<void> => {
    for (const n of await everything.list(p)) {
      const k = p === '' ? n : `${p}/${n}`;
      const below = await everything.list(k);
      if (below.length === 0) out.push(k);
      else await walk(k);
    }
  };
  await walk('');
  return out.sort();
}

beforeAll(async () => {
  for (const experiment of ['exp-a', 'exp-b']) {
    const log = await openLog({ root, pipeline: 'qa', experiment, env });
    await log.append([createBatch('doc-1', { terminal: 'completed' })]);
    await log.close();
  }
});
afterAll(() => s3.destroy());

describe('a log that does not exist, on S3', () => {
  it('reads of a misspelt experiment or pipeline fail naming what exists; maintain takes no lease and writes nothing', async () => {
    const before = await keys();
    const typo = await openLog({ root, pipeline: 'qa', experiment: 'exp-c', env });
    const expected = `no log at ${root}/datagen_checkpoints/qa/exp-c/log.lance; experiments of pipeline "qa": exp-a, exp-b`;
    for (const [name, call] of [
      ['items', () => typo.items()],
      ['fold', () => typo.fold('doc-1')],
      ['stats', () => typo.stats()],
      ['maintain', () => typo.maintain()],
    ] as const) {
      const err = await (call as () => Promise<unknown>)().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err, name).toBeInstanceOf(LogNotFoundError);
      expect((err as Error).message, name).toBe(expected);
    }
    await typo.close();
    const pipe = await openLog({ root, pipeline: 'qq', experiment: 'exp-a', env });
    await expect(pipe.items()).rejects.toThrow(`no log at ${root}/datagen_checkpoints/qq/exp-a/log.lance; pipeline "qq" has no log; pipelines under ${root}: qa`);
    await pipe.close();

    expect(await keys()).toEqual(before);
    const client = new DynamoDBClient({});
    const leases = new DynamoLeaseStore({ client, table });
    expect(await leases.read(maintainerKey('qa', 'exp-c')), 'no maintainer lease was taken').toBeNull();
    await leases.close();
    client.destroy();
  });

  it('a bucket that does not exist is LOG_NOT_FOUND saying so, in the library and the CLI (exit 66)', async () => {
    const gone = `s3://${bucket}-absent-${randomUUID().slice(0, 6)}/x`;
    const log = await openLog({ root: gone, pipeline: 'qa', experiment: 'exp-a', env });
    await expect(log.items()).rejects.toMatchObject({ code: 'LOG_NOT_FOUND', message: expect.stringMatching(/S3 bucket "[^"]+" does not exist/) });
    await log.close();
    const r = await dgcl(['items', '--root', gone, '--pipeline', 'qa', '--experiment', 'exp-a'], { env: { DGCL_LEASE_TABLE: table } });
    expect(r.code, r.stderr).toBe(66);
    expect(r.stderr).toMatch(/^dgcl: LOG_NOT_FOUND: .*S3 bucket "[^"]+" does not exist/);
  });

  it('the CLI: a misspelt experiment exits 66; report writes no page', async () => {
    const before = await keys();
    const flags = ['--root', root, '--pipeline', 'qa', '--experiment', 'exp-typo'];
    for (const c of [['items'], ['report', '--out', `${root}/page.html`], ['maintain']]) {
      const r = await dgcl([...c, ...flags], { env: { DGCL_LEASE_TABLE: table } });
      expect(r.code, `${c[0]}: ${r.stderr}`).toBe(66);
      expect(r.stderr, c[0]).toContain('experiments of pipeline "qa": exp-a, exp-b');
    }
    expect(await keys()).toEqual(before);
  });
});
