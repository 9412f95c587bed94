/**
 * A real SQS endpoint for the resume tests: `fauxqs` (npm; an SNS/SQS/S3 emulator), started
 * in-process on a free loopback port. fauxqs 1.9.2 is its last release that runs on Node 20
 * (2.x needs Node >= 22.5 for node:sqlite). Only its SQS API is used (never its S3: it ignores
 * If-None-Match). The server listens on all interfaces of that port (not configurable); the tests
 * only talk to 127.0.0.1.
 */
import { randomUUID } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { startFauxqs } from 'fauxqs';

export interface LocalSqs {
  endpoint: string;
  client: SQSClient;
  /** Creates a fresh queue (a `.fifo` one when the name says so) and returns its URL. */
  newQueue(prefix?: string): Promise<string>;
  /** Receives (and deletes) every message now in the queue; bodies parsed as JSON. */
  drain(queueUrl: string): Promise<unknown[]>;
  stop(): Promise<void>;
}

/**
 * Starts fauxqs and points the environment at it (AWS_ENDPOINT_URL_SQS, region, dummy
 * credentials), as the handler reads them.
 */
export async function startLocalSqs(): Promise<LocalSqs> {
  const server = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' });
  const endpoint = `http://127.0.0.1:${server.port}`;
  process.env.AWS_ENDPOINT_URL_SQS = endpoint;
  process.env.AWS_REGION ??= 'us-east-1';
  process.env.AWS_ACCESS_KEY_ID ??= 'test';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'test';
  const client = new SQSClient({ endpoint, region: process.env.AWS_REGION });
  return {
    endpoint,
    client,
    async newQueue(prefix = 'dgcl-resume') {
      const fifo = prefix.endsWith('.fifo');
      const name = fifo ? `${prefix.slice(0, -5)}-${randomUUID().slice(0, 8)}.fifo` : `${prefix}-${randomUUID().slice(0, 8)}`;
      const res = await client.send(new CreateQueueCommand({ QueueName: name, ...(fifo ? { Attributes: { FifoQueue: 'true' } } : {}) }));
      return res.QueueUrl!;
    },
    async drain(queueUrl) {
      const out: unknown[] = [];
      for (;;) {
        const r = await client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: 60 }));
        const ms = r.Messages ?? [];
        if (ms.length === 0) return out;
        for (const m of ms) out.push(JSON.parse(m.Body!));
        await client.send(new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: ms.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })) }));
      }
    },
    async stop() {
      client.destroy();
      await server.stop();
    },
  };
}
