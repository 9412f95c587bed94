/**
 * Display names of the LangGraph threads among listed items (lib/langgraph/view.ts): `LangGraph
 * thread`, with the thread id when the item id is a hash of it (one read of field `thread_id`).
 */
import { NotFoundError } from '../lib/errors.ts';
import { isHashedThreadItem, isThreadCursor } from '../lib/langgraph/view.ts';
import { THREAD_ID_FIELD } from '../lib/langgraph/records.ts';
import type { CheckpointLog } from '../lib/api.ts';
import type { Cursor } from '../lib/types.ts';

export async function threadNames(log: CheckpointLog, items: ReadonlyArray<{ itemId: string; cursor: Cursor | null }>): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const it of items) {
    if (!isThreadCursor(it.cursor)) continue;
    let name = 'LangGraph thread';
    if (isHashedThreadItem(it.itemId)) {
      // Deleted since it was listed: shown without its thread id.
      const got = await log.fields(it.itemId, { names: [THREAD_ID_FIELD] }).catch((e: unknown) => {
        if (e instanceof NotFoundError) return null;
        throw e;
      });
      const id = got?.fields[THREAD_ID_FIELD];
      if (typeof id === 'string') name += ` ${JSON.stringify(id)}`;
    }
    names.set(it.itemId, name);
  }
  return names;
}
