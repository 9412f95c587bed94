/**
 * The lineage of listed items (`items()`, the report): a fork's log holds one lineage event per
 * forked item (lib/lineage.ts), which listings, reading no value columns, do not fold. A log a
 * fork made carries FORK_MARKER; only there are the page's lineage events read (one read of
 * that field for the page's items), so other logs' listings cost nothing more.
 */
import type * as arrow from 'apache-arrow';
import { decodeValue } from '../../codec.ts';
import { LINEAGE_FIELD, parseLineage } from '../../lineage.ts';
import { LIGHT_COLUMNS, rowsFromArrow } from '../../schema.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { EventRow, ForkedFrom } from '../../types.ts';
import { BASE_KEY, FORK_MARKER } from '../layout.ts';
import { sqlIn, sqlString } from '../tables.ts';
import { MAX_IN, type LoadSource } from './select-loads.ts';

export class LineageLookup {
  /** Set once the marker was seen: a log never stops being a fork. */
  private isFork = false;
  /**
   * Set once the marker was looked for in vain while the base existed: a fork writes its marker
   * before its base, so that answer is final for this log (a log made again at the place gets a
   * new object of this class with its next open).
   */
  private notFork = false;

  constructor(private readonly objects: ObjectStore) {}

  /** Each of `ids` a fork made, with its lineage (none: the log is not a fork). */
  async of(src: LoadSource, ids: readonly string[]): Promise<Map<string, ForkedFrom>> {
    const out = new Map<string, ForkedFrom>();
    if (ids.length === 0) return out;
    if (this.notFork) return out;
    if (!this.isFork) {
      const [marker, base] = await Promise.all([this.objects.get(FORK_MARKER), this.objects.get(BASE_KEY)]);
      this.isFork = marker !== null;
      this.notFork = marker === null && base !== null;
    }
    if (!this.isFork) return out;
    const all = await lineageIn(src, ids.length <= MAX_IN ? ids : null);
    for (const id of ids) {
      const f = all.get(id);
      if (f) out.set(id, f);
    }
    return out;
  }
}

/** The lineage of every forked item of a log (of `ids` only, when given). */
export async function lineageIn(src: LoadSource, ids: readonly string[] | null = null): Promise<Map<string, ForkedFrom>> {
  const filter = `field_name = ${sqlString(LINEAGE_FIELD)}` + (ids !== null ? ` AND ${sqlIn('item_id', ids)}` : '');
  const rows = await src.scanEvents({ columns: LIGHT_COLUMNS, filter }, () => {
    const out: EventRow[] = [];
    return {
      batch(b: arrow.RecordBatch, keep: (r: number) => boolean) {
        const rs = rowsFromArrow({ numRows: b.numRows, getChild: (n: string) => b.getChild(n) } as unknown as arrow.Table);
        for (let r = 0; r < rs.length; r++) if (keep(r) && rs[r]!.field_name === LINEAGE_FIELD) out.push(rs[r]!);
      },
      done: () => out,
    };
  });
  // One lineage event per item; were there more, the first counts (as fold's dedupe keeps the lowest seq).
  rows.sort((a, b) => a.item_seq - b.item_seq);
  const out = new Map<string, ForkedFrom>();
  for (const r of rows) if (!out.has(r.item_id)) out.set(r.item_id, parseLineage(decodeValue(r), `event ${r.event_id} (item ${JSON.stringify(r.item_id)})`));
  return out;
}
