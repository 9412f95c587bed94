/**
 * A reader with read-only access (an S3 reader whose credentials may only GET/LIST gets 403 on a
 * PUT, which the S3 store maps to PermissionDeniedError) that meets a takeover between its fence
 * and its seal tries to finish the seal itself after a few attempts. Its PUT is refused; the read
 * must keep waiting for the taker's seal (the window passes by itself), not fail
 * PERMISSION_DENIED, which says a retry cannot help.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../lib/clock.ts';
import { PermissionDeniedError } from '../lib/errors.ts';
import { DEFAULTS, openLog } from '../lib/index.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import { fenceKey } from '../lib/log/layout.ts';
import { LanceCheckpointLog } from '../lib/log/log.ts';
import { writeSeal } from '../lib/log/write-seal.ts';
import { LanceTables } from '../lib/log/tables.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logUri, parseRoot } from '../lib/storage/location.ts';
import type { ObjectStore } from '../lib/storage/objects.ts';
import { createBatch } from './support/batches.ts';

/** The store as a reader with read-only credentials sees it (S3: 403 -> PermissionDeniedError). */
function readOnly(s: LocalObjectStore): ObjectStore {
  const refuse = (key: string) => Promise.reject(new PermissionDeniedError(`S3 put ${key} was refused: AccessDenied`, key));
  return new Proxy(s, {
    get(t, prop, r) {
      if (prop === 'put' || prop === 'putIfAbsent' || prop === 'delete' || prop === 'deletePrefix' || prop === 'deleteOlderThan') return (key: string) => refuse(key);
      const v = Reflect.get(t, prop, r) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  }) as unknown as ObjectStore;
}

/** A log whose live epoch a taker has fenced (and is reading versions of), and a read-only reader of it. */
async function fencedLog() {
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-rofence-'));
  const w = await openLog({ root, pipeline: 'p', experiment: 'e', mergeIdleMs: 3_600_000 });
  await w.append([createBatch('a')]);
  const epoch = w.writerEpoch!;
  const uri = logUri(parseRoot(root), 'p', 'e');
  const objects = new LocalObjectStore(uri);
  await objects.putIfAbsent(fenceKey(epoch), 'taker');
  const reader = new LanceCheckpointLog({
    ...DEFAULTS,
    pipeline: 'p',
    experiment: 'e',
    uri,
    objects: readOnly(objects),
    storageOptions: undefined,
    leases: new LocalLeaseStore({ dir: path.join(root, '.dgcl', 'leases') }),
    owner: 'read-only-reader',
    clock: systemClock,
  });
  const seal = () => writeSeal({ objects, tables: new LanceTables(uri, undefined, objects) }, epoch, 'taker', systemClock);
  const close = async () => {
    await reader.close();
    await w.close().catch(() => undefined);
  };
  return { reader, epoch, seal, close };
}

const outcome = (p: Promise<Array<{ itemId: string }>>) => p.then((s) => ({ ok: s.map((x) => x.itemId) }), (e: unknown) => ({ error: e as Error & { code?: string; retryable?: boolean } }));

describe('a read-only reader meeting a takeover between fence and seal', () => {
  it('answers once the taker seals (the fence-to-seal window is transient), never PERMISSION_DENIED', async () => {
    const { reader, seal, close } = await fencedLog();
    // The taker's seal lands 600 ms later (a slow takeover: S3 round trips, a loaded machine),
    // while the read still waits (its attempts back off for ~1.8 s in all).
    const sealed = new Promise<void>((resolve, reject) => setTimeout(() => seal().then(resolve, reject), 600));
    const r = await outcome(reader.allStates());
    await sealed;
    await close();
    expect('error' in r ? `${r.error.code}: ${r.error.message}` : r.ok).toEqual(['a']);
  });

  it('whose taker never seals ends UNAVAILABLE (retryable) saying why, not PERMISSION_DENIED', async () => {
    const { reader, epoch, close } = await fencedLog();
    const r = await outcome(reader.allStates());
    await close();
    expect('error' in r ? { code: r.error.code, retryable: r.error.retryable, message: r.error.message } : r.ok).toMatchObject({
      code: 'UNAVAILABLE',
      retryable: true,
      message: expect.stringContaining(`a takeover of writer epoch ${epoch} is between its fence and its seal, and this process may not write the seal`),
    });
  });
});
