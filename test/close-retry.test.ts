/**
 * A close() that failed (its seal PUT, or its slot lease's release, did not go through: close()
 * rejects UNAVAILABLE) can be retried: a second close() runs the writer's close again, seals its
 * epoch and releases its slot, so the next writer does not wait out a whole ttl.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../lib/clock.ts';
import { UnavailableError } from '../lib/errors.ts';
import { DEFAULTS } from '../lib/index.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import { slotKey } from '../lib/lease/slots.ts';
import { fileURLToPath } from 'node:url';
/** The folder of a log uri (a path or a file: URL). */
const logDirOf = (uri: string) => (uri.startsWith('file:') ? fileURLToPath(uri) : uri);
import { leaseLogIdAt } from './support/coord.ts';
import { LanceCheckpointLog } from '../lib/log/log.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logUri, parseRoot } from '../lib/storage/location.ts';
import type { ObjectStore } from '../lib/storage/objects.ts';
import { createBatch } from './support/batches.ts';

describe('close() after a failed close()', () => {
  it('retries the seal and releases the slot', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-closeretry-'));
    const uri = logUri(parseRoot(root), 'p', 'e');
    const inner = new LocalObjectStore(uri);
    let failSeals = false;
    const objects = new Proxy(inner, {
      get(t, prop, r) {
        const v = Reflect.get(t, prop, r) as unknown;
        if (prop === 'putIfAbsent') {
          return (key: string, ...a: unknown[]) => {
            if (failSeals && /^_dgcl\/meta\/(fence|seal)\./.test(key)) return Promise.reject(new UnavailableError(`put ${key} timed out`));
            return (v as (...x: unknown[]) => Promise<boolean>).apply(t, [key, ...a]);
          };
        }
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    }) as unknown as ObjectStore;
    const leases = new LocalLeaseStore({ dir: path.join(root, '.dgcl', 'leases') });
    const log = new LanceCheckpointLog({ ...DEFAULTS, pipeline: 'p', experiment: 'e', uri, objects, storageOptions: undefined, leases, owner: 'w', clock: systemClock, slots: 1 });
    await log.append([createBatch('a')]);
    failSeals = true;
    const first = await log.close().then(() => 'closed', (e: unknown) => `${(e as Error).name}`);
    failSeals = false;
    const second = await log.close().then(() => 'closed', (e: unknown) => `${(e as Error).name}`);
    const lease = await leases.read(slotKey('p', 'e', 0, leaseLogIdAt(logDirOf(uri))));
    expect({ first, second, slotOwner: lease?.owner }).toEqual({ first: 'UnavailableError', second: 'closed', slotOwner: '' });
  });

  it('retries the release of the slot lease', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-closeretry-'));
    const uri = logUri(parseRoot(root), 'p', 'e');
    const inner = new LocalLeaseStore({ dir: path.join(root, '.dgcl', 'leases') });
    let failRelease = false;
    const leases = new Proxy(inner, {
      get(t, prop, r) {
        const v = Reflect.get(t, prop, r) as unknown;
        if (prop === 'release') return (...a: unknown[]) => (failRelease ? Promise.reject(new UnavailableError('lease store timed out')) : (v as (...x: unknown[]) => Promise<void>).apply(t, a));
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    });
    const log = new LanceCheckpointLog({ ...DEFAULTS, pipeline: 'p', experiment: 'e', uri, objects: new LocalObjectStore(uri), storageOptions: undefined, leases, owner: 'w', clock: systemClock, slots: 1 });
    await log.append([createBatch('a')]);
    failRelease = true;
    const first = await log.close().then(() => 'closed', (e: unknown) => `${(e as Error).name}: ${(e as Error).message}`);
    expect((await inner.read(slotKey('p', 'e', 0, leaseLogIdAt(logDirOf(uri)))))?.owner, 'still held after the failed release').toBe('w');
    failRelease = false;
    const second = await log.close().then(() => 'closed', (e: unknown) => `${(e as Error).name}`);
    const lease = await inner.read(slotKey('p', 'e', 0, leaseLogIdAt(logDirOf(uri))));
    expect({ first, second, slotOwner: lease?.owner }).toEqual({
      first: expect.stringMatching(/^UnavailableError: releasing writer slot lease .* failed: lease store timed out; close\(\) again to retry/),
      second: 'closed',
      slotOwner: '',
    });
    await expect(log.fold('a'), 'the log stays closed to calls').rejects.toMatchObject({ code: 'INTERNAL' });
  });
});
