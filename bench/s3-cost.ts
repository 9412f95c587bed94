/**
 * Request accounting for the S3 bench: S3 requests by billing class (counted by the proxy in
 * test/support/s3-proxy.ts), DynamoDB requests by command (counted by a middleware on the lease
 * store's client, see `countDynamo`), and their cost at list prices. Pure except `countDynamo`,
 * which only installs the middleware.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Op } from '../test/support/s3-proxy.ts';

/** Requests seen in a window: S3 by operation class, DynamoDB by command name, S3 body bytes. */
export interface Requests {
  s3: Partial<Record<S3Op, number>>;
  ddb: Record<string, number>;
  /** S3 body bytes sent (`up`) and received (`down`), as the proxy counts them. */
  bytes?: { up: number; down: number };
}

/** S3 Standard us-east-1 and DynamoDB on-demand list prices, in dollars (stated in the output). */
export const PRICES = {
  /** PUT, COPY, POST, LIST: per request ($0.005 per 1,000). */
  s3ClassA: 0.005 / 1000,
  /** GET, HEAD and every other non-free request ($0.0004 per 1,000). */
  s3ClassB: 0.0004 / 1000,
  /** Per read request unit ($0.125 per million). */
  ddbRead: 0.125 / 1e6,
  /** Per write request unit ($0.625 per million). */
  ddbWrite: 0.625 / 1e6,
} as const;

export const PRICES_TEXT =
  'S3 Standard us-east-1: PUT/COPY/POST/LIST $0.005 per 1,000, GET/HEAD/other $0.0004 per 1,000, DELETE free; ' +
  'DynamoDB on-demand: $0.125 per 10^6 read units, $0.625 per 10^6 write units (one unit per request, and per key of a BatchGetItem: lease items, item markers and claims are < 1 KB, reads strongly consistent)';

const CLASS_A: readonly S3Op[] = ['PUT', 'PUT-if', 'COPY', 'POST', 'LIST'];
/** Print order of the S3 classes. */
const OPS: readonly S3Op[] = ['GET', 'HEAD', 'LIST', 'PUT', 'PUT-if', 'COPY', 'POST', 'DELETE', 'other'];
/** Reads billed one unit per request (items < 4 KB); a BatchGetItem is billed per key (KEYS). */
const DDB_READS = new Set(['GetItem', 'Query', 'Scan']);
/** Suffix of the counters of keys read by BatchGetItem requests (one read unit each): not requests. */
export const KEYS = '.keys';
const DDB_WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem']);

export function s3Total(r: Requests): number {
  return Object.values(r.s3).reduce((a, b) => a + (b ?? 0), 0);
}

/** Read units: single-item reads, and every key of a BatchGetItem. */
export function ddbReads(r: Requests): number {
  return Object.entries(r.ddb).reduce((a, [k, v]) => a + (DDB_READS.has(k) || k === `BatchGetItem${KEYS}` ? v : 0), 0);
}

export function ddbWrites(r: Requests): number {
  return Object.entries(r.ddb).reduce((a, [k, v]) => a + (DDB_WRITES.has(k) ? v : 0), 0);
}

/** `later - earlier`, key by key (counters only grow). */
export function diff(later: Requests, earlier: Requests): Requests {
  const sub = <K extends string>(a: Partial<Record<K, number>>, b: Partial<Record<K, number>>) => {
    const out: Partial<Record<K, number>> = {};
    for (const k of Object.keys(a) as K[]) {
      const d = (a[k] ?? 0) - (b[k] ?? 0);
      if (d !== 0) out[k] = d;
    }
    return out;
  };
  const out: Requests = { s3: sub(later.s3, earlier.s3), ddb: sub(later.ddb, earlier.ddb) as Record<string, number> };
  if (later.bytes) out.bytes = { up: later.bytes.up - (earlier.bytes?.up ?? 0), down: later.bytes.down - (earlier.bytes?.down ?? 0) };
  return out;
}

/** Dollars for the requests of `r` (table and control-plane calls such as DescribeTable are free). */
export function dollars(r: Requests): number {
  let s = 0;
  for (const [op, n] of Object.entries(r.s3) as [S3Op, number][]) {
    if (op === 'DELETE') continue;
    s += n * (CLASS_A.includes(op) ? PRICES.s3ClassA : PRICES.s3ClassB);
  }
  return s + ddbReads(r) * PRICES.ddbRead + ddbWrites(r) * PRICES.ddbWrite;
}

const num = (x: number): string => (Number.isInteger(x) ? String(x) : x < 0.1 ? x.toFixed(3) : x.toFixed(2));

/** "1.16 MB", "8.2 KB", "512 B" (decimal units, as S3 bills transfer). */
export function bytesText(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} KB`;
  return `${Math.round(n)} B`;
}

/**
 * "7.00 S3 (GET 1.00, PUT 2.00, PUT-if 4.00) + 1.00 DynamoDB (GetItem 1.00); S3 bytes 1.2 KB up,
 * 3.4 KB down", each divided by `per` (the bytes only when counted and not both zero).
 */
export function perText(r: Requests, per = 1): string {
  const s3 = OPS.filter((op) => r.s3[op]).map((op) => `${op} ${num(r.s3[op]! / per)}`);
  const ddbTotal = Object.entries(r.ddb).reduce((a, [k, v]) => a + (k.endsWith(KEYS) ? 0 : v), 0);
  const ddb = Object.keys(r.ddb)
    .sort()
    .map((k) => `${k} ${num(r.ddb[k]! / per)}`);
  const bytes = r.bytes && (r.bytes.up || r.bytes.down) ? `; S3 bytes ${bytesText(r.bytes.up / per)} up, ${bytesText(r.bytes.down / per)} down` : '';
  return `${num(s3Total(r) / per)} S3${s3.length ? ` (${s3.join(', ')})` : ''}${ddbTotal ? ` + ${num(ddbTotal / per)} DynamoDB (${ddb.join(', ')})` : ''}${bytes}`;
}

/** JSON form of `r / per` for results/s3-latest.json. */
export function perJson(r: Requests, per = 1): { s3: Record<string, number>; s3Total: number; ddb: Record<string, number>; s3Bytes?: { up: number; down: number } } {
  const div = (o: Partial<Record<string, number>>) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, (v ?? 0) / per]));
  const out = { s3: div(r.s3), s3Total: s3Total(r) / per, ddb: div(r.ddb) };
  return r.bytes ? { ...out, s3Bytes: { up: r.bytes.up / per, down: r.bytes.down / per } } : out;
}

/**
 * Counts every DynamoDB HTTP request `client` sends, by command name, into `into`, and the keys
 * each BatchGetItem asks for under `BatchGetItem.keys` (billed per key). The middleware sits in
 * the finalizeRequest step at low priority, i.e. inside the SDK's retry middleware (high
 * priority in the same step): a retried request counts once per attempt, as DynamoDB bills it.
 */
export function countDynamo(client: DynamoDBClient, into: Record<string, number>): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const name = (context.commandName ?? 'unknown').replace(/Command$/, '');
      into[name] = (into[name] ?? 0) + 1;
      if (name === 'BatchGetItem') {
        const body = (args.request as { body?: unknown }).body;
        const asked = JSON.parse(typeof body === 'string' ? body : '{}') as { RequestItems?: Record<string, { Keys?: unknown[] }> };
        const keys = Object.values(asked.RequestItems ?? {}).reduce((a, t) => a + (t.Keys?.length ?? 0), 0);
        into[`${name}${KEYS}`] = (into[`${name}${KEYS}`] ?? 0) + keys;
      }
      return next(args);
    },
    { step: 'finalizeRequest', priority: 'low', name: 'dgclBenchCountRequests' },
  );
}
