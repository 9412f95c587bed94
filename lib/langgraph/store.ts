/**
 * The saver's only access to the log: every read and write of a thread goes through here, so the
 * saver does not care how a field is found. Reads take a `ThreadView` of one item and ask it for
 * fields by name or prefix.
 *
 * Today's reads fold the item once per view (the public API has no narrower read yet); the
 * targeted reads of issue 10 (fields by name/prefix without folding the item) replace `view()`
 * alone. Deleting a thread ends its item (TERMINAL `filtered` with `deleted: true`) until the
 * log can delete items: a deleted thread reads as absent, and writing to it again fails.
 */
import { openLog, type OpenLogOptions } from '../index.ts';
import { InvalidInputError, NotFoundError } from '../errors.ts';
import type { LanceCheckpointLog } from '../log/log.ts';
import type { CheckpointBatchInput, ItemState, OutputValue } from '../types.ts';

export interface ThreadView {
  /** False when the thread has no item, or its item was deleted. */
  readonly exists: boolean;
  field(name: string): Promise<OutputValue | undefined>;
  /** Current values of the named fields that exist, by name. */
  fields(names: readonly string[]): Promise<Map<string, OutputValue>>;
  /** Current values of the fields whose names start with `prefix`, by name. */
  prefix(prefix: string): Promise<Map<string, OutputValue>>;
}

const DELETED_FIELD = 'deleted';
const ABSENT: ThreadView = { exists: false, field: async () => undefined, fields: async () => new Map(), prefix: async () => new Map() };

export class ThreadStore {
  private log: LanceCheckpointLog | null = null;
  private opening: Promise<LanceCheckpointLog> | null = null;

  constructor(private readonly o: OpenLogOptions) {}

  /** Opened on first use: LangGraph never calls close(), so nothing is held before a write. */
  private async open(): Promise<LanceCheckpointLog> {
    if (this.log) return this.log;
    this.opening ??= openLog(this.o).then((l) => (this.log = l));
    return this.opening;
  }

  async view(itemId: string): Promise<ThreadView> {
    const log = await this.open();
    let state: ItemState;
    try {
      state = await log.fold(itemId);
    } catch (e) {
      if (e instanceof NotFoundError) return ABSENT;
      throw e;
    }
    if (state.status === 'completed' || state.status === 'filtered') return ABSENT;
    const fields = state.fields;
    return {
      exists: true,
      field: async (name) => (Object.hasOwn(fields, name) ? fields[name] : undefined),
      fields: async (names) => new Map(names.filter((n) => Object.hasOwn(fields, n)).map((n) => [n, fields[n]!])),
      prefix: async (p) => new Map(Object.entries(fields).filter(([k]) => k.startsWith(p))),
    };
  }

  /**
   * Append one batch to the thread's item, creating the item when `create` says it is new. A
   * concurrent creator wins the race: the batch is then sent again without `create`.
   */
  async append(batch: CheckpointBatchInput, create: boolean): Promise<void> {
    const log = await this.open();
    if (!create) {
      await log.append([batch]);
      return;
    }
    try {
      await log.append([{ ...batch, create: {} }]);
    } catch (e) {
      if (!(e instanceof InvalidInputError && /already exists/.test(e.message))) throw e;
      await log.append([batch]);
    }
  }

  /** Item ids of the experiment, in order (list() without a thread id). */
  async *itemIds(): AsyncGenerator<string> {
    const log = await this.open();
    let after: string | undefined;
    for (;;) {
      const page = await log.items({ limit: 100, ...(after !== undefined ? { after } : {}), status: 'in_progress' });
      for (const s of page.items) yield s.itemId;
      if (page.next === undefined) return;
      after = page.next;
    }
  }

  async deleteItem(itemId: string, runId: string): Promise<void> {
    const view = await this.view(itemId);
    if (!view.exists) return;
    await (await this.open()).append([{ itemId, runId, set: { [DELETED_FIELD]: true }, terminal: 'filtered' }]);
  }

  async close(): Promise<void> {
    const log = this.log ?? (this.opening ? await this.opening.catch(() => null) : null);
    this.log = null;
    this.opening = null;
    await log?.close();
  }
}
