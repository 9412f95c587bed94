/**
 * An s3:// root without DGCL_LEASE_TABLE (issue 11): reading takes no lease, so the log opens
 * and reads go to S3; append and maintain need a lease and fail with INVALID_INPUT naming
 * DGCL_LEASE_TABLE before any request. No S3 server is needed to show either: a closed port
 * answers every read with UNAVAILABLE (not the lease-table error), and a local HTTP server that
 * records requests shows that append and maintain send none.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidInputError, isDgclError } from '../lib/errors.ts';
import { openLog } from '../lib/index.ts';
import { dgcl } from './support/proc.ts';

// Our S3 client takes the endpoint from `env`; the SDK's credential chain and retry count come
// from the process environment (this file runs in its own worker process).
const AWS = { AWS_ACCESS_KEY_ID: 'k', AWS_SECRET_ACCESS_KEY: 's', AWS_REGION: 'us-east-1', AWS_MAX_ATTEMPTS: '1' };
Object.assign(process.env, AWS);
delete process.env.DGCL_LEASE_TABLE;

const CLOSED = 'http://127.0.0.1:9';
const root = 's3://dgcl-leaseless/runs';
const batch = { itemId: 'a', runId: 'r', create: {}, step: { name: 'load', index: 0 }, set: { n: 1 } };

async function codeOf(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  const e = await p.then(
    () => new Error('expected a rejection'),
    (err: unknown) => err,
  );
  if (!isDgclError(e)) throw e;
  return { code: e.code, message: e.message };
}

describe('an s3:// root without DGCL_LEASE_TABLE', () => {
  let server: Server;
  let endpoint = '';
  const requests: string[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      res.writeHead(500).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('opens, and every read goes to S3 (UNAVAILABLE on a closed port), never to the lease table', async () => {
    const log = await openLog({ root, pipeline: 'p', experiment: 'e', env: { AWS_ENDPOINT_URL_S3: CLOSED, AWS_REGION: 'us-east-1' } });
    try {
      const reads: Array<[string, () => Promise<unknown>]> = [
        ['fold', () => log.fold('a')],
        ['items', () => log.items()],
        ['trajectory', () => log.trajectory('a')],
        ['blob', () => log.blob('a', 'image')],
        ['failures', () => log.failures()],
        ['stats', () => log.stats()],
      ];
      for (const [name, read] of reads) {
        const e = await codeOf(read());
        expect({ name, ...e }).toMatchObject({ name, code: 'UNAVAILABLE' });
        expect(e.message).toContain('ECONNREFUSED');
        expect(e.message).not.toContain('DGCL_LEASE_TABLE');
      }
    } finally {
      await log.close();
    }
  });

  it('append and maintain fail with INVALID_INPUT naming DGCL_LEASE_TABLE and send no request', async () => {
    const log = await openLog({ root, pipeline: 'p', experiment: 'e', env: { AWS_ENDPOINT_URL_S3: endpoint, AWS_REGION: 'us-east-1' } });
    try {
      for (const op of [() => log.append([batch]), () => log.maintain()]) {
        const e = await op().then(
          () => null,
          (err: unknown) => err,
        );
        expect(e).toBeInstanceOf(InvalidInputError);
        expect((e as InvalidInputError).field).toBe('DGCL_LEASE_TABLE');
        expect((e as InvalidInputError).message).toContain('set DGCL_LEASE_TABLE');
      }
      expect(requests).toEqual([]);
      // The recorder does see this client's requests: a point read first reads the log's
      // coordination record (where the item's marker is), from S3.
      await codeOf(log.fold('a'));
      expect(requests[0]).toMatch(/^GET \/dgcl-leaseless\/runs\/datagen_checkpoints\/p\/e\/log\.lance\/_dgcl\/coordination\?/);
    } finally {
      await log.close();
    }
  });

  it('the CLI: fold reaches S3 (exit 75, UNAVAILABLE); append exits 2 naming DGCL_LEASE_TABLE with no request', async () => {
    const flags = ['--root', root, '--pipeline', 'p', '--experiment', 'cli'];
    const fold = await dgcl(['fold', ...flags, '--item', 'a'], { env: { ...AWS, DGCL_LEASE_TABLE: '', AWS_ENDPOINT_URL_S3: CLOSED } });
    expect(fold.code, fold.stderr).toBe(75);
    expect(fold.stderr).toMatch(/^dgcl: UNAVAILABLE: S3 get s3:\/\/dgcl-leaseless\/runs\/datagen_checkpoints\/p\/cli\/log\.lance\/_dgcl\/coordination .*ECONNREFUSED/);
    expect(fold.stderr).not.toContain('DGCL_LEASE_TABLE');
    requests.length = 0;
    const append = await dgcl(['append', ...flags], { env: { ...AWS, DGCL_LEASE_TABLE: '', AWS_ENDPOINT_URL_S3: endpoint }, stdin: `${JSON.stringify(batch)}\n` });
    expect(append.code, append.stderr).toBe(2);
    expect(append.stderr).toContain('dgcl: INVALID_INPUT: DGCL_LEASE_TABLE: an s3:// root needs a DynamoDB lease table to append or maintain');
    expect(append.stdout).toBe('');
    expect(requests).toEqual([]);
  }, 240_000); // two CLI processes (tsx start-up): seconds apiece on a loaded machine
});
