/**
 * review16: adversarial review of the review15 fixes (c65d964, 2443719).
 *
 * F2: maintain() now starts with `ctx.coord()`, which CREATES the log's choice record when
 *     there is none (create: true): a maintenance pass over an experiment that has no log (a
 *     typo in `dgcl maintain`, a handler call with an experiment name) makes one:
 *     `log.lance/_dgcl/coordination` (and, with a DynamoDB lease store, a sentinel item in the
 *     table that is never deleted). From then on the folder counts as a log: the scheduled
 *     maintenance lists it (functions/shared/experiments.ts) and maintains it on every run, and
 *     the first real writer inherits a choice the maintainer made with ITS configuration. (The
 *     claims step already called ctx.coord() before review15; moving the call to the top made it
 *     the pass's first write.) Expected: a maintainer only checks: with no record it needs none
 *     (no table record can exist before the record names the table, and old claims are objects),
 *     i.e. `ctx.coord({ create: false })` both at the start and in the claims step.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { listExperiments } from '../functions/shared/experiments.ts';
import { openLog } from '../lib/index.ts';
import { parseRoot } from '../lib/storage/location.ts';

const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

describe('review16', () => {
  it('F2: maintaining an experiment that has no log makes no log (it is refused: LOG_NOT_FOUND)', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-rev16-'));
    roots.push(root);
    const log = await openLog({ root, pipeline: 'p', experiment: 'typo' });
    try {
      await expect(log.maintain()).rejects.toMatchObject({ code: 'LOG_NOT_FOUND' });
    } finally {
      await log.close();
    }
    const experiments = await listExperiments(parseRoot(root), {});
    expect({ logFolder: existsSync(path.join(root, 'datagen_checkpoints', 'p', 'typo', 'log.lance')), experiments }).toEqual({ logFolder: false, experiments: [] });
  });
});
