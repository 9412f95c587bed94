// The S3 bench's request accounting (bench/s3-cost.ts) and the proxy's operation classes
// (test/support/s3-proxy.ts, s3Op): pure, no servers.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { bytesText, diff, dollars, perJson, perText, s3Total, type Requests } from '../../bench/s3-cost.ts';
import { s3Op, startS3Proxy } from '../support/s3-proxy.ts';

const q = (s = '') => new URLSearchParams(s);

describe('s3Op', () => {
  it('classes requests as S3 bills them', () => {
    expect(s3Op('GET', '/b/k', q(), {})).toBe('GET');
    expect(s3Op('GET', '/b', q('list-type=2&prefix=x/'), {})).toBe('LIST');
    expect(s3Op('GET', '/b/', q('prefix=x/'), {})).toBe('LIST'); // ListObjects v1
    expect(s3Op('HEAD', '/b/k', q(), {})).toBe('HEAD');
    expect(s3Op('PUT', '/b/k', q(), {})).toBe('PUT');
    expect(s3Op('PUT', '/b/k', q(), { 'if-none-match': '*' })).toBe('PUT-if');
    expect(s3Op('PUT', '/b/k', q(), { 'if-match': '"e"' })).toBe('PUT-if');
    expect(s3Op('PUT', '/b/k', q(), { 'x-amz-copy-source': '/b/j' })).toBe('COPY');
    expect(s3Op('POST', '/b/k', q('uploads'), {})).toBe('POST');
    expect(s3Op('POST', '/b', q('delete'), {})).toBe('DELETE');
    expect(s3Op('DELETE', '/b/k', q(), {})).toBe('DELETE');
  });
});

describe('request accounting', () => {
  const r: Requests = { s3: { GET: 1000, 'PUT-if': 2000, PUT: 1000, LIST: 1000, DELETE: 5000 }, ddb: { GetItem: 1000, UpdateItem: 1000, DescribeTable: 3 } };

  it('prices class A, class B, free deletes and DynamoDB units at the stated list prices', () => {
    // 4,000 class A x $0.005/1000 = $0.02; 1,000 GETs x $0.0004/1000 = $0.0004; deletes free;
    // 1,000 reads x $0.125/1e6 = $0.000125; 1,000 writes x $0.625/1e6 = $0.000625; DescribeTable free
    expect(dollars(r)).toBeCloseTo(0.02 + 0.0004 + 0.000125 + 0.000625, 12);
  });

  it('subtracts windows and divides per unit', () => {
    const later: Requests = { s3: { GET: 5, PUT: 3 }, ddb: { GetItem: 2 } };
    const earlier: Requests = { s3: { GET: 1, PUT: 3 }, ddb: {} };
    expect(diff(later, earlier)).toEqual({ s3: { GET: 4 }, ddb: { GetItem: 2 } });
    expect(s3Total(r)).toBe(10_000);
    expect(perText({ s3: { GET: 2, 'PUT-if': 4, PUT: 6 }, ddb: { GetItem: 2 } }, 2)).toBe('6 S3 (GET 1, PUT 3, PUT-if 2) + 1 DynamoDB (GetItem 1)');
    expect(perText({ s3: { GET: 1 }, ddb: {} }, 4)).toBe('0.25 S3 (GET 0.25)');
    expect(perJson({ s3: { GET: 3 }, ddb: { GetItem: 1 } }, 2)).toEqual({ s3: { GET: 1.5 }, s3Total: 1.5, ddb: { GetItem: 0.5 } });
  });

  it('bills a BatchGetItem per key, and counts its keys apart from the requests', () => {
    const b: Requests = { s3: {}, ddb: { BatchGetItem: 2, 'BatchGetItem.keys': 150, PutItem: 10 } };
    // 150 read units x $0.125/1e6 + 10 write units x $0.625/1e6
    expect(dollars(b)).toBeCloseTo(150 * 0.125e-6 + 10 * 0.625e-6, 12);
    expect(perText(b, 2)).toBe('0 S3 + 6 DynamoDB (BatchGetItem 1, BatchGetItem.keys 75, PutItem 5)');
  });
});

describe('S3 bytes', () => {
  it('subtracts and divides the bytes with the requests, and prints them', () => {
    const later: Requests = { s3: { GET: 4 }, ddb: {}, bytes: { up: 300, down: 2_500_000 } };
    const earlier: Requests = { s3: { GET: 2 }, ddb: {}, bytes: { up: 100, down: 500_000 } };
    const d = diff(later, earlier);
    expect(d).toEqual({ s3: { GET: 2 }, ddb: {}, bytes: { up: 200, down: 2_000_000 } });
    expect(perText(d, 2)).toBe('1 S3 (GET 1); S3 bytes 100 B up, 1.00 MB down');
    expect(perJson(d, 2)).toEqual({ s3: { GET: 1 }, s3Total: 1, ddb: {}, s3Bytes: { up: 100, down: 1_000_000 } });
    expect(perText({ s3: { GET: 1 }, ddb: {}, bytes: { up: 0, down: 0 } })).toBe('1 S3 (GET 1)');
    expect([bytesText(999), bytesText(8_250), bytesText(1_156_175)]).toEqual(['999 B', '8.3 KB', '1.16 MB']);
  });

  it('the proxy counts the body bytes it forwards each way, streamed or scripted', async () => {
    const answers = [Buffer.alloc(70_000, 1), Buffer.alloc(5, 2)];
    let n = 0;
    const upstream = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end(answers[n++ % answers.length]));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const target = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const send = async (endpoint: string, body: string) => {
      const res = await fetch(`${endpoint}/b/k`, { method: 'PUT', body });
      return (await res.arrayBuffer()).byteLength;
    };
    const plain = await startS3Proxy({ target });
    const scripted = await startS3Proxy({ target, script: () => 'forward' });
    try {
      expect(await send(plain.endpoint, 'x'.repeat(1234))).toBe(70_000);
      expect(plain.counts).toMatchObject({ bytesUp: 1234, bytesDown: 70_000 });
      expect(await send(scripted.endpoint, 'y'.repeat(10))).toBe(5);
      expect(scripted.counts).toMatchObject({ bytesUp: 10, bytesDown: 5 });
      plain.reset();
      expect(plain.counts).toMatchObject({ bytesUp: 0, bytesDown: 0 });
    } finally {
      await plain.close();
      await scripted.close();
      await new Promise((r) => upstream.close(r));
    }
  });
});
