/**
 * The saver's only access to the log: every read and write of a thread goes through here.
 *
 * Reads are partial reads of one item (`log.fields`: the named fields and/or one prefix, never
 * the whole item), so what a read costs depends on what it asks for, not on the thread's
 * history (docs/langgraph.md, "Costs"). Writes create the item when missing (`create:
 * 'ifMissing'`); deleting a thread deletes its item (hidden at once, purged by maintenance,
 * the thread id usable again).
 */
import { openLog, type OpenLogOptions } from '../open.ts';
import { LogNotFoundError, NotFoundError } from '../errors.ts';
import type { CheckpointLog } from '../api.ts';
import type { CheckpointBatchInput, OutputValue } from '../types.ts';

export class ThreadStore {
  private log: CheckpointLog | null = null;
  private opening: Promise<CheckpointLog> | null = null;

  constructor(private readonly o: OpenLogOptions) {}

  /** Opened on first use: LangGraph never calls close(), so nothing is held before it is needed. */
  private async open(): Promise<CheckpointLog> {
    if (this.log) return this.log;
    this.opening ??= openLog(this.o).then((l) => (this.log = l));
    return this.opening;
  }

  /**
   * Current values of the item's fields named in `names` or starting with `prefix`, by name; null
   * when the item does not exist (never created, or deleted).
   */
  async fields(itemId: string, names: readonly string[], prefix?: string): Promise<Map<string, OutputValue> | null> {
    if (names.length === 0 && prefix === undefined) return new Map();
    const log = await this.open();
    try {
      const r = await log.fields(itemId, { names: [...names], ...(prefix !== undefined ? { prefix } : {}) });
      // No inlineBytes asked: values are OutputValues (blobs would come as $blobRef).
      return new Map(Object.entries(r.fields as Record<string, OutputValue>));
    } catch (e) {
      if (e instanceof NotFoundError) return null;
      throw e;
    }
  }

  /**
   * The step instances of the item's newest STEP_COMPLETED events, newest first, at most `limit`,
   * below `beforeSeq` when given; null when the item does not exist. Reads the seqs of the item's
   * step events (narrow columns) and then only the newest `limit` events.
   */
  async latestSteps(itemId: string, limit: number, beforeSeq?: number): Promise<Array<{ instanceId: string | undefined; seq: number }> | null> {
    const log = await this.open();
    try {
      const events = await log.latestEvents(itemId, { limit, eventTypes: ['STEP_COMPLETED'], ...(beforeSeq !== undefined ? { beforeSeq } : {}) });
      return events.map((e) => ({ instanceId: e.stepInstanceId, seq: e.itemSeq })).reverse();
    } catch (e) {
      if (e instanceof NotFoundError) return null;
      throw e;
    }
  }

  /** Append one batch to the thread's item, creating the item if it is missing. */
  async append(batch: CheckpointBatchInput): Promise<void> {
    await (await this.open()).append([{ ...batch, create: 'ifMissing' }]);
  }

  /** Item ids of the experiment, in order (list() without a thread id). */
  async *itemIds(): AsyncGenerator<string> {
    const log = await this.open();
    let after: string | undefined;
    for (;;) {
      let page;
      try {
        page = await log.items({ limit: 100, ...(after !== undefined ? { after } : {}) });
      } catch (e) {
        if (e instanceof LogNotFoundError) return; // no thread was ever written
        throw e;
      }
      for (const s of page.items) yield s.itemId;
      if (page.next === undefined) return;
      after = page.next;
    }
  }

  async deleteItem(itemId: string): Promise<void> {
    await (await this.open()).deleteItem(itemId);
  }

  async close(): Promise<void> {
    const log = this.log ?? (this.opening ? await this.opening.catch(() => null) : null);
    this.log = null;
    this.opening = null;
    await log?.close();
  }
}
