/**
 * Telling a damaged file from a passing outage. Reads retry what Lance throws (storage may be
 * briefly unavailable, and a layout may change under a read), so a garbled data file used to end
 * as `UNAVAILABLE ... did not settle after 10 attempts`, which says "retry". A read now takes an
 * error for damage only when all of these hold (docs/design/invariants.md, "Reads"):
 *  - its message is one of Lance's decoding failures (a corrupt page or metadata, a protobuf that
 *    does not decode, a file shorter than its own footer says, a decoder that panicked);
 *  - the layout held still during the attempt (the reader's check);
 *  - the same failure (digits aside) comes back on fresh handles, at least DAMAGE_REPEATS attempts
 *    in a row, over at least DAMAGE_MIN_MS (across the read's back-off): a store or a file being
 *    replaced can fail a few reads back to back in a moment, which a retry still helps;
 *  - then a probe of the datasets the read used, one by one, finds the damaged one: its latest
 *    manifest when it does not open, else its data files when a scan of its columns fails.
 * Anything else keeps being retried and surfaces as UNAVAILABLE, a probe that reads everything
 * without the error included (the failure passed, or is somewhere the probe does not look).
 */
import { CorruptError, DgclError, PermissionDeniedError } from '../../errors.ts';
import { LIGHT_COLUMNS } from '../../schema.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import { projection, type LanceTables, type Table } from '../tables.ts';
import { SHARDS_DIR } from '../layout.ts';

/** Attempts in a row with the same decoding failure before it may be taken for damage. */
export const DAMAGE_REPEATS = 3;
/** How long the same decoding failure must have lasted (first to last attempt) before the probe. */
export const DAMAGE_MIN_MS = 3000;

/**
 * How far a read probes for a damaged file: `scan` opens each dataset and scans its light
 * columns; `open` only opens it (its manifest), for a check that reads no more than that; `none`
 * never probes (the writer's reads, which would hold every append behind a scan of the log), so
 * a repeated decoding failure there ends UNAVAILABLE and a read names the file.
 */
export type DamageProbe = 'scan' | 'open' | 'none';

const DAMAGE_PATTERNS = [
  /corrupt file/i,
  /failed to decode protobuf/i,
  /file size is too small/i,
  /outside metadata region/i,
  /failed to fill whole buffer/i,
  /invalid (magic|variable-width)/i,
  /\bpanicked\b/i,
];

/** A key of the decoding failure `e` is (its message, digits aside), or null for anything else. */
export function damageKey(e: unknown): string | null {
  if (!(e instanceof Error) || e instanceof DgclError) return null;
  const msg = e.message;
  return DAMAGE_PATTERNS.some((p) => p.test(msg)) ? msg.replace(/\d+/g, '#') : null;
}

/**
 * The PermissionDeniedError of a Lance error that says the file system or the object store
 * refused an access (`Permission denied (os error 13)`, `AccessDenied`), naming the path it
 * gives; null for anything else. A retry cannot help those.
 */
export function permissionOf(e: unknown, fallbackPath: string): PermissionDeniedError | null {
  if (!(e instanceof Error) || e instanceof DgclError) return null;
  if (!/Permission denied \(os error 13\)|Operation not permitted \(os error 1\)|Read-only file system|AccessDenied/.test(e.message)) return null;
  const at = /at path "([^"]+)"/.exec(e.message)?.[1] ?? fallbackPath;
  const lance = e.message.replace(/, \/\S+\.rs:\d+:\d+/g, '').split(/\s+Caused by:/)[0]!.slice(0, 300);
  return new PermissionDeniedError(`access to ${at} was refused (${lance}); check the permissions of the folder or bucket`, at, { cause: e });
}

export interface DamageContext {
  tables: LanceTables;
  objects: ObjectStore;
}

/** One dataset a read used: the base, or a shard generation (its name and pinned version). */
export interface ReadDataset {
  name: string;
  open: () => Promise<Table>;
}

/**
 * The CorruptError of a read that failed with `e` on `reads` attempts over `spanMs`, naming the
 * damaged file found by probing `datasets` (lib/log/read/reader.ts `read` decides when), or null when
 * the probe found none: not damage that can be named, so the read goes on retrying.
 */
export async function damaged(c: DamageContext, datasets: readonly ReadDataset[], e: unknown, o: { depth: 'scan' | 'open'; reads: number; spanMs: number }): Promise<CorruptError | null> {
  const where = await locate(c, datasets, o.depth).catch(() => null);
  if (where === null) return null;
  // Lance's own words, without its source locations and repeated causes.
  const lance = (e instanceof Error ? e.message : String(e)).replace(/, \/\S+\.rs:\d+:\d+/g, '').split(/\s+Caused by:/)[0]!.split('\n')[0]!.slice(0, 400);
  return new CorruptError(
    `${where} is damaged: the same decoding error on ${o.reads} reads in a row over ${Math.round(o.spanMs)} ms, on fresh handles, with the log's layout unchanged, and again when the file was read alone (${lance}); a retry cannot help: restore the file from a copy`,
    { cause: e },
  );
}

async function locate(c: DamageContext, datasets: readonly ReadDataset[], depth: 'scan' | 'open'): Promise<string | null> {
  for (const d of datasets) {
    let t: Table;
    try {
      t = await d.open();
      await t.countRows();
    } catch (e) {
      if (damageKey(e) === null) continue;
      return `the latest manifest of ${describe(c, d.name)}${await latestManifest(c, d.name)}`;
    }
    if (depth === 'open') continue;
    try {
      // Every light column of every row, a batch at a time (held one at a time).
      const q = t.query().select(projection(LIGHT_COLUMNS)) as unknown as { execute(o: { maxBatchLength: number }): Promise<AsyncIterable<unknown>> };
      for await (const b of await q.execute({ maxBatchLength: 32768 })) void b;
    } catch (e) {
      if (damageKey(e) !== null) return `${await dataFiles(c, d.name)} of ${describe(c, d.name)}`;
    }
  }
  return null;
}

function dirOf(c: DamageContext, name: string): string {
  return name === 'base' ? c.objects.baseUri : `${c.objects.baseUri}/${SHARDS_DIR}/${name}.lance`;
}

function describe(c: DamageContext, name: string): string {
  return name === 'base' ? `the log's base table ${c.objects.baseUri}` : `shard generation ${name} (${dirOf(c, name)})`;
}

/** The dataset's data file when it has one, else where its data files are. */
async function dataFiles(c: DamageContext, name: string): Promise<string> {
  const prefix = name === 'base' ? 'data' : `${SHARDS_DIR}/${name}.lance/data`;
  const files = (await c.objects.list(prefix).catch(() => [] as string[])).filter((n) => n.endsWith('.lance'));
  return files.length === 1 ? `the data file ${dirOf(c, name)}/data/${files[0]}` : `a data file (in ${dirOf(c, name)}/data/)`;
}

/** `: <file>` naming the dataset's newest manifest, or '' when it cannot be listed. */
async function latestManifest(c: DamageContext, name: string): Promise<string> {
  const prefix = name === 'base' ? '_versions' : `${SHARDS_DIR}/${name}.lance/_versions`;
  const names = (await c.objects.list(prefix).catch(() => [] as string[])).filter((n) => n.endsWith('.manifest'));
  if (names.length === 0) return '';
  // Lance names manifests u64::MAX - version (20 digits, newest first) or by version (newest last).
  const v2 = names.filter((n) => /^\d{20}\.manifest$/.test(n)).sort();
  const newest = v2.length > 0 ? v2[0]! : names.sort((a, b) => parseInt(b, 10) - parseInt(a, 10))[0]!;
  return `: ${dirOf(c, name)}/_versions/${newest}`;
}
