/**
 * A LangGraph.js checkpoint saver on the log: thread -> item, checkpoint -> batch
 * (docs/langgraph.md). Each `put` is one checkpoint batch of the thread's item: a FIELD_SET of
 * the checkpoint record under its own field name, one FIELD_SET per changed channel value, and
 * STEP_COMPLETED (step `checkpoint`, instance = the record's field name), so the item's cursor
 * is the newest checkpoint and its trajectory the run's history. `putWrites` is one batch of
 * FIELD_SETs (no step: pending writes are not a step boundary).
 *
 * Reads never fold the thread (lib/langgraph/store.ts): the latest checkpoint is the newest
 * `checkpoint` step event of its namespace, then that record, its channel values and its writes
 * are read by name and prefix.
 */
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  BaseCheckpointSaver,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  copyCheckpoint,
  TASKS,
  getCheckpointId,
  maxChannelVersion,
  writesSortKey,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import { InvalidInputError } from '../errors.ts';
import type { OpenLogOptions } from '../open.ts';
import type { CheckpointBatchInput, OutputValue } from '../types.ts';
import {
  CHECKPOINT_STEP,
  THREAD_ID_FIELD,
  checkpointField,
  checkpointPrefix,
  checkpointRecord,
  fromSerialized,
  threadItemId,
  toSerialized,
  valueField,
  valueRecord,
  writeField,
  writeRecord,
  writesPrefix,
  type CheckpointRecord,
  type ValueRecord,
  type WriteRecord,
} from './records.ts';
import { ThreadStore } from './store.ts';

export interface DgclCheckpointSaverOptions extends OpenLogOptions {
  /** `run_id` of the batches this saver writes (default `langgraph`). */
  runId?: string;
  serde?: SerializerProtocol;
}

function configString(config: RunnableConfig | undefined, key: string, required: boolean): string | undefined {
  const v: unknown = config?.configurable?.[key];
  if (v === undefined || v === null) {
    if (required) throw new InvalidInputError(`config.configurable.${key} is required`, { field: `configurable.${key}` });
    return undefined;
  }
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return String(v);
  throw new InvalidInputError(`config.configurable.${key} must be a string, got ${typeof v}`, { field: `configurable.${key}` });
}

export class DgclCheckpointSaver extends BaseCheckpointSaver {
  private readonly store: ThreadStore;
  private readonly runId: string;

  constructor(options: DgclCheckpointSaverOptions) {
    super(options.serde);
    const { runId, serde: _serde, ...open } = options;
    this.runId = runId ?? 'langgraph';
    this.store = new ThreadStore(open);
  }

  /** Merge this saver's shard and release its writer slot. LangGraph never calls it: the owner does. */
  async close(): Promise<void> {
    await this.store.close();
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = configString(config, 'thread_id', false);
    if (threadId === undefined) return undefined;
    const ns = configString(config, 'checkpoint_ns', false) ?? '';
    const wanted = getCheckpointId(config) || undefined;
    const itemId = threadItemId(threadId);
    const name = wanted !== undefined ? checkpointField(ns, wanted) : await this.latestId(itemId, ns);
    if (name === undefined) return undefined;
    const v = (await this.store.fields(itemId, [name]))?.get(name);
    if (v === undefined) return undefined;
    const rec = checkpointRecord(name, v);
    const outConfig = wanted !== undefined ? config : { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: rec.id } };
    return this.tuple(itemId, threadId, rec, outConfig);
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options ?? {};
    let limit = options?.limit;
    const threadId = configString(config, 'thread_id', false);
    const ns = configString(config, 'checkpoint_ns', false);
    const onlyId = getCheckpointId(config) || undefined;
    const beforeId = before ? getCheckpointId(before) || undefined : undefined;
    const threads: AsyncIterable<string> = threadId !== undefined ? one(threadItemId(threadId)) : this.store.itemIds();
    for await (const itemId of threads) {
      const got = await this.store.fields(itemId, [THREAD_ID_FIELD], ns !== undefined ? checkpointPrefix(ns) : 'c/');
      if (got === null) continue;
      const stored = got.get(THREAD_ID_FIELD);
      const tid = threadId ?? (typeof stored === 'string' ? stored : itemId);
      got.delete(THREAD_ID_FIELD);
      const records = [...got]
        .map(([name, v]) => checkpointRecord(name, v))
        .filter((r) => (ns === undefined || r.ns === ns) && (onlyId === undefined || r.id === onlyId) && (beforeId === undefined || r.id < beforeId))
        // Newest first within a namespace (ids are time-ordered uuid6), namespaces in order.
        .sort((a, b) => (a.ns < b.ns ? -1 : a.ns > b.ns ? 1 : a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
      for (const rec of records) {
        if (limit !== undefined && limit <= 0) return;
        if (filter && Object.keys(filter).length > 0) {
          const metadata = (await this.serde.loadsTyped(...fromSerialized(rec.metadata))) as Record<string, unknown>;
          if (!Object.entries(filter).every(([k, want]) => metadata?.[k] === want)) continue;
        }
        if (limit !== undefined) limit--;
        yield await this.tuple(itemId, tid, rec, { configurable: { thread_id: tid, checkpoint_ns: rec.ns, checkpoint_id: rec.id } });
      }
    }
  }

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const threadId = configString(config, 'thread_id', true)!;
    const ns = configString(config, 'checkpoint_ns', false) ?? '';
    const parent = configString(config, 'checkpoint_id', false) ?? null;
    const itemId = threadItemId(threadId);
    // Channel values are stored apart, once per (channel, version), by the checkpoint that wrote
    // that version (newVersions): a checkpoint's record stays small however large the state.
    const copy = copyCheckpoint(checkpoint);
    const values = copy.channel_values;
    copy.channel_values = {};
    const [ser, meta] = await Promise.all([this.serde.dumpsTyped(copy), this.serde.dumpsTyped(metadata)]);
    const name = checkpointField(ns, checkpoint.id);
    const rec: CheckpointRecord = { ns, id: checkpoint.id, parent, checkpoint: toSerialized(ser), metadata: toSerialized(meta) };
    const set: Record<string, unknown> = { [name]: rec };
    for (const [channel, version] of Object.entries(newVersions)) {
      const vr: ValueRecord = { channel };
      if (Object.hasOwn(values, channel)) vr.value = toSerialized(await this.serde.dumpsTyped(values[channel]));
      set[valueField(ns, channel, version)] = vr;
    }
    if (itemId !== threadId) set[THREAD_ID_FIELD] = threadId;
    await this.store.append({ itemId, runId: this.runId, step: { name: CHECKPOINT_STEP, instanceId: name }, set });
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const threadId = configString(config, 'thread_id', true)!;
    const ns = configString(config, 'checkpoint_ns', false) ?? '';
    const checkpointId = configString(config, 'checkpoint_id', true)!;
    if (writes.length === 0) return;
    const itemId = threadItemId(threadId);
    const existing = (await this.store.fields(itemId, [], writesPrefix(ns, checkpointId))) ?? new Map<string, OutputValue>();
    const set: Record<string, unknown> = {};
    await Promise.all(
      writes.map(async ([channel, value], i) => {
        // Special channels (errors, interrupts, ...) have fixed negative indexes and replace what
        // was there; regular writes keep the first value stored for (task, idx).
        const idx = WRITES_IDX_MAP[channel] ?? i;
        const name = writeField(ns, checkpointId, taskId, idx);
        if (idx >= 0 && existing.has(name)) return;
        const rec: WriteRecord = { ns, checkpointId, taskId, idx, channel, taskPath: taskPath ?? '', value: toSerialized(await this.serde.dumpsTyped(value)) };
        set[name] = rec;
      }),
    );
    if (Object.keys(set).length === 0) return;
    if (itemId !== threadId) set[THREAD_ID_FIELD] = threadId;
    await this.store.append({ itemId, runId: this.runId, set });
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.store.deleteItem(threadItemId(String(threadId)));
  }

  /**
   * The newest checkpoint of a namespace: the newest `checkpoint` step of the item whose instance
   * is in the namespace (each put's batch completes step `checkpoint` with instance = the
   * record's field name). Reads the newest step events only, paging back past other namespaces.
   */
  private async latestId(itemId: string, ns: string): Promise<string | undefined> {
    const prefix = checkpointPrefix(ns);
    let before: number | undefined;
    for (let page = 16; ; page = Math.min(page * 4, 4096)) {
      const steps = await this.store.latestSteps(itemId, page, before);
      if (steps === null || steps.length === 0) return undefined;
      for (const s of steps) if (s.instanceId?.startsWith(prefix)) return s.instanceId;
      if (steps.length < page) return undefined;
      before = steps.at(-1)!.seq;
    }
  }

  /** The tuple of a checkpoint record: one more read for its channel values and pending writes. */
  private async tuple(itemId: string, threadId: string, rec: CheckpointRecord, config: RunnableConfig): Promise<CheckpointTuple> {
    const checkpoint = (await this.serde.loadsTyped(...fromSerialized(rec.checkpoint))) as Checkpoint;
    const valueNames = Object.entries(checkpoint.channel_versions ?? {}).map(([channel, version]) => valueField(rec.ns, channel, version));
    const wp = writesPrefix(rec.ns, rec.id);
    const got = (await this.store.fields(itemId, valueNames, wp)) ?? new Map<string, OutputValue>();
    const channelValues: Record<string, unknown> = {};
    const writes: WriteRecord[] = [];
    for (const [name, v] of got) {
      if (name.startsWith(wp)) {
        writes.push(writeRecord(name, v));
        continue;
      }
      const r = valueRecord(name, v);
      if (r.value !== undefined) channelValues[r.channel] = await this.serde.loadsTyped(...fromSerialized(r.value));
    }
    checkpoint.channel_values = channelValues;
    if (checkpoint.v < 4 && rec.parent !== null) await this.migratePendingSends(itemId, checkpoint, rec.ns, rec.parent);
    const tuple: CheckpointTuple = {
      config,
      checkpoint,
      metadata: (await this.serde.loadsTyped(...fromSerialized(rec.metadata))) as CheckpointMetadata,
      pendingWrites: await this.pendingWrites(writes),
    };
    if (rec.parent !== null) tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: rec.ns, checkpoint_id: rec.parent } };
    return tuple;
  }

  private async pendingWrites(writes: WriteRecord[]): Promise<CheckpointPendingWrite[]> {
    writes.sort((a, b) => compareWritesSortKeys(writesSortKey(a.taskPath, a.taskId, a.idx), writesSortKey(b.taskPath, b.taskId, b.idx)));
    return Promise.all(writes.map(async (w): Promise<CheckpointPendingWrite> => [w.taskId, w.channel, await this.serde.loadsTyped(...fromSerialized(w.value))]));
  }

  /** Checkpoints before format 4 kept pending sends as the parent's TASKS writes (as MemorySaver does). */
  private async migratePendingSends(itemId: string, checkpoint: Checkpoint, ns: string, parentId: string): Promise<void> {
    const got = (await this.store.fields(itemId, [], writesPrefix(ns, parentId))) ?? new Map<string, OutputValue>();
    const sends = (await this.pendingWrites([...got].map(([name, v]) => writeRecord(name, v)))).filter(([, channel]) => channel === TASKS);
    const values: Record<string, unknown> = checkpoint.channel_values;
    values[TASKS] = sends.map(([, , value]) => value);
    const versions = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
  }
}

async function* one<T>(v: T): AsyncGenerator<T> {
  yield v;
}
