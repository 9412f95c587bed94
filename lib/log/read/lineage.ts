/**
 * The lineage of listed items (`items()`, the report): a fork's log holds one lineage event per
 * forked item (lib/lineage.ts), which listings, reading no value columns, do not fold. A log a
 * fork made carries FORK_MARKER; only there are the page's lineage events read (one read of
 * that field for the page's items), so other logs' listings cost nothing more.
 */
import { LINEAGE_FIELD, parseLineage } from '../../lineage.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { ForkedFrom } from '../../types.ts';
import { FORK_MARKER } from '../layout.ts';
import { loadFields, type LoadSource } from './select-loads.ts';

export class LineageLookup {
  /** Set once the marker was seen: a log never stops being a fork. */
  private isFork = false;

  constructor(private readonly objects: ObjectStore) {}

  /** Each of `ids` a fork made, with its lineage (none: the log is not a fork). */
  async of(src: LoadSource, ids: readonly string[]): Promise<Map<string, ForkedFrom>> {
    const out = new Map<string, ForkedFrom>();
    if (ids.length === 0) return out;
    if (!this.isFork) this.isFork = (await this.objects.get(FORK_MARKER)) !== null;
    if (!this.isFork) return out;
    for (const [id, fields] of await loadFields(src, ids, [LINEAGE_FIELD])) {
      if (LINEAGE_FIELD in fields) out.set(id, parseLineage(fields[LINEAGE_FIELD], `item ${JSON.stringify(id)}`));
    }
    return out;
  }
}
