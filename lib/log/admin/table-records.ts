/**
 * The records of a DynamoDB lease table as `drop` sees them: keys found by a prefix (a paged
 * Scan), one record's body, deletes in batches. Items are keyed `pk` (String): a lease key
 * (`<pipeline>/<experiment>/slot/<n>`, lib/lease/dynamo.ts) or a log's record
 * (`<pipeline>/<experiment>/<logId>/<key>`, lib/coord/dynamo.ts). The table has no index on a
 * prefix, so finding a log's records reads the whole table (one Scan, paged): drop is rare.
 *
 * Deletes: BatchWriteItem, 25 keys a request; keys DynamoDB leaves unprocessed (throttling) are
 * sent again after a back-off, up to UNPROCESSED_TRIES times, then UNAVAILABLE (a rerun of drop
 * deletes what is left). A delete of an absent key is no error, so a resent request is harmless.
 */
import {
  BatchWriteItemCommand,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  ScanCommand,
  type AttributeValue,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { type Clock, systemClock } from '../../clock.ts';
import { type DgclError, UnavailableError } from '../../errors.ts';
import { classifyDynamoError } from '../../lease/dynamo-errors.ts';

/** DynamoDB's limit of keys per BatchWriteItem. */
const BATCH_WRITE_MAX = 25;
const UNPROCESSED_TRIES = 10;
const BACKOFF_FIRST_MS = 50;
const BACKOFF_MAX_MS = 2_000;

export interface TableRecordsOptions {
  client: DynamoDBClient;
  table: string;
  /** Back-off sleeps; default the system clock. */
  clock?: Clock;
}

export class TableRecords {
  readonly table: string;
  private readonly client: DynamoDBClient;
  private readonly clock: Clock;

  constructor(o: TableRecordsOptions) {
    this.client = o.client;
    this.table = o.table;
    this.clock = o.clock ?? systemClock;
  }

  /** Every key starting with `prefix`, one Scan page at a time (consistent reads). */
  async *keysWithPrefix(prefix: string): AsyncGenerator<string[]> {
    let start: Record<string, AttributeValue> | undefined;
    do {
      let out;
      try {
        out = await this.client.send(
          new ScanCommand({
            TableName: this.table,
            FilterExpression: 'begins_with(#pk, :prefix)',
            ProjectionExpression: '#pk',
            ExpressionAttributeNames: { '#pk': 'pk' },
            ExpressionAttributeValues: { ':prefix': { S: prefix } },
            ConsistentRead: true,
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        );
      } catch (e) {
        throw this.classify(e, `scan for keys starting with ${JSON.stringify(prefix)}`);
      }
      const keys = (out.Items ?? []).map((i) => i.pk?.S).filter((k): k is string => typeof k === 'string');
      if (keys.length > 0) yield keys;
      start = out.LastEvaluatedKey;
    } while (start);
  }

  /** The body of one record (a log's record: lib/coord/dynamo.ts), or null. */
  async body(pk: string): Promise<string | null> {
    try {
      const out = await this.client.send(new GetItemCommand({ TableName: this.table, Key: { pk: { S: pk } }, ConsistentRead: true }));
      const body = out.Item?.body?.S;
      return out.Item ? (body ?? null) : null;
    } catch (e) {
      throw this.classify(e, `get of ${JSON.stringify(pk)}`);
    }
  }

  /** Deletes `keys` (absent ones are fine); returns how many were asked for. */
  async deleteKeys(keys: readonly string[]): Promise<number> {
    for (let i = 0; i < keys.length; i += BATCH_WRITE_MAX) await this.deleteChunk(keys.slice(i, i + BATCH_WRITE_MAX));
    return keys.length;
  }

  /**
   * Deletes a lease record, only while it is released (owner ''): one a writer took after it
   * was released is that writer's and stays. True when it is gone.
   */
  async deleteReleasedLease(key: string): Promise<boolean> {
    try {
      await this.client.send(
        new DeleteItemCommand({
          TableName: this.table,
          Key: { pk: { S: key } },
          ConditionExpression: 'attribute_not_exists(#pk) OR #owner = :released',
          ExpressionAttributeNames: { '#pk': 'pk', '#owner': 'owner' },
          ExpressionAttributeValues: { ':released': { S: '' } },
        }),
      );
      return true;
    } catch (e) {
      if ((e as { name?: unknown } | null)?.name === 'ConditionalCheckFailedException') return false;
      throw this.classify(e, `delete of lease ${JSON.stringify(key)}`);
    }
  }

  private async deleteChunk(chunk: string[]): Promise<void> {
    let pending: WriteRequest[] = chunk.map((k) => ({ DeleteRequest: { Key: { pk: { S: k } } } }));
    for (let attempt = 0; ; attempt++) {
      let out;
      try {
        out = await this.client.send(new BatchWriteItemCommand({ RequestItems: { [this.table]: pending } }));
      } catch (e) {
        throw this.classify(e, `delete of ${chunk.length} records from ${JSON.stringify(chunk[0])}`);
      }
      pending = out.UnprocessedItems?.[this.table] ?? [];
      if (pending.length === 0) return;
      if (attempt + 1 >= UNPROCESSED_TRIES) {
        throw new UnavailableError(`delete of records in table ${this.table}: ${pending.length} still unprocessed after ${UNPROCESSED_TRIES} tries (throttled); run the command again`);
      }
      await this.clock.sleep(Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** attempt));
    }
  }

  private classify(e: unknown, what: string): DgclError {
    return classifyDynamoError(e, `${what} in table ${this.table}`);
  }
}
