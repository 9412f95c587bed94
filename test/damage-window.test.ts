/**
 * A decoding-looking failure is damage (CORRUPT: not retryable, "restore the file from a copy")
 * only when it repeats for a while across the read's back-off and the probe that follows finds
 * the damaged file (lib/log/read/damage.ts). A failure that passes within a moment, or one the probe
 * does not find again, is retried like any other.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../lib/clock.ts';
import { DEFAULTS, openLog } from '../lib/index.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import { LanceCheckpointLog } from '../lib/log/log.ts';
import type { Table, TableWrapper } from '../lib/log/tables.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logUri, parseRoot } from '../lib/storage/location.ts';
import { createBatch } from './support/batches.ts';

let pristine: string;
beforeAll(async () => {
  pristine = mkdtempSync(path.join(tmpdir(), 'dgcl-dmg-window-'));
  const log = await openLog({ root: pristine, pipeline: 'p', experiment: 'e' });
  for (let i = 0; i < 3; i++) await log.append([createBatch(`i${i}`)]);
  await log.close();
  const m = await openLog({ root: pristine, pipeline: 'p', experiment: 'e' });
  expect((await m.maintain()).failures).toEqual([]);
  await m.close();
});

const damage = () => new Error('Failed to get next batch from stream: lance error: Encountered corrupt file miniblock_metadata: final chunk log_num_values=13 does not match');

/**
 * A reader whose base queries (`methods` of them: reads use toArrow, the probe's scan execute)
 * fail with a decoding error for `ms` from the first one, at most `maxFailures` times.
 */
function readerFailingFor(ms: number, maxFailures = Infinity, methods = ['toArrow', 'execute']): { log: LanceCheckpointLog; calls: () => number; scans: () => number } {
  let n = 0;
  let scans = 0;
  let until = 0;
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
              const execute = q.execute!.bind(q);
              q.execute = (...a: unknown[]) => {
                scans++;
                return execute(...a);
              };
              for (const m of methods) {
                const orig = q[m]!.bind(q);
                q[m] = async (...a: unknown[]) => {
                  n++;
                  if (until === 0) until = Date.now() + ms;
                  if (Date.now() < until && n <= maxFailures) throw damage();
                  return orig(...a);
                };
              }
              return q;
            };
          },
        });
  const uri = logUri(parseRoot(pristine), 'p', 'e');
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
  return { log, calls: () => n, scans: () => scans };
}

describe('a decoding failure that passes within a moment', () => {
  it('lasting 150 ms is retried (the read answers), not CORRUPT', async () => {
    const { log, calls } = readerFailingFor(150);
    const t0 = Date.now();
    const r = await log.allStates().then((s) => ({ ok: s.map((x) => x.itemId) }), (e: unknown) => ({ error: e as Error & { code?: string } }));
    const ms = Date.now() - t0;
    await log.close();
    expect('error' in r ? `${r.error.code} after ${ms} ms and ${calls()} queries: ${r.error.message.slice(0, 200)}` : r.ok).toEqual(['i0', 'i1', 'i2']);
  });

  it('that lasts, but the probe reads every dataset without it, is retried and ends UNAVAILABLE, not CORRUPT', async () => {
    const { log, calls } = readerFailingFor(60_000, Infinity, ['toArrow']);
    // A point read that queries the base (a toArrow; the probe's scan is an execute).
    const r = await log.fields('i0', { names: ['x'] }).then((s) => ({ ok: s.itemId }), (e: unknown) => ({ error: e as Error & { code?: string } }));
    await log.close();
    expect('error' in r ? r.error.code : r.ok).toBe('UNAVAILABLE');
    expect(calls(), 'more attempts than a read without a suspect makes').toBeGreaterThan(10);
  });

  it('that failed 3 queries and reads fine right after is not CORRUPT', async () => {
    const { log, calls } = readerFailingFor(60_000, 3);
    const r = await log.allStates().then((s) => ({ ok: s.map((x) => x.itemId) }), (e: unknown) => ({ error: e as Error & { code?: string } }));
    await log.close();
    expect(calls(), 'three failed attempts, then one that read').toBe(4);
    expect('error' in r ? `${r.error.code}: ${r.error.message.slice(0, 160)}` : r.ok).toEqual(['i0', 'i1', 'i2']);
  });

  it('met by an append (its item read) ends UNAVAILABLE without a probe: no scan of the log holds the writer', async () => {
    const { log, calls, scans } = readerFailingFor(60_000, Infinity, ['toArrow']);
    const r = await log.append([createBatch('i0', { create: 'ifMissing' })]).then(
      () => 'acked',
      (e: unknown) => (e as { code?: string }).code,
    );
    await log.close();
    expect(r).toBe('UNAVAILABLE');
    expect(calls(), 'the item read was retried past the usual attempts').toBeGreaterThan(10);
    expect(scans(), 'no probe scanned a dataset').toBe(0);
  });
});
