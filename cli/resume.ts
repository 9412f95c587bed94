/**
 * `dgcl resume --stalled-for D [--send] [--limit N]`: the items that stalled (not terminal, last
 * event older than D), listed, or with --send each sent a resume instruction on the resume queue
 * (the resume handler's messages: functions/shared/resume-sink.ts). Read page by page, printed
 * as it goes (--json: one line per item; text: a table per block of rows), then a summary line.
 * Items whose send failed are printed too; the command then fails (cli/exit-codes.ts,
 * ResumesNotSent: 75 when a retry may help, and sending again is harmless).
 */
import type { Where } from '../lib/select/where.ts';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { formatDuration } from '../lib/duration.ts';
import { sendResumes, stalledItems, type ResumeSender, type SendResult } from '../lib/resume-sweep.ts';
import { using, type Ctx, type LogFlags } from './commands.ts';
import { ResumesNotSent } from './exit-codes.ts';
import { formatStalled, type StalledRow } from './format.ts';

export interface ResumeFlags extends LogFlags {
  /** Milliseconds (cli/main.ts parsed the duration). */
  stalledFor: number;
  send?: boolean;
  /** Checked by cli/main.ts when --send is given. */
  queueUrl?: string;
  limit?: number;
  /** Only the items this filter selects (lib/select/). */
  where?: Where;
}

/** Text rows per printed table block: the text form holds one block, never the whole sweep. */
const BLOCK = 500;

export async function resume(ctx: Ctx, flags: ResumeFlags): Promise<void> {
  let client: SQSClient | undefined;
  let sender: ResumeSender | undefined;
  if (flags.send) {
    const [{ SQSClient }, sink] = await Promise.all([import('@aws-sdk/client-sqs'), import('../functions/shared/resume-sink.ts')]);
    client = new SQSClient(sink.sqsClientConfig(ctx.io.env));
    sender = new sink.SqsResumeSink({ client, queueUrl: flags.queueUrl! });
  }
  const tally = { stalled: 0, sent: 0, notSent: new Map<string, number>() };
  const failed: SendResult[] = [];
  let counts = { items: 0, terminal: 0 };
  try {
    await using(ctx, flags, async (log) => {
      const stalled = stalledItems(log, { stalledForMs: flags.stalledFor, ...(flags.limit !== undefined ? { limit: flags.limit } : {}), ...(flags.where ? { where: flags.where } : {}) });
      counts = stalled.counts;
      const results: AsyncIterable<SendResult> = sender
        ? sendResumes(log, stalled, sender, { pipeline: flags.pipeline, experiment: flags.experiment })
        : (async function* () {
            for await (const item of stalled) yield { item, sent: false };
          })();
      let block: StalledRow[] = [];
      let header = true;
      const flush = () => {
        if (block.length > 0) ctx.out.line(formatStalled(block, header));
        [block, header] = [[], false];
      };
      for await (const r of results) {
        tally.stalled++;
        if (r.sent) tally.sent++;
        else if (r.reason !== undefined) tally.notSent.set(r.reason, (tally.notSent.get(r.reason) ?? 0) + 1);
        if (r.reason === 'failed') failed.push(r);
        const { itemId, status, cursor, lastEventAt, idleMs } = r.item;
        const outcome = {
          ...(r.reason !== undefined ? { reason: r.reason } : {}),
          ...(r.error ? { error: { code: r.error.code, message: r.error.message, retryable: r.error.retryable } } : {}),
        };
        if (flags.json) ctx.out.json({ itemId, status, cursor, lastEventAt, sent: r.sent, ...outcome });
        else {
          block.push({ itemId, status, cursor, lastEventAt, idleMs, ...(sender ? { sent: r.sent } : {}), ...outcome });
          if (block.length >= BLOCK) flush();
        }
      }
      flush();
    });
  } finally {
    client?.destroy();
  }
  if (!flags.json) ctx.out.line(summary(flags, tally, counts));
  if (failed.length > 0) throw new ResumesNotSent(failed.map((f) => ({ itemId: f.item.itemId, ...f.error! })), tally.stalled);
}

function summary(flags: ResumeFlags, t: { stalled: number; sent: number; notSent: Map<string, number> }, c: { items: number; terminal: number }): string {
  const idle = `idle for more than ${formatDuration(flags.stalledFor)}`;
  const looked = `${c.items} item${c.items === 1 ? '' : 's'} listed, ${c.terminal} terminal`;
  if (t.stalled === 0) return `no item ${idle} (${looked})`;
  const found = `${t.stalled} stalled item${t.stalled === 1 ? '' : 's'} (${idle}; ${looked}${flags.limit !== undefined && t.stalled >= flags.limit ? `; stopped at --limit ${flags.limit}` : ''})`;
  if (!flags.send) return `${found}; nothing sent (--send sends them to the resume queue)`;
  const not = [...t.notSent].map(([reason, n]) => `${n} ${reason}`).join(', ');
  return `${found}; sent ${t.sent} to ${flags.queueUrl}${not ? `; not sent: ${not}` : ''}`;
}
