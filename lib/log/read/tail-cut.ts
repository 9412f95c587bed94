/**
 * The unmerged tail of a whole-log read (listings, reports, exports, `allStates`), each item as it
 * was at one moment. Live generations are read at their latest version one after another, so a
 * read of several is not one point in time. Within an epoch that cannot split an item (its
 * generations are read newest first: lib/log/read/visibility.ts `epochGroups`), but an item's
 * batch may go through one epoch into a generation already read, and its next batch through
 * another epoch into a generation read afterwards: the read would show the later batch without
 * the earlier one (docs/design/invariants.md, "Reads").
 *
 * So after the pass, rounds: list the meta folder, count every live generation's rows again (one
 * new in the listing from 0), and find the items that gained rows in between and have rows in
 * live generations of two epochs. Every other item is as the pass read it at one moment (from the
 * pass's counts to the round's listing it gained nothing, or only in one epoch). Those found are
 * read again at the round's counts, and the next round asks the same of them, until none is
 * left. A round costs a listing, a row count per live generation and, for items found, a take of
 * their rows; if items are still found after a few rounds the read starts over.
 *
 * Generations are only appended to while live, so a count is a version: offsets below it are the
 * same rows at every later version. A filtered query at the latest version may show rows past the
 * count taken before it, but only of items that the next round then finds and reads again.
 */
import type * as arrow from 'apache-arrow';
import { guard } from '../../guards.ts';
import { Utf8Column } from '../columns.ts';
import { projection, sqlIn, type Table } from '../tables.ts';
import { ReadAgainError, type LogReader } from './reader.ts';
import { shardName } from '../layout.ts';
import { readOrder, type ShardListing, type ShardView } from './visibility.ts';

/** Rounds before a read whose items keep changing starts over (its later attempts may pass). */
const MAX_ROUNDS = 4;
/** Items per `item_id IN (...)` of a round's filtered query. */
const ITEMS_CHUNK = 1000;

export interface TailRows {
  batches: arrow.RecordBatch[];
  /** Per batch, the rows the read takes (null: all of them). */
  masks: Array<((row: number) => boolean) | null>;
  /** Per batch, whether it is the reader's tail cache's: never release or change it. */
  shared: boolean[];
}

/**
 * Every visible generation's rows with `columns` (which must hold `item_id`) matching `filter`
 * (null: all), each item's at one moment. `keep`: an unfiltered read keeps what it took in the
 * reader's tail cache for the next (lib/log/read/tail-cache.ts).
 */
export async function readTail(reader: LogReader, listing: ShardListing, cols: readonly string[], filter: string | null, keep: boolean): Promise<TailRows> {
  const shared = filter === null && keep;
  const take = async (v: ShardView): Promise<{ batches: arrow.RecordBatch[]; count: number }> => {
    if (filter === null) return reader.wholeGeneration(v, cols, shared);
    const t = await reader.shardTable(v);
    // Counted before the query: the query sees at least these rows.
    const count = v.version !== null ? 0 : await t.countRows();
    return { batches: await query(t, filter, cols), count };
  };

  // The pass: each generation once.
  const pass = new Map<string, arrow.RecordBatch[]>();
  let counts = new Map<string, number>();
  for (const v of readOrder(listing.visible)) {
    const got = await take(v);
    pass.set(v.name, got.batches);
    if (v.version === null) counts.set(v.name, got.count);
  }
  const names = listing.visible.map((v) => v.name);
  const whole = (): TailRows => {
    // The pass's generations (one a round found is of no item it read again: nothing of it).
    const batches = names.flatMap((n) => pass.get(n) ?? []);
    return { batches, masks: batches.map(() => null), shared: batches.map(() => shared) };
  };
  if (counts.size === 0 || !guard('recount-live-generations')) return whole();

  // The rounds. `views`: every live generation met so far (new ones appear in later listings).
  const views = new Map(listing.visible.filter((v) => v.version === null).map((v) => [v.name, v]));
  /** Items read again, each with the round whose rows of it the read takes. */
  const settled = new Map<string, number>();
  /** Per round from 1: the rows read again (of that round's items), by generation. */
  const again: Array<Map<string, arrow.RecordBatch[]>> = [];
  let open: Set<string> | null = null;
  for (let round = 1; ; round++) {
    const now = await reader.listShards();
    if (now.logId !== listing.logId || !sameTombstones(now.tombstones, listing.tombstones)) throw new ReadAgainError('the log was made again, or an item deleted, during the read');
    const live = new Map(now.visible.filter((v) => v.version === null).map((v) => [v.name, v]));
    for (const name of views.keys()) {
      if (!live.has(name)) throw new ReadAgainError(`shard generation ${name} was retired, sealed or fenced during the read`);
    }
    const ended = endedUnseen(listing, now, live);
    if (ended) throw new ReadAgainError(`shard generation ${ended} was made and ended during the read`);
    for (const [name, v] of live) {
      if (!views.has(name)) {
        views.set(name, v);
        counts.set(name, 0);
        names.push(name);
      }
    }
    const next = new Map<string, number>();
    const arrived = new Set<string>();
    await Promise.all(
      [...views.values()].map(async (v) => {
        const from = counts.get(v.name)!;
        const to = await (await reader.shardTable(v)).countRows();
        if (to < from) throw new ReadAgainError(`shard generation ${v.name} holds fewer rows than the read counted (${to} < ${from})`);
        next.set(v.name, to);
        if (to > from) for (const id of await reader.itemsIn(v, from, to)) arrived.add(id);
      }),
    );
    let still: Set<string>;
    if (open !== null) still = new Set([...open].filter((id) => arrived.has(id)));
    else if (arrived.size === 0) still = arrived;
    else {
      // Only items with rows in two epochs' live generations can be split.
      const epochs = async (id: string) => {
        const holding = await Promise.all([...views.values()].map(async (v) => ((await reader.holds(v, id, next.get(v.name)!)) ? v.writerEpoch : null)));
        return new Set(holding.filter((e) => e !== null)).size;
      };
      const split = await Promise.all([...arrived].map(async (id) => ((await epochs(id)) > 1 ? id : null)));
      still = new Set(split.filter((id): id is string => id !== null));
    }
    if (open !== null) for (const id of open) if (!still.has(id)) settled.set(id, round - 1);
    if (still.size === 0) break;
    if (round > MAX_ROUNDS) {
      const some = [...still].slice(0, 3).map((id) => JSON.stringify(id)).join(', ');
      throw new ReadAgainError(`items kept changing during a read of the whole log (${some}${still.size > 3 ? ', ...' : ''})`);
    }
    const rows = new Map<string, arrow.RecordBatch[]>();
    const ids = [...still];
    for (const v of views.values()) {
      const at = next.get(v.name)!;
      if (filter === null) {
        rows.set(v.name, await reader.itemBatches(v, still, cols, at));
        continue;
      }
      const t = await reader.shardTable(v);
      const out: arrow.RecordBatch[] = [];
      for (let i = 0; i < ids.length; i += ITEMS_CHUNK) out.push(...(await query(t, `(${filter}) AND ${sqlIn('item_id', ids.slice(i, i + ITEMS_CHUNK))}`, cols)));
      rows.set(v.name, out);
    }
    again.push(rows);
    open = still;
    counts = next;
  }
  if (settled.size === 0) return whole();

  // Each item's rows from the round it settled in (0: the pass); a sealed generation's all.
  const out: TailRows = { batches: [], masks: [], shared: [] };
  const roundOf = (id: string) => settled.get(id) ?? 0;
  const add = (batches: readonly arrow.RecordBatch[] | undefined, round: number | null, isShared: boolean) => {
    for (const b of batches ?? []) {
      out.batches.push(b);
      out.shared.push(isShared);
      if (round === null) {
        out.masks.push(null);
        continue;
      }
      const items = new Utf8Column(b, 'item_id');
      out.masks.push((r) => roundOf(items.get(r)!) === round);
    }
  };
  for (const n of names) add(pass.get(n), views.has(n) ? 0 : null, shared);
  again.forEach((rows, i) => {
    for (const n of names) add(rows.get(n), i + 1, false);
  });
  return out;
}

/**
 * A generation the read cannot have read that may have held rows (now merged into the base, which
 * the read pinned before): one made after `before` and already ended by `now`, or null. Told by
 * what stays in the meta folder: a writer epoch `before` did not know that has ended (a fence or
 * seal of its own, no live generation), or a generation number of an epoch between the highest
 * `before` knew (0 for an epoch it did not know) and the epoch's highest live one that is not
 * live (generations are numbered from 1, in order; one made ahead and given up unused is such a
 * gap too, and only makes the read start over, which then knows it).
 */
function endedUnseen(before: ShardListing, now: ShardListing, live: ReadonlyMap<string, ShardView>): string | null {
  const all = (l: ShardListing) => [...l.visible, ...l.invisible, ...l.pending, ...l.retired];
  const knownEpochs = new Set([...all(before).map((g) => g.writerEpoch), ...before.sealedEpochs, ...before.fencedEpochs]);
  for (const e of [...now.sealedEpochs, ...now.fencedEpochs, ...all(now).map((g) => g.writerEpoch)]) {
    if (!knownEpochs.has(e) && ![...live.values()].some((v) => v.writerEpoch === e)) return `of writer epoch ${e}`;
  }
  const seen = new Set([...all(before), ...live.values()].map((g) => g.name));
  const highest = new Map<string, { name: string; generation: number }>();
  for (const v of live.values()) if ((highest.get(v.writerEpoch)?.generation ?? 0) < v.generation) highest.set(v.writerEpoch, v);
  for (const [epoch, top] of highest) {
    const known = all(before).filter((g) => g.writerEpoch === epoch).map((g) => g.generation);
    // Numbers above the highest the read knew were made after its listing (those below, before).
    for (let g = (known.length > 0 ? Math.max(...known) + 1 : 1); g < top.generation; g++) {
      const name = shardName(epoch, g);
      if (!seen.has(name)) return name;
    }
  }
  return null;
}

function sameTombstones(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): boolean {
  return a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
}

async function query(t: Table, filter: string, columns: readonly string[]): Promise<arrow.RecordBatch[]> {
  return (await t.query().where(filter).select(projection(columns)).toArrow()).batches;
}
