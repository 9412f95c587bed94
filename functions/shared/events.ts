/**
 * Builders of the events and context Lambda hands to a handler, in the shapes the AWS Lambda
 * developer guide documents (SQS event source mapping, EventBridge, the Node.js context object).
 * Used by functions/invoke.ts and the tests; nothing here talks to AWS.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Context, EventBridgeEvent, SQSEvent, SQSRecord } from 'aws-lambda';

export interface SqsEventOptions {
  /** Queue ARN (default: a standard queue `dgcl-append` in us-east-1, account 123456789012). */
  queueArn?: string;
  /** Message ids (default: random UUIDs, as SQS assigns them). */
  messageIds?: string[];
  /** FIFO message group per record (sets `attributes.MessageGroupId`, as FIFO queues do). */
  groupIds?: string[];
  /** `attributes.ApproximateReceiveCount` (default "1"; a redelivery has more). */
  receiveCount?: number;
}

/** An SQS event with one record per body (strings are sent as they are, the rest as JSON). */
export function sqsEvent(bodies: unknown[], o: SqsEventOptions = {}): SQSEvent {
  const arn = o.queueArn ?? 'arn:aws:sqs:us-east-1:123456789012:dgcl-append';
  const region = arn.split(':')[3] ?? 'us-east-1';
  const now = String(Date.now());
  return {
    Records: bodies.map((b, i): SQSRecord => {
      const body = typeof b === 'string' ? b : JSON.stringify(b);
      const attributes: SQSRecord['attributes'] = {
        ApproximateReceiveCount: String(o.receiveCount ?? 1),
        SentTimestamp: now,
        SenderId: 'AIDAIENQZJOLO23YVJ4VO',
        ApproximateFirstReceiveTimestamp: now,
      };
      const groupId = o.groupIds?.[i];
      if (groupId !== undefined) {
        attributes.MessageGroupId = groupId;
        attributes.MessageDeduplicationId = createHash('sha256').update(body).digest('hex');
        attributes.SequenceNumber = String(18849496460467696128n + BigInt(i));
      }
      return {
        messageId: o.messageIds?.[i] ?? randomUUID(),
        receiptHandle: `AQEB${createHash('sha256').update(`${i}:${body}`).digest('base64')}`,
        body,
        attributes,
        messageAttributes: {},
        md5OfBody: createHash('md5').update(body).digest('hex'),
        eventSource: 'aws:sqs',
        eventSourceARN: arn,
        awsRegion: region,
      };
    }),
  };
}

/** An EventBridge event (a custom one by default; `Scheduled Event` from `aws.events` for rules). */
export function eventBridgeEvent<T>(detail: T, o: { detailType?: string; source?: string; resources?: string[] } = {}): EventBridgeEvent<string, T> {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': o.detailType ?? 'dgcl.resume',
    source: o.source ?? 'dgcl.pipeline',
    account: '123456789012',
    time: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
    region: 'us-east-1',
    resources: o.resources ?? [],
    detail,
  };
}

/** A Lambda context whose remaining time counts down from `timeoutMs`. */
export function lambdaContext(functionName: string, timeoutMs = 60_000): Context {
  const deadline = Date.now() + timeoutMs;
  const requestId = randomUUID();
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${functionName}`,
    memoryLimitInMB: '1769',
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: `local/[$LATEST]${requestId.replace(/-/g, '')}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}
