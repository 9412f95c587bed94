/**
 * Where resume instructions go. The handler only knows `ResumeSink`; the SQS implementation
 * sends with SendMessageBatch (10 entries per request) and retries the entries SQS reports as
 * failed on its side; an in-memory sink serves tests and dry runs.
 *
 * Duplicates are harmless downstream (a worker resuming an item appends checkpoint batches,
 * which are idempotent, and an instruction carries the item's `lastSeq`, so a worker can drop
 * one the item has moved past), so a retried send never needs to be exactly-once. On a FIFO
 * queue (`.fifo` URL) each item is its own message group and the deduplication id is the item
 * and its `lastSeq`: the same item at the same point is sent once per SQS deduplication window,
 * whoever sends it (the handler by id, a sweep, `dgcl resume --send`).
 */
import { createHash } from 'node:crypto';
import { SendMessageBatchCommand, SQSClient, type SendMessageBatchCommandOutput, type SQSClientConfig } from '@aws-sdk/client-sqs';
import { InvalidInputError, UnavailableError } from '../../lib/errors.ts';
import { awsRegion, type Env } from '../../lib/storage/location.ts';
import type { ResumeInstruction } from '../../lib/resume.ts';
import { summarizeError, type ErrorSummary } from './errors.ts';

export type { ResumeInstruction } from '../../lib/resume.ts';

export interface SendOutcome {
  sent: ResumeInstruction[];
  failed: Array<{ instruction: ResumeInstruction; error: ErrorSummary }>;
}

export interface ResumeSink {
  /** Sends every instruction it can; never throws for a per-message failure (see `failed`). */
  send(instructions: readonly ResumeInstruction[]): Promise<SendOutcome>;
}

/** Keeps what it was sent (tests, `functions/invoke.ts --dry-run`). */
export class MemoryResumeSink implements ResumeSink {
  readonly messages: ResumeInstruction[] = [];
  async send(instructions: readonly ResumeInstruction[]): Promise<SendOutcome> {
    this.messages.push(...instructions);
    return { sent: [...instructions], failed: [] };
  }
}

/** SQS allows at most 10 entries per SendMessageBatch. */
export const SQS_BATCH_MAX = 10;

export interface SqsResumeSinkOptions {
  /** Anything with the SQSClient's `send` (the client itself; tests may wrap it). */
  client: { send(command: SendMessageBatchCommand): Promise<SendMessageBatchCommandOutput> };
  queueUrl: string;
  /** Tries per entry, counting the first (default 4). */
  maxAttempts?: number;
  /** First backoff between tries, doubled each time (default 100 ms). */
  backoffMs?: number;
}

export class SqsResumeSink implements ResumeSink {
  private readonly maxAttempts: number;
  private readonly backoffMs: number;
  private readonly fifo: boolean;

  constructor(private readonly o: SqsResumeSinkOptions) {
    this.maxAttempts = o.maxAttempts ?? 4;
    this.backoffMs = o.backoffMs ?? 100;
    this.fifo = /\.fifo$/.test(o.queueUrl);
  }

  async send(instructions: readonly ResumeInstruction[]): Promise<SendOutcome> {
    const out: SendOutcome = { sent: [], failed: [] };
    for (let i = 0; i < instructions.length; i += SQS_BATCH_MAX) {
      const chunk = await this.sendChunk(instructions.slice(i, i + SQS_BATCH_MAX));
      out.sent.push(...chunk.sent);
      out.failed.push(...chunk.failed);
    }
    return out;
  }

  /** One chunk of at most 10: entries SQS failed on its side are sent again, with backoff. */
  private async sendChunk(chunk: readonly ResumeInstruction[]): Promise<SendOutcome> {
    const out: SendOutcome = { sent: [], failed: [] };
    let pending = chunk.map((instruction, i) => ({ id: String(i), instruction }));
    let lastError: Map<string, ErrorSummary> = new Map();
    for (let attempt = 1; pending.length > 0 && attempt <= this.maxAttempts; attempt++) {
      if (attempt > 1) await sleep(this.backoffMs * 2 ** (attempt - 2));
      let res: SendMessageBatchCommandOutput;
      try {
        res = await this.o.client.send(
          new SendMessageBatchCommand({ QueueUrl: this.o.queueUrl, Entries: pending.map((p) => this.entry(p.id, p.instruction)) }),
        );
      } catch (e) {
        // The SDK already retried throttling and 5xx answers; a client fault (no such queue,
        // access denied, ...) will not heal by itself.
        const err = e as { $fault?: string; name?: string; message?: string };
        const error = summarizeError(
          new UnavailableError(`SQS SendMessageBatch to ${this.o.queueUrl} failed: ${err.name ?? 'Error'}: ${err.message ?? String(e)}`, { cause: e }),
        );
        lastError = new Map(pending.map((p) => [p.id, error]));
        if (err.$fault === 'client' && !/Throttl/i.test(err.name ?? '')) break;
        continue;
      }
      const ok = new Set((res.Successful ?? []).map((s) => s.Id));
      const failed = new Map((res.Failed ?? []).map((f) => [f.Id, f]));
      const retry: typeof pending = [];
      for (const p of pending) {
        if (ok.has(p.id)) {
          out.sent.push(p.instruction);
          continue;
        }
        const f = failed.get(p.id);
        const message = f ? `SQS rejected the message: ${f.Code ?? 'unknown'}: ${f.Message ?? ''}`.trim() : 'SQS reported the message neither sent nor failed';
        if (f?.SenderFault) {
          // The message itself is at fault (too large, bad attribute): resending cannot help.
          out.failed.push({ instruction: p.instruction, error: summarizeError(new InvalidInputError(message, { field: 'message' })) });
        } else {
          lastError.set(p.id, summarizeError(new UnavailableError(message)));
          retry.push(p);
        }
      }
      pending = retry;
    }
    for (const p of pending) {
      out.failed.push({ instruction: p.instruction, error: lastError.get(p.id) ?? summarizeError(new UnavailableError('not sent')) });
    }
    return out;
  }

  private entry(id: string, instruction: ResumeInstruction) {
    const body = JSON.stringify(instruction);
    if (!this.fifo) return { Id: id, MessageBody: body };
    return {
      Id: id,
      MessageBody: body,
      MessageGroupId: sha256(`${instruction.pipeline}/${instruction.experiment}/${instruction.itemId}`),
      MessageDeduplicationId: dedupId(instruction),
    };
  }
}

/** SQS client settings from the environment: region, and AWS_ENDPOINT_URL_SQS (or AWS_ENDPOINT_URL). */
export function sqsClientConfig(env: Env = process.env): SQSClientConfig {
  const config: SQSClientConfig = { region: awsRegion(env) };
  const endpoint = nonEmpty(env.AWS_ENDPOINT_URL_SQS) ?? nonEmpty(env.AWS_ENDPOINT_URL);
  if (endpoint !== undefined) config.endpoint = endpoint;
  return config;
}

const clients = new Map<string, SQSClient>();

/** One SQSClient per endpoint/region for the container. */
export function sqsClient(env: Env = process.env): SQSClient {
  const config = sqsClientConfig(env);
  const key = `${String(config.endpoint ?? '')}|${String(config.region)}`;
  let c = clients.get(key);
  if (!c) clients.set(key, (c = new SQSClient(config)));
  return c;
}

/** The FIFO deduplication id of an instruction: its item and the item's last seq. */
export function dedupId(i: ResumeInstruction): string {
  return sha256(JSON.stringify([i.pipeline, i.experiment, i.itemId, i.lastSeq]));
}

function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}
