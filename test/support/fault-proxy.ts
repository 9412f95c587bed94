/**
 * A loopback HTTP proxy in front of one server (the local S3 or DynamoDB), generic over the
 * target: a `classify` function names each request's KIND (e.g. `lance-commit`, `claim`,
 * `ddb:GetItem`), the proxy counts requests by kind, and faults are armed on "the Nth request of
 * kind K from now on", so a test decides exactly which request goes wrong.
 *
 * Faults, by where the request is when things go wrong:
 *  - `fail-before`: answer a 503 without forwarding (nothing landed);
 *  - `lost-close`: forward, wait for the server's whole answer (the request landed), then
 *    destroy the client's connection without answering;
 *  - `lost-500` / `lost-503`: forward, wait for the whole answer, answer 500 / 503 instead;
 *  - `timeout`: forward, wait for the whole answer, hold it for `holdMs` (past the client's
 *    request timeout), then destroy the connection if the client is still waiting;
 *  - `stall`: forward and deliver the real answer `holdMs` late (slow, not lost).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Fault = 'fail-before' | 'lost-close' | 'lost-500' | 'lost-503' | 'timeout' | 'stall';

/** What the classifier sees of one request (the body is read in full first). */
export interface FaultRequest {
  method: string;
  /** Path and query as received. */
  url: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** An error answer in the target's dialect (S3: XML, DynamoDB: JSON). */
export type ErrorAnswer = (status: number, code: string, message: string) => { headers: Record<string, string>; body: string };

export interface FaultProxyOptions {
  target: string;
  classify(req: FaultRequest): string;
  errorAnswer: ErrorAnswer;
  /** How long `timeout` and `stall` hold an answer (default 4000 ms). */
  holdMs?: number;
}

export interface ArmOptions {
  /** The first request hit: the nth (1-based) of the kind seen from arming on (default 1). */
  nth?: number;
  /**
   * How many consecutive requests of the kind are hit (default 1). More than the clients'
   * retries (SDK: 3 attempts, Lance as opened by fault-log.ts: 3) makes the fault reach the log's
   * own code instead of being absorbed by a client retry.
   */
  count?: number;
  /** Only requests that pass this test count (e.g. one experiment's, so that tests can run side by side). */
  matches?: (req: FaultRequest) => boolean;
}

export interface ArmedFault {
  kind: string;
  fault: Fault;
  nth: number;
  count: number;
  /** The requests the fault hit: which, and the upstream status it hid (null: never forwarded). */
  hits: Array<{ method: string; path: string; upstreamStatus: number | null }>;
  /** Requests of this kind (that `matches`) seen since arming. */
  seen: number;
  matches?: (req: FaultRequest) => boolean;
}

export interface FaultProxy {
  endpoint: string;
  /** Requests by kind since the last reset. */
  byKind: Record<string, number>;
  /** Every request's kind, method and path since the last reset (newest last). */
  journal: Array<{ kind: string; method: string; path: string; status: number | null; fault: Fault | null }>;
  /** Arm a fault on requests of `kind` seen from now on (see ArmOptions; default: the next one). */
  arm(kind: string, fault: Fault, options?: ArmOptions): ArmedFault;
  /** Removes the given armed faults (default: all). */
  disarm(...which: ArmedFault[]): void;
  reset(): void;
  close(): Promise<void>;
}

export async function startFaultProxy(o: FaultProxyOptions): Promise<FaultProxy> {
  const target = new URL(o.target);
  const holdMs = o.holdMs ?? 4000;
  let armed: ArmedFault[] = [];
  const byKind: Record<string, number> = {};
  const journal: FaultProxy['journal'] = [];

  const sendError = (res: http.ServerResponse, status: number, code: string, message: string) => {
    const a = o.errorAnswer(status, code, message);
    const body = Buffer.from(a.body);
    res.writeHead(status, { ...a.headers, 'content-length': String(body.byteLength) });
    res.end(body);
  };

  /** The armed fault (if any) that this request of `kind` triggers; counts it for every armed fault of the kind. */
  const pick = (kind: string, req: FaultRequest): ArmedFault | null => {
    let hit: ArmedFault | null = null;
    for (const a of armed) {
      if (a.kind !== kind || (a.matches && !a.matches(req))) continue;
      a.seen++;
      if (!hit && a.seen >= a.nth && a.seen < a.nth + a.count) hit = a;
    }
    return hit;
  };

  const server = http.createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = Buffer.concat(chunks);
      const url = new URL(req.url ?? '/', 'http://proxy');
      const fr: FaultRequest = {
        method: req.method ?? '?',
        url: req.url ?? '/',
        path: decodeURIComponent(url.pathname),
        query: url.searchParams,
        headers: req.headers,
        body,
      };
      const kind = o.classify(fr);
      byKind[kind] = (byKind[kind] ?? 0) + 1;
      const a = pick(kind, fr);
      const entry = { kind, method: fr.method, path: fr.path, status: null as number | null, fault: a?.fault ?? null };
      journal.push(entry);
      if (a?.fault === 'fail-before') {
        a.hits.push({ method: fr.method, path: fr.path, upstreamStatus: null });
        entry.status = 503;
        sendError(res, 503, 'ServiceUnavailable', 'injected by the test proxy before forwarding');
        return;
      }
      const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
        const parts: Buffer[] = [];
        ur.on('data', (c: Buffer) => parts.push(c));
        ur.on('end', () => {
          const status = ur.statusCode ?? 502;
          entry.status = status;
          const upBody = Buffer.concat(parts);
          if (!a) {
            res.writeHead(status, ur.headers);
            res.end(upBody);
            return;
          }
          a.hits.push({ method: fr.method, path: fr.path, upstreamStatus: status });
          switch (a.fault) {
            case 'lost-close':
              res.socket?.destroy();
              return;
            case 'lost-500':
              sendError(res, 500, 'InternalError', 'answer lost by the test proxy');
              return;
            case 'lost-503':
              sendError(res, 503, 'ServiceUnavailable', 'answer lost by the test proxy');
              return;
            case 'timeout':
              setTimeout(() => res.socket?.destroy(), holdMs);
              return;
            case 'stall':
              setTimeout(() => {
                if (res.socket?.destroyed) return;
                res.writeHead(status, ur.headers);
                res.end(upBody);
              }, holdMs);
              return;
          }
        });
      });
      up.on('error', () => {
        if (!res.headersSent) res.writeHead(502);
        res.end();
      });
      up.end(body);
    })().catch((e: unknown) => {
      console.error('fault-proxy: request failed', e);
      res.socket?.destroy();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    byKind,
    journal,
    arm(kind, fault, options = {}) {
      const { nth = 1, count = 1, matches } = options;
      const a: ArmedFault = { kind, fault, nth, count, hits: [], seen: 0, ...(matches ? { matches } : {}) };
      armed.push(a);
      return a;
    },
    disarm(...which) {
      armed = which.length === 0 ? [] : armed.filter((a) => !which.includes(a));
    },
    reset() {
      for (const k of Object.keys(byKind)) delete byKind[k];
      journal.length = 0;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** S3's error dialect. */
export const s3ErrorAnswer: ErrorAnswer = (_status, code, message) => ({
  headers: { 'content-type': 'application/xml' },
  body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`,
});

/** DynamoDB's error dialect (JSON 1.0 `__type`). */
export const dynamoErrorAnswer: ErrorAnswer = (status, code, message) => ({
  headers: { 'content-type': 'application/x-amz-json-1.0' },
  body: JSON.stringify({
    __type: `com.amazonaws.dynamodb.v20120810#${status >= 500 ? (status === 503 ? 'ServiceUnavailable' : 'InternalServerError') : code}`,
    message,
  }),
});

/** DynamoDB request kinds: `ddb:<Operation>` from the X-Amz-Target header. */
export function classifyDynamo(req: FaultRequest): string {
  const t = String(req.headers['x-amz-target'] ?? '');
  return `ddb:${t.split('.').pop() || '?'}`;
}
