/**
 * A small HTTP proxy in front of the local S3 server (loopback only) that counts requests and
 * can inject faults: 503 SlowDown answers and delayed answers. Used by the fault tests and the
 * S3 bench (requests per batch). Faults are decided per request by a seeded generator.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ProxyOptions {
  /** Upstream, e.g. http://127.0.0.1:7480 */
  target: string;
  /** Probability of answering 503 instead of forwarding (default 0). */
  failRate?: number;
  /** Probability of holding the answer back for `delayMs` (default 0). */
  delayRate?: number;
  delayMs?: number;
  seed?: number;
}

export interface S3Proxy {
  endpoint: string;
  counts: { total: number; byMethod: Record<string, number>; failed: number; delayed: number; conditionalPuts: number };
  reset(): void;
  set(o: Partial<Pick<ProxyOptions, 'failRate' | 'delayRate' | 'delayMs'>>): void;
  close(): Promise<void>;
}

export async function startS3Proxy(o: ProxyOptions): Promise<S3Proxy> {
  const target = new URL(o.target);
  let { failRate = 0, delayRate = 0, delayMs = 1500 } = o;
  let state = o.seed ?? 42;
  const rand = () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x7fffffff;
  };
  const counts = { total: 0, byMethod: {} as Record<string, number>, failed: 0, delayed: 0, conditionalPuts: 0 };
  const server = http.createServer((req, res) => {
    counts.total++;
    counts.byMethod[req.method ?? '?'] = (counts.byMethod[req.method ?? '?'] ?? 0) + 1;
    if (req.method === 'PUT' && (req.headers['if-none-match'] || req.headers['if-match'])) counts.conditionalPuts++;
    if (rand() < failRate) {
      counts.failed++;
      req.resume();
      req.on('end', () => {
        res.writeHead(503, { 'content-type': 'application/xml' });
        res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>injected by the test proxy</Message></Error>');
      });
      return;
    }
    const delay = rand() < delayRate ? delayMs : 0;
    if (delay) counts.delayed++;
    const up = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (ur) => {
        setTimeout(() => {
          res.writeHead(ur.statusCode ?? 502, ur.headers);
          ur.pipe(res);
        }, delay);
      },
    );
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    counts,
    reset() {
      counts.total = 0;
      counts.byMethod = {};
      counts.failed = 0;
      counts.delayed = 0;
      counts.conditionalPuts = 0;
    },
    set(n) {
      if (n.failRate !== undefined) failRate = n.failRate;
      if (n.delayRate !== undefined) delayRate = n.delayRate;
      if (n.delayMs !== undefined) delayMs = n.delayMs;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
