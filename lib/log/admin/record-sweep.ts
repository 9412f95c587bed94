/**
 * A log's records in the lease table, found and deleted (lib/log/admin/drop.ts). Records of a
 * log are keyed `<pipeline>/<experiment>/<logId>/<key>` (lib/coord/dynamo.ts): item markers,
 * claims and the sentinel `_dgcl/log` naming the log's location. A log id is this place's when
 * it is the id of the log's coordination record (and its sentinel does not name another place:
 * a copy of a log shares the original's id), or when its sentinel names this place (an earlier
 * log here, deleted without its records). Logs of the same names under another root, sharing
 * the table, have ids whose sentinels name their own place: never touched.
 *
 * Sentinels are kept until the end (`deleteSentinels`): while one stands, a rerun after a crash
 * still finds the records of its id.
 */
import { SENTINEL_KEY } from '../../coord/choose.ts';
import type { TableRecords } from './table-records.ts';

const ID_RE = /^[0-9a-f-]{36}$/;

export class RecordSweep {
  private readonly prefix: string;
  private readonly owners = new Map<string, boolean>();
  private readonly sentinels = new Set<string>();

  /**
   * `current`: the id of the log's coordination record and whether it is this place's (null:
   * it has none).
   */
  constructor(
    private readonly records: TableRecords,
    pipeline: string,
    experiment: string,
    private readonly location: string,
    current: { id: string; owned: boolean } | null,
  ) {
    this.prefix = `${pipeline}/${experiment}/`;
    if (current) this.owners.set(current.id, current.owned);
  }

  /** The scope of `id`'s records (`<pipeline>/<experiment>/<id>/`). */
  scopeOf(id: string): string {
    return `${this.prefix}${id}/`;
  }

  /** Whether any record of this place is in the table (stops at the first). */
  async any(): Promise<boolean> {
    for await (const page of this.records.keysWithPrefix(this.prefix)) {
      for (const pk of page) if ((await this.ownerOf(pk)) !== null) return true;
    }
    return false;
  }

  /**
   * Deletes every record of this place but the sentinels and the keys in `skip` (lease records,
   * which the caller ends itself), page by page, calling `check` before each page's deletes.
   * Returns how many were deleted.
   */
  async sweep(skip: ReadonlySet<string>, check: () => void): Promise<number> {
    let n = 0;
    for await (const page of this.records.keysWithPrefix(this.prefix)) {
      const doomed: string[] = [];
      for (const pk of page) {
        const owner = await this.ownerOf(pk);
        if (owner === null || skip.has(pk)) continue;
        if (pk === `${this.scopeOf(owner)}${SENTINEL_KEY}`) this.sentinels.add(pk);
        else doomed.push(pk);
      }
      check();
      n += await this.records.deleteKeys(doomed);
    }
    return n;
  }

  /** Deletes the sentinels the sweep met; returns how many. */
  async deleteSentinels(): Promise<number> {
    return this.records.deleteKeys([...this.sentinels]);
  }

  /** The id of a record of this place (`pk` under one of its ids), or null. */
  private async ownerOf(pk: string): Promise<string | null> {
    if (!pk.startsWith(this.prefix)) return null;
    const rest = pk.slice(this.prefix.length);
    const slash = rest.indexOf('/');
    const id = slash < 0 ? '' : rest.slice(0, slash);
    if (!ID_RE.test(id)) return null; // a lease key (`slot/<n>`, `maintainer`), not a log's record
    let owned = this.owners.get(id);
    if (owned === undefined) {
      owned = (await this.records.body(`${this.scopeOf(id)}${SENTINEL_KEY}`)) === this.location;
      this.owners.set(id, owned);
    }
    return owned ? id : null;
  }
}
