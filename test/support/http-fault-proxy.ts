/**
 * A generic HTTP forwarding proxy on loopback for fault tests of any HTTP service (DynamoDB
 * Local, RGW, ...): the client under test talks to the real server through it, and a script
 * decides per request what happens. The case it exists for is "the request landed, the answer
 * was lost": the proxy forwards the request, waits for the server's whole answer, then drops it
 * and answers an error (or resets the connection) instead, so the SDK resends a request the
 * server already applied.
 *
 * Every request body is read in full before the script sees it. Every request is recorded in
 * `log` with the script's decision and, when forwarded, the server's status and body, so tests
 * can assert what the server really answered to each try.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FaultRequest {
  /** 0, 1, 2, ... in arrival order. */
  index: number;
  method: string;
  /** Path and query as received. */
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** An answer the proxy gives itself. */
export interface FaultAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/**
 * - `'forward'`: pass on, pass the answer back.
 * - `'forward-then-fail'`: pass on, wait for the server's answer, drop it and send `lostAnswer`.
 * - `'forward-then-reset'`: pass on, wait for the server's answer, then destroy the client's
 *   connection without answering.
 * - `'reset'`: destroy the client's connection without forwarding.
 * - a FaultAnswer: answer it without forwarding.
 */
export type FaultDecision = 'forward' | 'forward-then-fail' | 'forward-then-reset' | 'reset' | FaultAnswer;
export type FaultScript = (req: FaultRequest) => FaultDecision | Promise<FaultDecision>;

export interface FaultLogEntry {
  req: FaultRequest;
  decision: FaultDecision;
  /** The server's status, for forwarded requests (after it answered). */
  upstreamStatus?: number;
  /** The server's body, for forwarded requests (after it answered). */
  upstreamBody?: string;
}

export interface HttpFaultProxyOptions {
  /** Upstream base, e.g. http://127.0.0.1:8011 */
  target: string;
  script?: FaultScript;
  /** What `'forward-then-fail'` answers; default 503 with a plain-text body. */
  lostAnswer?: FaultAnswer;
}

export interface HttpFaultProxy {
  endpoint: string;
  log: FaultLogEntry[];
  /** Replaces the script (undefined: forward everything) and clears the log. */
  setScript(script: FaultScript | undefined): void;
  close(): Promise<void>;
}

const DEFAULT_LOST: FaultAnswer = {
  status: 503,
  headers: { 'content-type': 'text/plain' },
  body: 'answer lost by the test proxy',
};

export async function startHttpFaultProxy(o: HttpFaultProxyOptions): Promise<HttpFaultProxy> {
  const target = new URL(o.target);
  let script = o.script;
  const lostAnswer = o.lostAnswer ?? DEFAULT_LOST;
  const log: FaultLogEntry[] = [];
  let index = 0;

  const answer = (res: http.ServerResponse, a: FaultAnswer) => {
    const body = a.body === undefined ? Buffer.alloc(0) : Buffer.from(a.body);
    res.writeHead(a.status, { ...a.headers, 'content-length': String(body.byteLength) });
    res.end(body);
  };

  const forward = (req: http.IncomingMessage, res: http.ServerResponse, entry: FaultLogEntry) => {
    const headers = { ...req.headers, host: target.host };
    const up = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent: false },
      (ur) => {
        const chunks: Buffer[] = [];
        ur.on('data', (c: Buffer) => chunks.push(c));
        ur.on('end', () => {
          const body = Buffer.concat(chunks);
          entry.upstreamStatus = ur.statusCode;
          entry.upstreamBody = body.toString('utf8');
          if (entry.decision === 'forward-then-fail') return answer(res, lostAnswer);
          if (entry.decision === 'forward-then-reset') return void req.socket.destroy();
          const h = { ...ur.headers };
          delete h['transfer-encoding'];
          res.writeHead(ur.statusCode ?? 502, { ...h, 'content-length': String(body.byteLength) });
          res.end(body);
        });
      },
    );
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    up.end(entry.req.body);
  };

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const r: FaultRequest = {
      index: index++,
      method: req.method ?? '?',
      url: req.url ?? '/',
      headers: req.headers,
      body: Buffer.concat(chunks),
    };
    const decision = script ? await script(r) : 'forward';
    const entry: FaultLogEntry = { req: r, decision };
    log.push(entry);
    if (decision === 'reset') return void req.socket.destroy();
    if (typeof decision === 'string') return forward(req, res, entry);
    answer(res, decision);
  };

  const server = http.createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      // a throwing script is a bug in the test: make it loud, never a retryable 5xx
      console.error('http-fault-proxy: script failed', e);
      if (!res.headersSent) answer(res, { status: 400, body: `proxy script failed: ${String(e)}` });
      else res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    log,
    setScript(s) {
      script = s;
      log.length = 0;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** The DynamoDB operation of a request (`PutItem`, ...), from its X-Amz-Target header. */
export const dynamoOp = (r: FaultRequest): string => String(r.headers['x-amz-target'] ?? '').replace('DynamoDB_20120810.', '');

/** What DynamoDB answered to each try of operation `kind` through `proxy`: status, and the error type unless 200 (none: never forwarded). */
export function dynamoTries(proxy: HttpFaultProxy, kind: string): Array<{ status?: number; error?: string }> {
  return proxy.log
    .filter((e) => dynamoOp(e.req) === kind)
    .map((e) => ({
      status: e.upstreamStatus,
      ...(e.upstreamStatus === undefined || e.upstreamStatus === 200 ? {} : { error: String(JSON.parse(e.upstreamBody ?? '{}').__type).split('#')[1] }),
    }));
}

/** A DynamoDB server fault as its JSON protocol sends it (the SDK retries any 5xx): what a proxy answers for a lost answer. */
export const DYNAMO_LOST_ANSWER: FaultAnswer = {
  status: 500,
  headers: { 'content-type': 'application/x-amz-json-1.0' },
  body: JSON.stringify({ __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: 'answer lost' }),
};
