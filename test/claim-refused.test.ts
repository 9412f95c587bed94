/**
 * A claim PUT refused after its batch's commit was confirmed (S3 403, a read-only claims folder:
 * PermissionDeniedError) fails the append UNAVAILABLE, not PERMISSION_DENIED: the batch is
 * durable, and a retry is answered from the log (duplicate: true), so "a retry cannot help"
 * would be wrong.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../lib/clock.ts';
import type { CoordStore } from '../lib/coord/types.ts';
import { PermissionDeniedError } from '../lib/errors.ts';
import { DEFAULTS } from '../lib/index.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import { CLAIMS_DIR } from '../lib/log/layout.ts';
import { LanceCheckpointLog } from '../lib/log/log.ts';
import { LocalObjectStore } from '../lib/storage/local.ts';
import { logUri, parseRoot } from '../lib/storage/location.ts';
import { createBatch } from './support/batches.ts';

describe('a claim refused after a confirmed commit', () => {
  it('is UNAVAILABLE saying the batch is durable; the retry is answered from the log', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-claim-refused-'));
    const uri = logUri(parseRoot(root), 'p', 'e');
    let refuse = false;
    const wrapCoord = (c: CoordStore): CoordStore =>
      new Proxy(c, {
        get(t, prop, r) {
          const v = Reflect.get(t, prop, r) as unknown;
          if (prop === 'putIfAbsent') {
            return (k: string, ...a: unknown[]) =>
              refuse && k.startsWith(`${CLAIMS_DIR}/`) ? Promise.reject(new PermissionDeniedError(`S3 put ${k} was refused: AccessDenied`, k)) : (v as (...x: unknown[]) => Promise<boolean>).apply(t, [k, ...a]);
          }
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
        },
      });
    const log = new LanceCheckpointLog({
      ...DEFAULTS,
      pipeline: 'p',
      experiment: 'e',
      uri,
      objects: new LocalObjectStore(uri),
      storageOptions: undefined,
      leases: new LocalLeaseStore({ dir: path.join(root, '.dgcl', 'leases') }),
      owner: 'w',
      clock: systemClock,
      wrapCoord,
    });
    try {
      await log.append([createBatch('a')]);
      refuse = true;
      const batch = createBatch('b');
      const err = await log.append([batch]).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'UNAVAILABLE', retryable: true, message: expect.stringMatching(/^the batch is written \(durable\), but its claim was refused: .*AccessDenied.*; a retry is answered from the log/) });
      expect((await log.fold('b')).lastSeq, 'the batch is in the log').toBeGreaterThanOrEqual(1);
      expect(await log.append([batch])).toMatchObject([{ itemId: 'b', duplicate: true, firstSeq: 1 }]);
    } finally {
      await log.close();
    }
  });
});
