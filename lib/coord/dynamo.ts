/**
 * Coordination records (item markers, checkpoint claims) in the lease table: one DynamoDB item
 * per record, in the table DynamoLeaseStore uses (partition key `pk` String, no sort key,
 * TTL attribute `ttl` in epoch seconds). Why: docs/design/performance.md, "What would reach
 * the S3 targets" -- a group commit reads all its markers in one request instead of one GET each.
 *
 * Item attributes:
 *   pk    S  `${scope}/${key}`: the log's scope keeps logs sharing the table apart. Scopes
 *            end in the log's id (a UUID, lib/coord/choose.ts), so no pk of one scope is the pk
 *            of another, nor a lease key (`<pipeline>/<experiment>/slot/<n>`, `.../maintainer`)
 *   body  S  the record
 *   ttl   N  epoch seconds after which DynamoDB may delete the item; only on putIfAbsent records
 *            (claims), never on put records (markers), which a PutItem replaces whole
 *
 * Resends: the SDK resends a request whose answer it did not get, and the first copy may still
 * land. That is harmless for reads, deletes and conditional creates (see putIfAbsent), but a
 * resent `put` could land after a later writer's put and restore an old body, so `put` is sent
 * once (lib/storage/send-once.ts).
 */
import { guard } from '../guards.ts';
import {
  type AttributeValue,
  BatchGetItemCommand,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { type Clock, systemClock } from '../clock.ts';
import { CorruptError, type DgclError, InvalidInputError, UnavailableError } from '../errors.ts';
import { classifyDynamoError } from '../lease/dynamo-errors.ts';
import { sendOnce } from '../storage/send-once.ts';
import type { CoordKind, CoordStore } from './types.ts';

export interface DynamoCoordStoreOptions {
  /** An injected client (the caller owns it). */
  client: DynamoDBClient;
  /** The lease table (`DGCL_LEASE_TABLE`). */
  table: string;
  /** The log's scope (`<pipeline>/<experiment>/<logId>`): prefixes every key. */
  scope: string;
  /** For claims' `ttl` and getMany's backoff; defaults to the system clock. */
  clock?: Clock;
}

/** DynamoDB's limits: keys per BatchGetItem, bytes of a partition key, bytes of an item. */
const BATCH_GET_MAX = 100;
const PK_MAX_BYTES = 2048;
const ITEM_MAX_BYTES = 400 * 1024;
/** Tries of one chunk of getMany while DynamoDB leaves keys unprocessed (throttled reads). */
const UNPROCESSED_TRIES = 8;
const BACKOFF_FIRST_MS = 25;
const BACKOFF_MAX_MS = 1_000;

/** Attribute names go through #names: TTL is a reserved word, and the others stay safe too. */
const NAMES = { '#pk': 'pk', '#body': 'body' } as const;

export class DynamoCoordStore implements CoordStore {
  readonly kind: CoordKind = 'table';
  readonly table: string;
  readonly scope: string;
  private readonly client: DynamoDBClient;
  private readonly clock: Clock;

  constructor(options: DynamoCoordStoreOptions) {
    if (typeof options.table !== 'string' || !/^[A-Za-z0-9_.-]{3,255}$/.test(options.table)) {
      throw new InvalidInputError('not a DynamoDB table name', { field: 'table' });
    }
    if (typeof options.scope !== 'string' || options.scope === '' || /^\/|\/$/.test(options.scope)) {
      throw new InvalidInputError(`${JSON.stringify(options.scope)} is not a scope (non-empty, no leading or trailing '/')`, {
        field: 'scope',
      });
    }
    this.client = options.client;
    this.table = options.table;
    this.scope = options.scope;
    this.clock = options.clock ?? systemClock;
  }

  /** 1 request: GetItem, ConsistentRead, body only. */
  async get(key: string): Promise<string | null> {
    const pk = this.pk(key, 'key');
    try {
      const out = await this.client.send(
        new GetItemCommand({
          TableName: this.table,
          Key: { pk: { S: pk } },
          ConsistentRead: true,
          ProjectionExpression: '#body',
          ExpressionAttributeNames: { '#body': NAMES['#body'] },
        }),
      );
      if (!out.Item) return null;
      return bodyOf(out.Item, pk);
    } catch (e) {
      throw this.classify(e, 'get', key);
    }
  }

  /**
   * One consistent BatchGetItem per 100 distinct keys (chunks sent together). Keys DynamoDB
   * leaves unprocessed (throttling) are asked again after a backoff: reads are safe to resend.
   * Every key of the input is in the answer, absent ones as null. No request for no keys.
   */
  async getMany(keys: readonly string[]): Promise<Map<string, string | null>> {
    if (!Array.isArray(keys)) throw new InvalidInputError('not an array of keys', { field: 'keys' });
    const unique = [...new Set(keys)];
    // validate all before sending any: bad input sends nothing
    unique.forEach((k) => this.pk(k, `keys[${keys.indexOf(k)}]`));
    const out = new Map<string, string | null>(unique.map((k) => [k, null]));
    const chunks: string[][] = [];
    for (let i = 0; i < unique.length; i += BATCH_GET_MAX) chunks.push(unique.slice(i, i + BATCH_GET_MAX));
    await Promise.all(chunks.map((chunk) => this.getChunk(chunk, out)));
    return out;
  }

  /**
   * 1 request: PutItem without condition, no `ttl` (a marker lives as long as its log). Sent
   * once: any failure is thrown (UnavailableError for faults) and never resent, because the
   * first try may land late, after a later writer's put, and restore an old body. A failed call
   * may still have landed; callers retry with a new body.
   */
  async put(key: string, body: string): Promise<void> {
    const pk = this.pk(key, 'key');
    this.checkBody(pk, body);
    try {
      const cmd = new PutItemCommand({ TableName: this.table, Item: { pk: { S: pk }, body: { S: body } } });
      await (guard('put-sent-once') ? sendOnce(cmd, (c) => this.client.send(c)) : this.client.send(cmd));
    } catch (e) {
      throw this.classify(e, 'put', key);
    }
  }

  /**
   * 1 request: PutItem if attribute_not_exists(pk), with `ttl` = now + expiresAfterMs (epoch
   * seconds, rounded up) so DynamoDB deletes old claims. True only when this call's own request
   * was answered 200. The SDK may resend after a first try that landed (answer lost): the resend
   * fails the condition and the call returns false for its own record. Bodies are never
   * compared, since two callers with identical bodies would then both "win": callers recognise
   * their own write by a nonce in the body (ObjectStore.putIfAbsent, lib/storage/s3.ts).
   */
  async putIfAbsent(key: string, body: string, o: { expiresAfterMs: number }): Promise<boolean> {
    const pk = this.pk(key, 'key');
    this.checkBody(pk, body);
    const after = o?.expiresAfterMs;
    if (typeof after !== 'number' || !Number.isFinite(after) || after <= 0) {
      throw new InvalidInputError(`${String(after)} is not a positive number of milliseconds`, {
        field: 'expiresAfterMs',
      });
    }
    const ttl = Math.ceil((this.clock.nowMs() + after) / 1000);
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: { pk: { S: pk }, body: { S: body }, ttl: { N: String(ttl) } },
          ConditionExpression: 'attribute_not_exists(#pk)',
          ExpressionAttributeNames: { '#pk': NAMES['#pk'] },
        }),
      );
      return true;
    } catch (e) {
      if (isConditionFailed(e)) return false;
      throw this.classify(e, 'putIfAbsent', key);
    }
  }

  /** 1 request: DeleteItem (absent is fine; a resend deletes nothing more). */
  async delete(key: string): Promise<void> {
    const pk = this.pk(key, 'key');
    try {
      await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: { pk: { S: pk } } }));
    } catch (e) {
      throw this.classify(e, 'delete', key);
    }
  }

  /** Nothing to do, no request: claims carry a `ttl` and DynamoDB deletes them. */
  async deleteClaimsOlderThan(_cutoffMs: number): Promise<number> {
    return 0;
  }

  /** One chunk (<= 100 distinct keys) of getMany into `out`. */
  private async getChunk(chunk: string[], out: Map<string, string | null>): Promise<void> {
    let pending: Array<Record<string, AttributeValue>> = chunk.map((k) => ({ pk: { S: this.pkOf(k) } }));
    for (let attempt = 0; ; attempt++) {
      let answer;
      try {
        answer = await this.client.send(
          new BatchGetItemCommand({
            RequestItems: {
              [this.table]: {
                Keys: pending,
                ConsistentRead: true,
                ProjectionExpression: '#pk, #body',
                ExpressionAttributeNames: { ...NAMES },
              },
            },
          }),
        );
      } catch (e) {
        throw this.classify(e, 'getMany', `${chunk.length} keys from ${chunk[0]}`);
      }
      for (const item of answer.Responses?.[this.table] ?? []) {
        const pk = item.pk?.S;
        const key = pk === undefined ? undefined : this.keyOf(pk);
        if (key === undefined || !out.has(key)) {
          throw new CorruptError(`getMany in table ${this.table} answered an item not asked for: ${JSON.stringify(item)}`);
        }
        out.set(key, bodyOf(item, pk!));
      }
      pending = answer.UnprocessedKeys?.[this.table]?.Keys ?? [];
      if (pending.length === 0) return;
      if (attempt + 1 >= UNPROCESSED_TRIES) {
        throw new UnavailableError(
          `getMany in table ${this.table}: ${pending.length} keys still unprocessed after ${UNPROCESSED_TRIES} tries (throttled)`,
        );
      }
      await this.clock.sleep(Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** attempt));
    }
  }

  /** The item's pk for `key`, validated (InvalidInputError naming `field`). */
  private pk(key: string, field: string): string {
    if (typeof key !== 'string' || key === '') throw new InvalidInputError('a key must be a non-empty string', { field });
    if (key.startsWith('/')) throw new InvalidInputError(`${JSON.stringify(key)} starts with '/'`, { field });
    const pk = this.pkOf(key);
    const bytes = Buffer.byteLength(pk, 'utf8');
    if (bytes > PK_MAX_BYTES) {
      throw new InvalidInputError(`scope and key take ${bytes} bytes, more than DynamoDB's ${PK_MAX_BYTES}`, { field });
    }
    return pk;
  }

  private pkOf(key: string): string {
    return `${this.scope}/${key}`;
  }

  /** The key of a pk of this scope; undefined for another scope's. */
  private keyOf(pk: string): string | undefined {
    const prefix = `${this.scope}/`;
    return pk.startsWith(prefix) ? pk.slice(prefix.length) : undefined;
  }

  /** A body that fits in one item (DynamoDB refuses larger ones as a validation error). */
  private checkBody(pk: string, body: string): void {
    if (typeof body !== 'string') throw new InvalidInputError('the body must be a string', { field: 'body' });
    // attribute names and the ttl number take well under 64 bytes
    const bytes = Buffer.byteLength(body, 'utf8') + Buffer.byteLength(pk, 'utf8') + 64;
    if (bytes > ITEM_MAX_BYTES) {
      throw new InvalidInputError(`${bytes} bytes do not fit in one DynamoDB item (${ITEM_MAX_BYTES})`, { field: 'body' });
    }
  }

  private classify(e: unknown, op: string, key: string): DgclError {
    return classifyDynamoError(e, `coord ${op} of ${JSON.stringify(key)} in scope ${this.scope} of table ${this.table}`);
  }
}

function bodyOf(item: Record<string, AttributeValue>, pk: string): string {
  const body = item.body?.S;
  if (body === undefined) throw new CorruptError(`coord item ${JSON.stringify(pk)} has no string body: ${JSON.stringify(item)}`);
  return body;
}

/** By class name, so another copy of the SDK's exception is recognised too. */
function isConditionFailed(e: unknown): boolean {
  return (e as { name?: unknown } | null)?.name === 'ConditionalCheckFailedException';
}
