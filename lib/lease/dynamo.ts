/**
 * DynamoLeaseStore: leases in one DynamoDB table (partition key `pk` String, no sort
 * key, TTL attribute `ttl` in epoch seconds). Design: docs/design/leases.md.
 *
 * One item per key, never deleted by us: release empties `owner` and zeroes `expiresAtMs` but
 * keeps `epoch`, so the counter survives. Every write is a single conditional UpdateItem whose
 * condition is one of the named fragments below (the server-side restatement of
 * lib/lease/rules.ts); a failed condition comes back with the item (ALL_OLD) and becomes a
 * LeaseHeldError or a FencedError carrying it. Reads are strongly consistent.
 *
 * Item attributes:
 *   pk           S  the lease key, e.g. `pipe/exp/slot/3`
 *   owner        S  holder identity; '' once released
 *   epoch        N  1, 2, 3, ... (+1 on every acquire, kept on renew and release)
 *   expiresAtMs  N  expiry in ms from the store's clock; 0 once released
 *   ttl          N  epoch seconds after which DynamoDB TTL may delete the item:
 *                   max(expiresAtMs, now) in seconds + the grace (see `ttlFor`)
 *   updatedAtMs  N  the store clock at the last write (diagnostics only)
 *   acquireToken S  the token of the acquire call that made this epoch (rules.isOwnAcquire);
 *                   removed on release
 */
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import { type Clock, systemClock } from '../clock.ts';
import { DynamoCoordStore } from '../coord/dynamo.ts';
import type { CoordStore, CoordTable } from '../coord/types.ts';
import { ConflictError, CorruptError, type DgclError, InvalidInputError, UnavailableError } from '../errors.ts';
import {
  LeaseFencedError,
  type LeaseRecord,
  RELEASED_OWNER,
  canAcquire,
  expiryAt,
  isCurrent,
  isOwnAcquire,
  leaseHeld,
  newAcquireToken,
  pick,
  renewedRecord,
  validateKey,
  validateLease,
  validateOwner,
  validateTtl,
  validateEpochFloor,
} from './rules.ts';
import { classifyDynamoError } from './dynamo-errors.ts';
import type { Lease, LeaseStore } from './types.ts';

/**
 * Default time an item outlives its last write before DynamoDB TTL may delete it.
 *
 * Why so long: deleting an item resets its epoch counter (the next acquire would get epoch 1
 * again), and writer epochs name shards and seals in the log, so an epoch must never repeat for
 * a slot whose log still exists. Every write re-stamps `ttl` from max(expiry, now), so an item is
 * deleted only after nobody touched the key for the whole grace: epochs are monotonic for every
 * key used at least once per grace period. TTL is only there to clean up experiments abandoned
 * for more than a year. Deployments that keep experiments resumable for longer set
 * `ttlGraceMs: null` (no `ttl` attribute; items are kept forever, ~100 bytes per key) or a
 * longer grace. (A cheap backstop for the log store: refuse a slot epoch that is not above the
 * slot's highest sealed epoch.)
 */
export const DEFAULT_TTL_GRACE_MS = 400 * 24 * 3600 * 1000;

export interface DynamoLeaseStoreOptions {
  /** An injected client (the caller owns it; `close()` does not destroy it). */
  client: DynamoDBClient;
  /** Table name (`DGCL_LEASE_TABLE`). */
  table: string;
  /** Clock for lease expiry; defaults to the system clock. */
  clock?: Clock;
  /** See DEFAULT_TTL_GRACE_MS; null writes no `ttl` attribute at all. */
  ttlGraceMs?: number | null;
}

/** Attribute names (OWNER and TTL are DynamoDB reserved words: always go through #names). */
const NAMES = {
  '#pk': 'pk',
  '#owner': 'owner',
  '#epoch': 'epoch',
  '#expiresAtMs': 'expiresAtMs',
  '#ttl': 'ttl',
  '#updatedAtMs': 'updatedAtMs',
  '#acquireToken': 'acquireToken',
} as const;

/**
 * Named condition fragments: the server-side restatement of lib/lease/rules.ts.
 *  - keyIsFree   = rules.isFree:   never acquired, released, or expired at :now (inclusive).
 *  - leaseIsCurrent = rules.isCurrent: same owner and epoch (owner is never '' for a lease we
 *    hand out, so a released item never matches). Expiry is not part of it.
 */
export const conditions = {
  keyIsFree: 'attribute_not_exists(#pk) OR #owner = :released OR #expiresAtMs <= :now',
  leaseIsCurrent: 'attribute_exists(#pk) AND #owner = :owner AND #epoch = :epoch',
} as const;

export class DynamoLeaseStore implements LeaseStore, CoordTable {
  readonly table: string;
  private readonly client: DynamoDBClient;
  private readonly clock: Clock;
  private readonly graceSec: number | null;

  constructor(options: DynamoLeaseStoreOptions) {
    if (typeof options.table !== 'string' || !/^[A-Za-z0-9_.-]{3,255}$/.test(options.table)) {
      throw new InvalidInputError('not a DynamoDB table name', { field: 'table' });
    }
    this.client = options.client;
    this.table = options.table;
    this.clock = options.clock ?? systemClock;
    const grace = options.ttlGraceMs === undefined ? DEFAULT_TTL_GRACE_MS : options.ttlGraceMs;
    this.graceSec = grace === null ? null : Math.ceil(grace / 1000);
  }

  /**
   * 1 request: UpdateItem if keyIsFree, epoch = if_not_exists(epoch, 0) + 1, stamped with a
   * token of this call. The SDK may resend the request after its first try landed (answer lost);
   * the resend then fails the condition on our own new lease, which ALL_OLD shows by the token
   * (rules.isOwnAcquire): that lease is returned instead of LeaseHeldError.
   */
  async acquire(key: string, owner: string, ttlMs: number): Promise<Lease> {
    validateKey(key);
    validateOwner(owner);
    validateTtl(ttlMs);
    const now = this.clock.nowMs();
    const expiresAtMs = expiryAt(now, ttlMs);
    const token = newAcquireToken();
    const sets = [
      '#owner = :owner',
      '#expiresAtMs = :exp',
      '#updatedAtMs = :now',
      '#epoch = if_not_exists(#epoch, :zero) + :one', // rules.nextEpoch, atomically
      '#acquireToken = :token',
    ];
    const values: Record<string, AttributeValue> = {
      ':owner': { S: owner },
      ':token': { S: token },
      ':exp': num(expiresAtMs),
      ':now': num(now),
      ':released': { S: RELEASED_OWNER },
      ':zero': num(0),
      ':one': num(1),
    };
    this.addTtl(sets, values, expiresAtMs, now);
    try {
      const out = await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: { pk: { S: key } },
          UpdateExpression: `SET ${sets.join(', ')}`,
          ConditionExpression: conditions.keyIsFree,
          ExpressionAttributeNames: pickNames([
            '#pk',
            '#owner',
            '#epoch',
            '#expiresAtMs',
            '#updatedAtMs',
            '#acquireToken',
            ...this.ttlName(),
          ]),
          ExpressionAttributeValues: values,
          ReturnValues: 'ALL_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      const lease = fromItem(out.Attributes, key);
      if (lease === null) throw new CorruptError(`acquire of ${JSON.stringify(key)} returned no item`);
      return lease;
    } catch (e) {
      if (!isConditionFailed(e)) {
        const err = this.classify(e, 'acquire', key);
        const landed = err instanceof UnavailableError ? await this.landedAcquire(key, token) : null;
        if (landed) return landed;
        throw err;
      }
      // ALL_OLD carries the holder; a server that omits it costs one extra consistent read.
      const holder = e.Item ? recordFromItem(e.Item, key) : await this.readRecord(key);
      if (isOwnAcquire(holder, token)) return pick(holder); // our first try landed
      if (holder !== null && !canAcquire(holder, now)) throw leaseHeld(key, holder, now, e);
      throw new ConflictError(`acquire of ${JSON.stringify(key)} lost a race; retry`, { cause: e });
    }
  }

  /** 1 request: UpdateItem if the key is free and below `epoch`; a failed condition is the answer "nothing to do". */
  async raiseEpoch(key: string, epoch: number): Promise<void> {
    validateKey(key);
    validateEpochFloor(epoch);
    const now = this.clock.nowMs();
    const sets = ['#owner = :released', '#expiresAtMs = :zero', '#updatedAtMs = :now', '#epoch = :epoch'];
    const values: Record<string, AttributeValue> = { ':released': { S: RELEASED_OWNER }, ':zero': num(0), ':now': num(now), ':epoch': num(epoch) };
    this.addTtl(sets, values, 0, now);
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: { pk: { S: key } },
          UpdateExpression: `SET ${sets.join(', ')} REMOVE #acquireToken`,
          ConditionExpression: `attribute_not_exists(#pk) OR (#epoch < :epoch AND (${conditions.keyIsFree}))`,
          ExpressionAttributeNames: pickNames(['#pk', '#owner', '#epoch', '#expiresAtMs', '#updatedAtMs', '#acquireToken', ...this.ttlName()]),
          ExpressionAttributeValues: values,
        }),
      );
    } catch (e) {
      if (isConditionFailed(e)) return;
      throw this.classify(e, 'raiseEpoch', key);
    }
  }

  /** 1 request: UpdateItem if leaseIsCurrent, new expiry. */
  async renew(lease: Lease, ttlMs: number): Promise<Lease> {
    const l = validateLease(lease);
    validateTtl(ttlMs);
    const now = this.clock.nowMs();
    const next = renewedRecord(l, now, ttlMs);
    const sets = ['#expiresAtMs = :exp', '#updatedAtMs = :now'];
    const values: Record<string, AttributeValue> = {
      ':owner': { S: l.owner },
      ':epoch': num(l.epoch),
      ':exp': num(next.expiresAtMs),
      ':now': num(now),
    };
    this.addTtl(sets, values, next.expiresAtMs, now);
    await this.updateCurrent(l, sets, values, 'renew', now);
    return next;
  }

  /**
   * 1 request: UpdateItem if leaseIsCurrent, owner '' and expiry 0, token removed; a no-op
   * otherwise (also when the SDK resends a release that landed: the resend finds it released).
   */
  async release(lease: Lease): Promise<void> {
    const l = validateLease(lease);
    const now = this.clock.nowMs();
    const sets = ['#owner = :released', '#expiresAtMs = :zero', '#updatedAtMs = :now'];
    const values: Record<string, AttributeValue> = {
      ':owner': { S: l.owner },
      ':epoch': num(l.epoch),
      ':released': { S: RELEASED_OWNER },
      ':zero': num(0),
      ':now': num(now),
    };
    this.addTtl(sets, values, 0, now);
    try {
      await this.updateCurrent(l, sets, values, 'release', now, ['#acquireToken']);
    } catch (e) {
      if (e instanceof LeaseFencedError) return; // superseded or already released
      throw e;
    }
  }

  /** 1 request: GetItem with ConsistentRead. */
  async read(key: string): Promise<Lease | null> {
    validateKey(key);
    const record = await this.readRecord(key);
    return record === null ? null : pick(record);
  }

  /** 1 request: a consistent read compared with rules.isCurrent (via LeaseFencedError). */
  async assertCurrent(lease: Lease): Promise<void> {
    const l = validateLease(lease);
    const record = await this.read(l.key);
    if (!isCurrent(record, l)) throw new LeaseFencedError(l, record, { nowMs: this.clock.nowMs() });
  }

  /**
   * A log's item markers and claims in this table, under `scope` (lib/coord/dynamo.ts). Same
   * client, table and clock: the claims' `ttl` is stamped from the clock leases use.
   */
  coordStore(scope: string): CoordStore {
    return new DynamoCoordStore({ client: this.client, table: this.table, scope, clock: this.clock });
  }

  /** The client is the caller's: nothing to close here. */
  async close(): Promise<void> {}

  private async readRecord(key: string): Promise<LeaseRecord | null> {
    try {
      const out = await this.client.send(
        new GetItemCommand({ TableName: this.table, Key: { pk: { S: key } }, ConsistentRead: true }),
      );
      return recordFromItem(out.Item, key);
    } catch (e) {
      throw this.classify(e, 'read', key);
    }
  }

  /**
   * After an acquire whose every try failed without a verdict (UnavailableError): a try may
   * still have landed (all answers lost). One consistent read tells; our own new lease is
   * returned rather than left to block the key, and the caller, until it expires. null when it
   * did not land, or when the read fails too (the caller throws the original error).
   */
  private async landedAcquire(key: string, token: string): Promise<Lease | null> {
    const record = await this.readRecord(key).catch(() => null);
    return isOwnAcquire(record, token) ? pick(record) : null;
  }

  /** One conditional UpdateItem (leaseIsCurrent): SET `sets`, REMOVE `removes`. */
  private async updateCurrent(
    l: Lease,
    sets: string[],
    values: Record<string, AttributeValue>,
    op: string,
    now: number,
    removes: Array<keyof typeof NAMES> = [],
  ): Promise<void> {
    const used = ['#pk', '#owner', '#epoch', '#expiresAtMs', '#updatedAtMs', ...removes, ...this.ttlName()] as const;
    const remove = removes.length > 0 ? ` REMOVE ${removes.join(', ')}` : '';
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: { pk: { S: l.key } },
          UpdateExpression: `SET ${sets.join(', ')}${remove}`,
          ConditionExpression: conditions.leaseIsCurrent,
          ExpressionAttributeNames: pickNames([...used]),
          ExpressionAttributeValues: values,
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
    } catch (e) {
      if (isConditionFailed(e)) {
        throw new LeaseFencedError(l, fromItem(e.Item, l.key), { nowMs: now, cause: e });
      }
      throw this.classify(e, op, l.key);
    }
  }

  /** `ttl` = max(expiry, now) in seconds + grace: a write always pushes deletion a grace away. */
  private addTtl(sets: string[], values: Record<string, AttributeValue>, expiresAtMs: number, now: number): void {
    if (this.graceSec === null) return;
    sets.push('#ttl = :ttl');
    values[':ttl'] = num(ttlFor(expiresAtMs, now, this.graceSec));
  }

  private ttlName(): Array<keyof typeof NAMES> {
    return this.graceSec === null ? [] : ['#ttl'];
  }

  private classify(e: unknown, op: string, key: string): DgclError {
    return classifyDynamoError(e, `lease ${op} of ${JSON.stringify(key)} in table ${this.table}`);
  }
}

/** The `ttl` attribute value (epoch seconds) for an item written at `nowMs`. */
export function ttlFor(expiresAtMs: number, nowMs: number, graceSec: number): number {
  return Math.ceil(Math.max(expiresAtMs, nowMs) / 1000) + graceSec;
}

/**
 * Creates the lease table if missing (on-demand, `pk` String, no sort key) and enables TTL on
 * `ttl`. Idempotent: an existing table with the same key schema is accepted as it is.
 * For tests and local set-up; deployed stacks create the table in infra/.
 */
export async function createLeaseTable(
  client: DynamoDBClient,
  table: string,
  options: { maxWaitSeconds?: number } = {},
): Promise<void> {
  const what = `create lease table ${table}`;
  try {
    await client.send(
      new CreateTableCommand({
        TableName: table,
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
  } catch (e) {
    if ((e as { name?: string }).name !== 'ResourceInUseException') throw classifyDynamoError(e, what);
  }
  try {
    await waitUntilTableExists(
      { client, maxWaitTime: options.maxWaitSeconds ?? 120, minDelay: 1, maxDelay: 5 },
      { TableName: table },
    );
    const desc = await client.send(new DescribeTableCommand({ TableName: table }));
    const keys = desc.Table?.KeySchema ?? [];
    const pkType = desc.Table?.AttributeDefinitions?.find((a) => a.AttributeName === 'pk')?.AttributeType;
    if (keys.length !== 1 || keys[0]?.AttributeName !== 'pk' || keys[0]?.KeyType !== 'HASH' || pkType !== 'S') {
      throw new InvalidInputError(
        `table ${table} exists with another key schema (need partition key pk String, no sort key)`,
        { field: 'table' },
      );
    }
    for (let attempt = 0; ; attempt++) {
      const ttl = await client.send(new DescribeTimeToLiveCommand({ TableName: table }));
      const status = ttl.TimeToLiveDescription?.TimeToLiveStatus;
      const attr = ttl.TimeToLiveDescription?.AttributeName;
      if (status === 'ENABLED' || status === 'ENABLING') {
        if (attr === 'ttl') return;
        throw new InvalidInputError(`table ${table} has TTL on ${JSON.stringify(attr)}, not "ttl"`, { field: 'table' });
      }
      try {
        await client.send(
          new UpdateTimeToLiveCommand({
            TableName: table,
            TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
          }),
        );
        return;
      } catch (e) {
        // A concurrent set-up enabled it first ("already enabled"): describe again, once.
        if ((e as { name?: string }).name !== 'ValidationException' || attempt > 0) throw e;
      }
    }
  } catch (e) {
    throw classifyDynamoError(e, what);
  }
}

/** By class, or by name when another copy of the SDK threw it. */
function isConditionFailed(e: unknown): e is ConditionalCheckFailedException {
  return (
    e instanceof ConditionalCheckFailedException ||
    (e as { name?: unknown } | null)?.name === 'ConditionalCheckFailedException'
  );
}

function num(n: number): AttributeValue {
  return { N: String(n) };
}

function pickNames(used: Array<keyof typeof NAMES>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of used) out[k] = NAMES[k];
  return out;
}

/** An item as a Lease (null for no item); `key` guards against a mismatched item. */
function fromItem(item: Record<string, AttributeValue> | undefined, key: string): Lease | null {
  const record = recordFromItem(item, key);
  return record === null ? null : pick(record);
}

/** An item as the stored record, token included (null for no item). */
function recordFromItem(item: Record<string, AttributeValue> | undefined, key: string): LeaseRecord | null {
  if (!item || Object.keys(item).length === 0) return null;
  const pk = item.pk?.S;
  const owner = item.owner?.S;
  const epoch = Number(item.epoch?.N);
  const expiresAtMs = Number(item.expiresAtMs?.N);
  if (pk !== key || owner === undefined || !Number.isSafeInteger(epoch) || !Number.isFinite(expiresAtMs)) {
    throw new CorruptError(`lease item ${JSON.stringify(key)} is malformed: ${JSON.stringify(item)}`);
  }
  const token = item.acquireToken?.S;
  return token === undefined ? { key: pk, owner, epoch, expiresAtMs } : { key: pk, owner, epoch, expiresAtMs, acquireToken: token };
}
