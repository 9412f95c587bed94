/**
 * A small HTTP proxy in front of the local S3 server (loopback only) that counts requests and
 * can inject faults: 503 SlowDown answers and delayed answers, decided per request by a seeded
 * generator. Used by the fault tests and the S3 bench (requests per batch, by `s3Op` billing class).
 *
 * An optional `script` decides per request what the proxy does instead: answer it itself (an S3
 * error such as 409 ConditionalRequestConflict or 501 NotImplemented, or any status and body),
 * forward it (then the random faults above apply), or forward it and answer 500 once the server
 * has answered (a lost answer: the request landed, the client does not know and resends). While
 * a script is set, request bodies are read in full before the script sees them.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startFaultProxy, s3ErrorAnswer, type FaultProxy, type FaultRequest } from './fault-proxy.ts';

/**
 * What an S3 request does for the log, from its method, key, query and headers (path-style
 * `/bucket/key`). The kinds the fault tests inject faults on:
 *  - `lance-commit`: a Lance manifest PUT under `_versions/` with If-None-Match (the commit point);
 *  - `lance-data`: any other Lance PUT / POST (data files, transaction files, multipart parts);
 *  - `claim`, `item-marker`, `seal`, `gen-marker`, `retired-marker`, `base-marker`, `log-id`,
 *    `coordination`: the log's own objects;
 *  - `list`: the log's listing of `_dgcl/meta/` (how readers and writers learn the generations);
 *    `lance-list`: every other ListObjectsV2 (Lance's, the log's deletions');
 *  - `head`, `get`: reads; `delete`: DeleteObject(s).
 */
export type S3Kind =
  | 'lance-commit'
  | 'lance-data'
  | 'claim'
  | 'item-marker'
  | 'seal'
  | 'gen-marker'
  | 'retired-marker'
  | 'base-marker'
  | 'log-id'
  | 'coordination'
  | 'list'
  | 'lance-list'
  | 'head'
  | 'get'
  | 'delete'
  | 'other';

export function s3Kind(method: string, path: string, query: URLSearchParams, headers: http.IncomingHttpHeaders): S3Kind {
  if (method === 'DELETE' || (method === 'POST' && query.has('delete'))) return 'delete';
  if (method === 'GET' && query.get('list-type') === '2') return /(^|\/)_dgcl\/meta\/?$/.test(query.get('prefix') ?? '') ? 'list' : 'lance-list';
  if (method === 'HEAD') return 'head';
  if (method === 'GET') return 'get';
  if (method !== 'PUT' && method !== 'POST') return 'other';
  if (path.includes('/_dgcl/claims/')) return 'claim';
  if (path.includes('/_dgcl/items/')) return 'item-marker';
  if (path.includes('/_dgcl/meta/seal.')) return 'seal';
  if (path.includes('/_dgcl/meta/gen.')) return 'gen-marker';
  if (path.includes('/_dgcl/meta/retired.')) return 'retired-marker';
  if (path.endsWith('/_dgcl/meta/base')) return 'base-marker';
  if (path.includes('/_dgcl/meta/log.')) return 'log-id';
  if (path.endsWith('/_dgcl/coordination')) return 'coordination';
  if (path.includes('/_versions/') && (headers['if-none-match'] || headers['if-match'])) return 'lance-commit';
  return 'lance-data';
}

/**
 * The S3 API operation class of a request, as S3 bills it (the bench's requests by kind):
 * `PUT-if` is a conditional PUT (If-None-Match / If-Match: Lance's commits, the log's claims),
 * `COPY` a PUT with x-amz-copy-source, `POST` a multipart create / complete, `LIST` a bucket
 * listing, `DELETE` a DeleteObject or a DeleteObjects POST.
 */
export type S3Op = 'GET' | 'HEAD' | 'LIST' | 'PUT' | 'PUT-if' | 'COPY' | 'POST' | 'DELETE' | 'other';

export function s3Op(method: string, path: string, query: URLSearchParams, headers: http.IncomingHttpHeaders): S3Op {
  if (method === 'DELETE' || (method === 'POST' && query.has('delete'))) return 'DELETE';
  // path-style: `/bucket` or `/bucket/` alone is a request on the bucket, i.e. a listing
  if (method === 'GET' && (query.get('list-type') === '2' || /^\/[^/]+\/?$/.test(path))) return 'LIST';
  if (method === 'GET') return 'GET';
  if (method === 'HEAD') return 'HEAD';
  if (method === 'POST') return 'POST';
  if (method !== 'PUT') return 'other';
  if (headers['x-amz-copy-source']) return 'COPY';
  return headers['if-none-match'] || headers['if-match'] ? 'PUT-if' : 'PUT';
}

export const classifyS3 = (r: FaultRequest): S3Kind => s3Kind(r.method, r.path, r.query, r.headers);

/** A fault proxy (./fault-proxy.ts) in front of S3, with requests classified by `s3Kind`. */
export function startS3FaultProxy(target: string, holdMs?: number): Promise<FaultProxy> {
  return startFaultProxy({ target, classify: classifyS3, errorAnswer: s3ErrorAnswer, ...(holdMs !== undefined ? { holdMs } : {}) });
}

export interface ProxyOptions {
  /** Upstream, e.g. http://127.0.0.1:7480 */
  target: string;
  /** Probability of answering 503 instead of forwarding (default 0). */
  failRate?: number;
  /** Probability of holding the answer back for `delayMs` (default 0). */
  delayRate?: number;
  delayMs?: number;
  seed?: number;
  /** Decides per request what to do (default: forward everything). */
  script?: ProxyScript | undefined;
}

/** What a script sees of one request. Keys assume path-style addressing (`/bucket/key`). */
export interface ProxyRequest {
  method: string;
  /** Path and query as received, e.g. `/bucket/a/b?x-id=PutObject`. */
  url: string;
  /** The first path segment. */
  bucket: string;
  /** The rest of the path, decoded ('' for requests on the bucket, such as listings). */
  key: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  /** The whole request body. */
  body: Buffer;
}

/** An answer the proxy gives itself, without asking the server. */
export interface ProxyAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/**
 * `'forward'`: pass the request on (subject to failRate / delayRate); `'forward-then-fail'`: pass
 * it on, wait for the server's whole answer, drop it and answer 500 InternalError instead.
 */
export type ScriptDecision = ProxyAnswer | 'forward' | 'forward-then-fail';
export type ProxyScript = (req: ProxyRequest) => ScriptDecision | Promise<ScriptDecision>;

export interface ProxyCounts {
  total: number;
  /** Requests by `s3Kind`. */
  byKind: Partial<Record<S3Kind, number>>;
  byMethod: Record<string, number>;
  /** Requests by `s3Op` (the billing class). */
  byOp: Partial<Record<S3Op, number>>;
  /** 503s from failRate. */
  failed: number;
  delayed: number;
  conditionalPuts: number;
  /** Requests the script answered itself. */
  scripted: number;
  /** Requests forwarded whose answer was replaced by a 500 ('forward-then-fail'). */
  lost: number;
  /** Body bytes of the requests forwarded upstream (uploads). */
  bytesUp: number;
  /** Body bytes of the server's answers passed back (downloads; not those replaced or lost). */
  bytesDown: number;
}

export interface S3Proxy {
  endpoint: string;
  counts: ProxyCounts;
  reset(): void;
  /** Changes the fault rates; `script` (when the key is present) replaces the script, undefined removes it. */
  set(o: Partial<Pick<ProxyOptions, 'failRate' | 'delayRate' | 'delayMs' | 'script'>>): void;
  close(): Promise<void>;
}

/** An S3 error answer: `<Error><Code>code</Code><Message>message</Message></Error>`. */
export function s3Error(status: number, code: string, message = 'injected by the test proxy'): ProxyAnswer {
  return {
    status,
    headers: { 'content-type': 'application/xml' },
    body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`,
  };
}

export async function startS3Proxy(o: ProxyOptions): Promise<S3Proxy> {
  const target = new URL(o.target);
  let { failRate = 0, delayRate = 0, delayMs = 1500 } = o;
  let script = o.script;
  let state = o.seed ?? 42;
  const rand = () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x7fffffff;
  };
  const counts: ProxyCounts = {
    total: 0,
    byKind: {},
    byMethod: {},
    byOp: {},
    failed: 0,
    delayed: 0,
    conditionalPuts: 0,
    scripted: 0,
    lost: 0,
    bytesUp: 0,
    bytesDown: 0,
  };

  const answer = (res: http.ServerResponse, a: ProxyAnswer) => {
    const body = a.body === undefined ? Buffer.alloc(0) : Buffer.from(a.body);
    res.writeHead(a.status, { ...a.headers, 'content-length': String(body.byteLength) });
    res.end(body);
  };

  /** Sends the request upstream; `body` is the buffered body, else the request is streamed. */
  const forward = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer | undefined, lose: boolean) => {
    let delay = 0;
    if (!lose) {
      // the same two draws per forwarded request as without a script, so seeded runs replay
      if (rand() < failRate) {
        counts.failed++;
        const slowDown = () => answer(res, s3Error(503, 'SlowDown'));
        if (body) slowDown();
        else {
          req.resume();
          req.on('end', slowDown);
        }
        return;
      }
      delay = rand() < delayRate ? delayMs : 0;
      if (delay) counts.delayed++;
    }
    const up = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (ur) => {
        if (lose) {
          counts.lost++;
          ur.resume();
          ur.on('end', () => answer(res, s3Error(500, 'InternalError', 'answer lost by the test proxy')));
          return;
        }
        setTimeout(() => {
          res.writeHead(ur.statusCode ?? 502, ur.headers);
          ur.on('data', (c: Buffer) => (counts.bytesDown += c.byteLength));
          ur.pipe(res);
        }, delay);
      },
    );
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    if (body) {
      counts.bytesUp += body.byteLength;
      up.end(body);
    } else {
      req.on('data', (c: Buffer) => (counts.bytesUp += c.byteLength));
      req.pipe(up);
    }
  };

  const scripted = async (req: http.IncomingMessage, res: http.ServerResponse, s: ProxyScript) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const url = new URL(req.url ?? '/', 'http://proxy');
    const path = url.pathname.replace(/^\//, '');
    const slash = path.indexOf('/');
    const decision = await s({
      method: req.method ?? '?',
      url: req.url ?? '/',
      bucket: decodeURIComponent(slash < 0 ? path : path.slice(0, slash)),
      key: slash < 0 ? '' : decodeURIComponent(path.slice(slash + 1)),
      query: url.searchParams,
      headers: req.headers,
      body,
    });
    if (decision === 'forward' || decision === 'forward-then-fail') {
      forward(req, res, body, decision === 'forward-then-fail');
      return;
    }
    counts.scripted++;
    answer(res, decision);
  };

  const server = http.createServer((req, res) => {
    counts.total++;
    counts.byMethod[req.method ?? '?'] = (counts.byMethod[req.method ?? '?'] ?? 0) + 1;
    const u = new URL(req.url ?? '/', 'http://proxy');
    const kind = s3Kind(req.method ?? '?', decodeURIComponent(u.pathname), u.searchParams, req.headers);
    counts.byKind[kind] = (counts.byKind[kind] ?? 0) + 1;
    const op = s3Op(req.method ?? '?', decodeURIComponent(u.pathname), u.searchParams, req.headers);
    counts.byOp[op] = (counts.byOp[op] ?? 0) + 1;
    if (req.method === 'PUT' && (req.headers['if-none-match'] || req.headers['if-match'])) counts.conditionalPuts++;
    const s = script;
    if (!s) {
      forward(req, res, undefined, false);
      return;
    }
    scripted(req, res, s).catch((e: unknown) => {
      // a script that throws is a bug in the test: make it loud, not a retryable 5xx
      console.error('s3-proxy: script failed', e);
      if (!res.headersSent) answer(res, s3Error(400, 'ProxyScriptFailed', String(e)));
      else res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    counts,
    reset() {
      counts.total = 0;
      counts.byKind = {};
      counts.byMethod = {};
      counts.byOp = {};
      counts.failed = 0;
      counts.delayed = 0;
      counts.conditionalPuts = 0;
      counts.scripted = 0;
      counts.lost = 0;
      counts.bytesUp = 0;
      counts.bytesDown = 0;
    },
    set(n) {
      if (n.failRate !== undefined) failRate = n.failRate;
      if (n.delayRate !== undefined) delayRate = n.delayRate;
      if (n.delayMs !== undefined) delayMs = n.delayMs;
      if ('script' in n) script = n.script;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
