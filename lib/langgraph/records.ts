/**
 * How LangGraph's data sits in an item's fields (docs/langgraph.md):
 *
 *   c/<ns>/<checkpoint id>              one checkpoint (serialized checkpoint + metadata + parent)
 *   w/<ns>/<checkpoint id>/<task>/<idx> one pending write
 *   v/<ns>/<channel>/<version>          one channel value, written by the checkpoint that changed it
 *   thread_id                           the thread id, when the item id had to be a hash of it
 *
 * A name part is the value itself when it is short and plain, else `#` + a hash of it, so every
 * name stays under the log's 256-character limit and one prefix names exactly one namespace or
 * checkpoint; the records carry the real values.
 */
import { createHash } from 'node:crypto';
import { hasControlChars, isWellFormed } from '../codec.ts';
import { CorruptError } from '../errors.ts';
import type { OutputValue } from '../types.ts';

const PLAIN = /^[A-Za-z0-9_.:|=+-]{0,80}$/;

const hash = (s: string) => `#${createHash('sha256').update(s, 'utf8').digest('hex').slice(0, 40)}`;

/** A name part: itself if short and plain (never containing '/' or starting with '#'), else a hash. */
export function part(s: string): string {
  return PLAIN.test(s) ? s : hash(s);
}

/** The item holding a thread: the thread id itself when it is a valid item id, else a hash. */
export function threadItemId(threadId: string): string {
  const ok = threadId.length >= 1 && threadId.length <= 512 && !threadId.startsWith('#') && !hasControlChars(threadId) && isWellFormed(threadId);
  return ok ? threadId : hash(threadId);
}

export const checkpointPrefix = (ns: string) => `c/${part(ns)}/`;
export const checkpointField = (ns: string, id: string) => `${checkpointPrefix(ns)}${part(id)}`;
export const writesPrefix = (ns: string, checkpointId: string) => `w/${part(ns)}/${part(checkpointId)}/`;
export const writeField = (ns: string, checkpointId: string, taskId: string, idx: number) => `${writesPrefix(ns, checkpointId)}${part(taskId)}/${idx}`;
export const valueField = (ns: string, channel: string, version: string | number) => `v/${part(ns)}/${part(channel)}/${part(String(version))}`;
export const THREAD_ID_FIELD = 'thread_id';
/** The step a checkpoint's batch completes (instance = the checkpoint record's field name). */
export const CHECKPOINT_STEP = 'checkpoint';

/** Serialized bytes: as text when they are UTF-8 (JSON serde), else base64. */
export type Serialized = { t: string; s: string } | { t: string; b: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function toSerialized([t, bytes]: [string, Uint8Array]): Serialized {
  try {
    return { t, s: utf8.decode(bytes) };
  } catch {
    return { t, b: Buffer.from(bytes).toString('base64') };
  }
}

export function fromSerialized(v: Serialized): [string, Uint8Array] {
  return 's' in v ? [v.t, new TextEncoder().encode(v.s)] : [v.t, new Uint8Array(Buffer.from(v.b, 'base64'))];
}

export interface CheckpointRecord {
  ns: string;
  id: string;
  parent: string | null;
  checkpoint: Serialized;
  metadata: Serialized;
}

export interface WriteRecord {
  ns: string;
  checkpointId: string;
  taskId: string;
  idx: number;
  channel: string;
  taskPath: string;
  value: Serialized;
}

type Obj = Record<string, unknown>;

function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function serialized(v: unknown, where: string): Serialized {
  if (isObject(v) && typeof v.t === 'string' && (typeof v.s === 'string' || typeof v.b === 'string')) return v as Serialized;
  throw new CorruptError(`${where}: not a serialized value`);
}

export function checkpointRecord(name: string, value: OutputValue | undefined): CheckpointRecord {
  const v: unknown = value;
  if (!isObject(v) || typeof v.ns !== 'string' || typeof v.id !== 'string' || (v.parent !== null && typeof v.parent !== 'string')) {
    throw new CorruptError(`field ${name}: not a LangGraph checkpoint record`);
  }
  return { ns: v.ns, id: v.id, parent: v.parent, checkpoint: serialized(v.checkpoint, name), metadata: serialized(v.metadata, name) };
}

export function writeRecord(name: string, value: OutputValue | undefined): WriteRecord {
  const v: unknown = value;
  if (!isObject(v) || typeof v.ns !== 'string' || typeof v.checkpointId !== 'string' || typeof v.taskId !== 'string' || typeof v.idx !== 'number' || typeof v.channel !== 'string') {
    throw new CorruptError(`field ${name}: not a LangGraph write record`);
  }
  return {
    ns: v.ns,
    checkpointId: v.checkpointId,
    taskId: v.taskId,
    idx: v.idx,
    channel: v.channel,
    taskPath: typeof v.taskPath === 'string' ? v.taskPath : '',
    value: serialized(v.value, name),
  };
}

/** A channel's value at one version; `value` absent when the channel was emptied. */
export interface ValueRecord {
  channel: string;
  value?: Serialized;
}

export function valueRecord(name: string, value: OutputValue | undefined): ValueRecord {
  const v: unknown = value;
  if (!isObject(v) || typeof v.channel !== 'string') throw new CorruptError(`field ${name}: not a LangGraph channel value record`);
  return v.value === undefined ? { channel: v.channel } : { channel: v.channel, value: serialized(v.value, name) };
}
