/**
 * Damaged files are CORRUPT (not retryable) naming the file, never a passing outage; only a
 * decoding failure that repeats on fresh handles with the layout unchanged counts as damage; an
 * append to a log whose base cannot be read is refused before anything is written; `dgcl
 * maintain` exits non-zero when a step failed. Real Lance datasets in temp folders.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../lib/clock.ts';
import { CorruptError, UnavailableError } from '../lib/errors.ts';
import { DEFAULTS, openLog } from '../lib/index.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import { DAMAGE_MIN_MS, DAMAGE_REPEATS, damageKey } from '../lib/log/read/damage.ts';
import { LanceCheckpointLog } from '../lib/log/log.ts';
import type { Table, TableWrapper } from '../lib/log/tables.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logUri, parseRoot } from '../lib/storage/location.ts';
import { createBatch } from './support/batches.ts';
import { dgcl } from './support/proc.ts';
import { tree } from './support/tree.ts';

/** A merged, maintained log of five items: its base has one data file. */
let pristine: string;
const logDir = (root: string) => path.join(root, 'datagen_checkpoints', 'p', 'e', 'log.lance');

beforeAll(async () => {
  pristine = mkdtempSync(path.join(tmpdir(), 'dgcl-corrupt-src-'));
  const log = await openLog({ root: pristine, pipeline: 'p', experiment: 'e' });
  for (let i = 0; i < 5; i++) await log.append([createBatch(`i${i}`, { set: { text: 'x'.repeat(100), n: i } })]);
  await log.close();
  const m = await openLog({ root: pristine, pipeline: 'p', experiment: 'e' });
  expect((await m.maintain()).failures).toEqual([]);
  await m.close();
});

/** A copy of the pristine log with `damage` applied to it; returns the root and the damaged file. */
async function damagedCopy(damage: (dir: string) => string): Promise<{ root: string; file: string }> {
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-corrupt-'));
  cpSync(pristine, root, { recursive: true });
  // A log of its own where it lies (a copy is written or maintained only once adopted).
  const own = await openLog({ root, pipeline: 'p', experiment: 'e' });
  await own.adopt();
  await own.close();
  return { root, file: damage(logDir(root)) };
}

/** Every byte of the base's data file but its footer garbled. */
const garbleData = (dir: string) => {
  const files = readdirSync(path.join(dir, 'data'));
  expect(files).toHaveLength(1);
  const f = path.join(dir, 'data', files[0]!);
  const b = readFileSync(f);
  for (let i = 0; i < b.length - 64; i++) b[i]! ^= 0x5a;
  writeFileSync(f, b);
  return f;
};

/** The base's newest manifest cut to half its length (manifests are named u64::MAX - version). */
const truncateManifest = (dir: string) => {
  const newest = readdirSync(path.join(dir, '_versions')).filter((n) => n.endsWith('.manifest')).sort()[0]!;
  const f = path.join(dir, '_versions', newest);
  const b = readFileSync(f);
  writeFileSync(f, b.subarray(0, b.length >> 1));
  return f;
};

describe('damaged files', () => {
  it('a garbled data file: reads fail with CORRUPT naming the file, not UNAVAILABLE; the CLI exits 65', async () => {
    const { root, file } = await damagedCopy(garbleData);
    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    const err = await log.allStates().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CorruptError);
    expect(err).toMatchObject({ code: 'CORRUPT', retryable: false });
    expect((err as Error).message).toContain(`the data file file://${file} of the log's base table`);
    expect((err as Error).message).toMatch(/a retry cannot help/);
    await log.close();
    const r = await dgcl(['export', '--out', path.join(root, 'out.jsonl'), '--root', root, '--pipeline', 'p', '--experiment', 'e']);
    expect(r.code, r.stderr).toBe(65);
    expect(r.stderr).toContain(`dgcl: CORRUPT: the data file file://${file}`);
  });

  it('a truncated manifest: fold and stats fail with CORRUPT naming the manifest file', async () => {
    const { root, file } = await damagedCopy(truncateManifest);
    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    for (const read of [() => log.fold('i1'), () => log.stats()]) {
      const err = await read().catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'CORRUPT', message: expect.stringContaining(`the latest manifest of the log's base table file://${logDir(root)}: file://${file} is damaged`) });
    }
    await log.close();
  });

  it('an append to a log whose base cannot be read is refused with CORRUPT before anything is written', async () => {
    const { root } = await damagedCopy(truncateManifest);
    const before = tree(root);
    const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
    await expect(log.append([createBatch('new-item')])).rejects.toMatchObject({ code: 'CORRUPT' });
    await log.close();
    expect(tree(root), 'no lease, no shard, no marker').toEqual(before);
  });

  it('dgcl maintain prints its report and exits non-zero when a step failed', async () => {
    const { root } = await damagedCopy(garbleData);
    // A live writer's generation for maintenance to merge into the damaged base.
    const w = await openLog({ root, pipeline: 'p', experiment: 'e', mergeIdleMs: 0 });
    await w.append([createBatch('late')]).catch(() => undefined);
    await w.close();
    const r = await dgcl(['maintain', '--json', '--root', root, '--pipeline', 'p', '--experiment', 'e']);
    const report = JSON.parse(r.stdout);
    expect(report.ran).toBe(true);
    expect(report.failures.length, r.stdout).toBeGreaterThanOrEqual(1);
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBe(2);
    expect(r.stderr).toMatch(/^dgcl: maintain: \d+ steps? failed \(.*\); the next run retries them\n$/);
  });
});

describe('only a decoding failure that repeats with the layout unchanged is damage', () => {
  const damage = new Error('Failed to get next batch from stream: lance error: Encountered corrupt file miniblock_metadata: final chunk log_num_values=13 does not match');

  /** A reader of the pristine log whose base queries throw `fail(n)` (n from 1) when it returns an error. */
  function readerWith(fail: (n: number) => Error | null): { log: LanceCheckpointLog; calls: () => number } {
    let n = 0;
    const wrap: TableWrapper = (t: Table, name: string) =>
      name !== 'base'
        ? t
        : new Proxy(t, {
            get(target, prop, receiver) {
              const v = Reflect.get(target, prop, receiver) as unknown;
              if (typeof v !== 'function') return v;
              if (prop !== 'query') return (v as (...a: unknown[]) => unknown).bind(target);
              return () => {
                const q = (v as () => Record<string, (...a: unknown[]) => unknown>).apply(target, []);
                for (const m of ['toArrow', 'execute']) {
                  const orig = q[m]!.bind(q);
                  q[m] = async (...a: unknown[]) => {
                    const e = fail(++n);
                    if (e) throw e;
                    return orig(...a);
                  };
                }
                return q;
              };
            },
          });
    const root = parseRoot(pristine);
    const uri = logUri(root, 'p', 'e');
    const log = new LanceCheckpointLog({
      ...DEFAULTS,
      pipeline: 'p',
      experiment: 'e',
      uri,
      objects: new LocalObjectStore(uri),
      storageOptions: undefined,
      leases: new LocalLeaseStore({ dir: path.join(pristine, '.dgcl', 'leases') }),
      owner: 'tapped-reader',
      clock: systemClock,
      wrapTable: wrap,
    });
    return { log, calls: () => n };
  }

  it('classifies Lance decoding messages only (digits aside), never our own errors or I/O failures', () => {
    expect(damageKey(damage)).not.toBeNull();
    expect(damageKey(new Error('task 41 panicked with message "x"'))).toBe(damageKey(new Error('task 7 panicked with message "x"')));
    expect(damageKey(new Error('LanceError(IO): failed to decode Protobuf message: invalid wire type value: 6'))).not.toBeNull();
    expect(damageKey(new Error('LanceError(IO): Generic S3 error: connection reset by peer'))).toBeNull();
    expect(damageKey(new Error('Not found: /x/data/a.lance'))).toBeNull();
    expect(damageKey(new CorruptError('Encountered corrupt file'))).toBeNull();
  });

  it('a decoding failure that passes is retried: the read answers', async () => {
    const { log, calls } = readerWith((n) => (n <= 2 ? damage : null));
    expect((await log.allStates()).map((s) => s.itemId)).toEqual(['i0', 'i1', 'i2', 'i3', 'i4']);
    expect(calls()).toBe(3);
    await log.close();
  });

  it('one that keeps coming back for DAMAGE_MIN_MS is CORRUPT once the probe finds it; an I/O failure that keeps coming back stays UNAVAILABLE', async () => {
    const bad = readerWith(() => damage);
    const t0 = Date.now();
    const err = await bad.log.allStates().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CorruptError);
    expect((err as Error).message).toMatch(/the data files? .* of the log's base table .* is damaged: the same decoding error on \d+ reads in a row over \d+ ms/);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(DAMAGE_MIN_MS);
    // At least DAMAGE_REPEATS attempts, then the probe's scan that names the damaged dataset.
    expect(bad.calls()).toBeGreaterThanOrEqual(DAMAGE_REPEATS + 1);
    await bad.log.close();

    const down = readerWith(() => new Error('LanceError(IO): Generic S3 error: connection reset by peer'));
    const err2 = await down.log.allStates().catch((e: unknown) => e);
    expect(err2).toBeInstanceOf(UnavailableError);
    expect((err2 as Error).message).toMatch(/did not settle after 10 attempts/);
    await down.log.close();
  });
});
