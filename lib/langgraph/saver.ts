/**
 * A LangGraph.js checkpoint saver on the log: thread -> item, checkpoint -> batch
 * (docs/langgraph.md). Each `put` is one checkpoint batch of the thread's item: a FIELD_SET of
 * the checkpoint record under its own field name, the namespace's newest-id pointer when it moves
 * forward, and STEP_COMPLETED (step `checkpoint`, instance = the checkpoint's field), so the
 * item's cursor is the newest checkpoint and its trajectory is the run's history. `putWrites`
 * is one batch of FIELD_SETs (no step: pending writes are not a step boundary).
 *
 * Reads ask for fields by name or prefix (lib/langgraph/store.ts): the latest checkpoint is the
 * pointer, then that one record and its writes.
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
import type { OpenLogOptions } from '../index.ts';
import type { CheckpointBatchInput, OutputValue } from '../types.ts';
import {
  THREAD_ID_FIELD,
  checkpointField,
  checkpointPrefix,
  checkpointRecord,
  fromSerialized,
  latestField,
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
import { ThreadStore, type ThreadView } from './store.ts';

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
    const view = await this.store.view(threadItemId(threadId));
    if (!view.exists) return undefined;
    const id = wanted ?? (await latestId(view, ns));
    if (id === undefined) return undefined;
    const v = await view.field(checkpointField(ns, id));
    if (v === undefined) return undefined;
    const rec = checkpointRecord(checkpointField(ns, id), v);
    const outConfig = wanted !== undefined ? config : { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } };
    return this.tuple(view, threadId, rec, outConfig);
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
      const view = await this.store.view(itemId);
      if (!view.exists) continue;
      const tid = threadId ?? threadIdOf(itemId, await view.field(THREAD_ID_FIELD));
      const records = [...(await view.prefix(ns !== undefined ? checkpointPrefix(ns) : 'c/'))]
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
        yield await this.tuple(view, tid, rec, { configurable: { thread_id: tid, checkpoint_ns: rec.ns, checkpoint_id: rec.id } });
      }
    }
  }

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const threadId = configString(config, 'thread_id', true)!;
    const ns = configString(config, 'checkpoint_ns', false) ?? '';
    const parent = configString(config, 'checkpoint_id', false) ?? null;
    const itemId = threadItemId(threadId);
    const view = await this.store.view(itemId);
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
    const latest = await latestId(view, ns);
    if (latest === undefined || checkpoint.id > latest) set[latestField(ns)] = checkpoint.id;
    if (!view.exists && itemId !== threadId) set[THREAD_ID_FIELD] = threadId;
    const batch: CheckpointBatchInput = { itemId, runId: this.runId, step: { name: 'checkpoint', instanceId: name }, set };
    await this.store.append(batch, !view.exists);
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const threadId = configString(config, 'thread_id', true)!;
    const ns = configString(config, 'checkpoint_ns', false) ?? '';
    const checkpointId = configString(config, 'checkpoint_id', true)!;
    if (writes.length === 0) return;
    const itemId = threadItemId(threadId);
    const view = await this.store.view(itemId);
    const existing = await view.prefix(writesPrefix(ns, checkpointId));
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
    if (!view.exists && itemId !== threadId) set[THREAD_ID_FIELD] = threadId;
    await this.store.append({ itemId, runId: this.runId, set }, !view.exists);
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.store.deleteItem(threadItemId(String(threadId)), this.runId);
  }

  private async tuple(view: ThreadView, threadId: string, rec: CheckpointRecord, config: RunnableConfig): Promise<CheckpointTuple> {
    const writes = [...(await view.prefix(writesPrefix(rec.ns, rec.id)))].map(([name, v]) => writeRecord(name, v));
    writes.sort((a, b) => compareWritesSortKeys(writesSortKey(a.taskPath, a.taskId, a.idx), writesSortKey(b.taskPath, b.taskId, b.idx)));
    const pendingWrites: CheckpointPendingWrite[] = await Promise.all(
      writes.map(async (w): Promise<CheckpointPendingWrite> => [w.taskId, w.channel, await this.serde.loadsTyped(...fromSerialized(w.value))]),
    );
    const checkpoint = (await this.serde.loadsTyped(...fromSerialized(rec.checkpoint))) as Checkpoint;
    checkpoint.channel_values = await this.channelValues(view, rec.ns, checkpoint.channel_versions);
    if (checkpoint.v < 4 && rec.parent !== null) await this.migratePendingSends(view, checkpoint, rec.ns, rec.parent);
    const tuple: CheckpointTuple = {
      config,
      checkpoint,
      metadata: (await this.serde.loadsTyped(...fromSerialized(rec.metadata))) as CheckpointMetadata,
      pendingWrites,
    };
    if (rec.parent !== null) tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: rec.ns, checkpoint_id: rec.parent } };
    return tuple;
  }

  /** The values of the channels at the versions a checkpoint names (read by name, not by history). */
  private async channelValues(view: ThreadView, ns: string, versions: ChannelVersions): Promise<Record<string, unknown>> {
    const names = Object.entries(versions ?? {}).map(([channel, version]) => valueField(ns, channel, version));
    const found = await view.fields(names);
    const out: Record<string, unknown> = {};
    for (const [name, v] of found) {
      const r = valueRecord(name, v);
      if (r.value !== undefined) out[r.channel] = await this.serde.loadsTyped(...fromSerialized(r.value));
    }
    return out;
  }

  /** Checkpoints before format 4 kept pending sends as the parent's TASKS writes (as MemorySaver does). */
  private async migratePendingSends(view: ThreadView, checkpoint: Checkpoint, ns: string, parentId: string): Promise<void> {
    const writes = [...(await view.prefix(writesPrefix(ns, parentId)))].map(([name, v]) => writeRecord(name, v)).filter((w) => w.channel === TASKS);
    writes.sort((a, b) => compareWritesSortKeys(writesSortKey(a.taskPath, a.taskId, a.idx), writesSortKey(b.taskPath, b.taskId, b.idx)));
    const values: Record<string, unknown> = checkpoint.channel_values;
    values[TASKS] = await Promise.all(writes.map((w) => this.serde.loadsTyped(...fromSerialized(w.value))));
    const versions = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
  }
}

async function latestId(view: ThreadView, ns: string): Promise<string | undefined> {
  const v = await view.field(latestField(ns));
  return typeof v === 'string' ? v : undefined;
}

function threadIdOf(itemId: string, stored: OutputValue | undefined): string {
  return typeof stored === 'string' ? stored : itemId;
}

async function* one<T>(v: T): AsyncGenerator<T> {
  yield v;
}
