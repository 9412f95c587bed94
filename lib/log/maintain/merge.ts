/**
 * Moving a shard generation into the base table (docs/design/shards.md, "Merge"):
 *   1. read the generation at its visible version (all columns, blobs included), or take the
 *      copy its writer kept of what it committed there;
 *   2. insert-if-absent into base keyed by event_id: one base commit, idempotent;
 *   3. write the retired marker (readers skip the generation from now on);
 *   4. delete the generation's files, then its `gen.` marker, then the retired marker.
 * A crash after any step leaves a state readers handle (duplicates dropped by event_id, retired
 * generations skipped, half-deleted generations behind a marker) and a rerun finishes the work.
 */
import { guard } from '../../guards.ts';
import type * as arrow from 'apache-arrow';
import { DgclError, UnavailableError } from '../../errors.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { genKey, retiredKey, shardPrefix } from '../layout.ts';
import type { LanceTables } from '../tables.ts';

export type MergeStep = 'read' | 'base-commit' | 'retire-marker' | 'delete-data' | 'delete-marker';

export interface MergeHooks {
  /** Called before each step; throwing simulates a crash at that point (tests). */
  beforeMergeStep?(step: MergeStep, shard: string): void | Promise<void>;
}

export async function mergeGeneration(
  ctx: { tables: LanceTables; objects: ObjectStore; hooks?: MergeHooks },
  shard: string,
  version: number | null,
  /**
   * The generation's rows at `version`, from its writer (lib/log/write/own-memory.ts, "merge copies"):
   * reading them back costs a file open per commit (~1.5-3 ms each here), most of a merge.
   */
  copy?: { data: unknown; rows: number },
  /**
   * The caller's record of this merge across tries: `rows` is set once the base commit (and its
   * fsync) succeeded, and a later try then only retires. Committing again after the generation
   * was retired could put back rows a purge removed since.
   */
  inBase?: { rows: number | null },
): Promise<number> {
  const { tables, hooks } = ctx;
  try {
    let rows = inBase?.rows ?? null;
    if (rows === null) {
      await hooks?.beforeMergeStep?.('read', shard);
      // Arrow in, Arrow out: turning the rows into JavaScript objects and back cost more than the
      // whole Lance merge (2.4 s of a 7 s one-writer bench run).
      // Read back, the table is LanceDB's (its CommonJS copy of apache-arrow): it encodes it.
      const readBack = async () => {
        const t = await (version === null ? await tables.shard(shard) : await tables.shardAt(shard, version)).query().toArrow();
        return { data: t, rows: t.numRows };
      };
      const { data, rows: count } = copy ?? (await readBack());
      await hooks?.beforeMergeStep?.('base-commit', shard);
      if (count > 0) {
        const base = await tables.ensureBase();
        await base.mergeInsert('event_id').whenNotMatchedInsertAll().execute(data as arrow.Table);
        // The base copy must survive power loss before the shard copy is deleted.
        await tables.sync('base');
      }
      rows = count;
      if (inBase && guard('merge-base-commit-once')) inBase.rows = rows;
    }
    await retireGeneration(ctx, shard, { version, rows });
    return rows;
  } catch (e) {
    // Lance reports storage trouble as plain errors; every step is idempotent, so: retry later.
    if (e instanceof DgclError) throw e;
    throw new UnavailableError(`merge of shard generation ${shard} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}

/** Steps 3-4 alone: also used to finish a merge that crashed after its marker was written. */
export async function retireGeneration(
  ctx: { tables: LanceTables; objects: ObjectStore; hooks?: MergeHooks },
  shard: string,
  info: { version: number | null; rows: number } | null,
): Promise<void> {
  const { tables, objects, hooks } = ctx;
  await hooks?.beforeMergeStep?.('retire-marker', shard);
  if (info && guard('retired-marker')) await objects.putIfAbsent(retiredKey(shard), JSON.stringify(info));
  await hooks?.beforeMergeStep?.('delete-data', shard);
  tables.forget(shard);
  await objects.deletePrefix(shardPrefix(shard));
  await hooks?.beforeMergeStep?.('delete-marker', shard);
  // In this order: while the retired marker stands, readers skip the generation, so a
  // listed generation without its dataset is always one being deleted right now.
  await objects.delete(genKey(shard));
  await objects.delete(retiredKey(shard));
}
