/**
 * How a LangGraph thread reads in the CLI and the report: as a thread with its checkpoints,
 * channels and pending writes, not as an item with dozens of fields named `c//...`, `v//...` and
 * `w//...` (lib/langgraph/records.ts). Pure functions over what the saver stores, so threads
 * written by any version of the saver read this way, and this module needs no LangGraph package.
 *
 * A thread is recognised by its cursor: the saver completes step `checkpoint` with instance = the
 * checkpoint record's field name (`c/<ns>/<id>`) at every put.
 */
import type { Cursor, OutputValue } from '../types.ts';
import { CHECKPOINT_STEP, THREAD_ID_FIELD } from './records.ts';

const CHECKPOINT_FIELD = /^c\/([^/]*)\/([^/]+)$/;
const VALUE_FIELD = /^v\/([^/]*)\/([^/]+)\/([^/]+)$/;
const WRITE_FIELD = /^w\/([^/]*)\/([^/]+)\/([^/]+)\/(-?\d+)$/;

/** Whether an item whose cursor is `c` holds a LangGraph thread. */
export function isThreadCursor(c: Pick<Cursor, 'stepName' | 'stepInstanceId'> | null | undefined): boolean {
  return c?.stepName === CHECKPOINT_STEP && typeof c.stepInstanceId === 'string' && CHECKPOINT_FIELD.test(c.stepInstanceId);
}

/** An item id the saver made from a thread id it could not use as one (the id is then in field `thread_id`). */
export function isHashedThreadItem(itemId: string): boolean {
  return itemId.startsWith('#');
}

const ns = (part: string) => (part === '' ? '' : `${part}:`);

/** `checkpoint <ns:>id` of a checkpoint record's field name (a thread's cursor instance), or null. */
export function checkpointLabel(fieldName: string | null | undefined): string | null {
  const m = fieldName ? CHECKPOINT_FIELD.exec(fieldName) : null;
  return m ? `checkpoint ${ns(m[1]!)}${m[2]}` : null;
}

/**
 * What one of the saver's field names holds, in words (`checkpoint <id>`, `channel <name> @
 * <version>`, `pending write <task>/<idx> of checkpoint <id>`, `thread id`); null for any other
 * name. Name parts that were too long or not plain are `#`-hashes (the records hold the values).
 */
export function describeThreadField(name: string): string | null {
  const c = checkpointLabel(name);
  if (c) return c;
  let m = VALUE_FIELD.exec(name);
  if (m) return `channel ${ns(m[1]!)}${m[2]} @ ${m[3]}`;
  m = WRITE_FIELD.exec(name);
  if (m) return `pending write ${m[3]}/${m[4]} of checkpoint ${ns(m[1]!)}${m[2]}`;
  return name === THREAD_ID_FIELD ? 'thread id' : null;
}

/** A thread's fields, summarised. */
export interface ThreadSummary {
  /** The thread id when the item id is a hash of it (field `thread_id`), else null. */
  threadId: string | null;
  checkpoints: number;
  /** Namespaces with checkpoints ('' is the root graph's). */
  namespaces: string[];
  /** The highest checkpoint id of the root namespace (of any, when it has none): ids are time-ordered. */
  latest: string | null;
  /** Channels with stored values, by name. */
  channels: string[];
  values: number;
  writes: number;
  /** Fields that are not the saver's. */
  others: string[];
}

type Obj = Record<string, unknown>;
const asObj = (v: unknown): Obj | null => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : null);

/** The summary of a thread's folded fields, or null when they are not a LangGraph thread's. */
export function summarizeThread(fields: Record<string, OutputValue>): ThreadSummary | null {
  const s: ThreadSummary = { threadId: null, checkpoints: 0, namespaces: [], latest: null, channels: [], values: 0, writes: 0, others: [] };
  const namespaces = new Set<string>();
  const channels = new Set<string>();
  let latestRoot: string | null = null;
  for (const [name, v] of Object.entries(fields)) {
    const o = asObj(v);
    if (CHECKPOINT_FIELD.test(name) && typeof o?.id === 'string' && typeof o.ns === 'string') {
      const id = o.id;
      s.checkpoints++;
      namespaces.add(o.ns);
      if (s.latest === null || id > s.latest) s.latest = id;
      if (o.ns === '' && (latestRoot === null || id > latestRoot)) latestRoot = id;
    } else if (VALUE_FIELD.test(name) && typeof o?.channel === 'string') {
      s.values++;
      channels.add(o.channel);
    } else if (WRITE_FIELD.test(name) && o !== null) {
      s.writes++;
    } else if (name === THREAD_ID_FIELD && typeof v === 'string') {
      s.threadId = v;
    } else {
      s.others.push(name);
    }
  }
  if (s.checkpoints === 0) return null;
  s.latest = latestRoot ?? s.latest;
  s.namespaces = [...namespaces].sort();
  s.channels = [...channels].sort();
  return s;
}
