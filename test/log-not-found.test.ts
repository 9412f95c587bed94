/**
 * A read or maintenance of a log that does not exist fails with LOG_NOT_FOUND naming the log and
 * what exists near it, and creates nothing; writing a new log stays one append. Real logs in temp
 * folders, the CLI as real processes.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { listExperiments } from '../functions/shared/experiments.ts';
import { LogNotFoundError, NotFoundError } from '../lib/errors.ts';
import { exportItems, openLog, report } from '../lib/index.ts';
import type { CheckpointLog } from '../lib/api.ts';
import { parseRoot } from '../lib/storage/location.ts';
import { createBatch } from './support/batches.ts';
import { dgcl } from './support/proc.ts';
import { tree } from './support/tree.ts';
import { readsOf } from '../lib/log/reads.ts';

const root = mkdtempSync(path.join(tmpdir(), 'dgcl-nolog-'));

beforeAll(async () => {
  for (const experiment of ['exp-a', 'exp-b']) {
    const log = await openLog({ root, pipeline: 'qa', experiment });
    await log.append([createBatch('doc-1', { terminal: 'completed' })]);
    await log.close();
  }
});

/** Every read of the library, and maintenance, on `log`. */
function calls(log: CheckpointLog): Array<[string, () => Promise<unknown>]> {
  const out = path.join(root, 'out');
  return [
    ['items', () => log.items()],
    ['failures', () => log.failures()],
    ['fold', () => log.fold('doc-1')],
    ['trajectory', () => log.trajectory('doc-1')],
    ['fields', () => log.fields('doc-1')],
    ['latestEvents', () => log.latestEvents('doc-1', { limit: 5 })],
    ['blob', () => log.blob('doc-1', 'image')],
    ['allStates', () => log.allStates()],
    ['aggregates', () => readsOf(log).aggregates()],
    ['stats', () => log.stats()],
    ['report', () => report(log, { out: `${out}.html` })],
    ['exportItems', () => exportItems(log, { out: `${out}.jsonl`, blobs: `${out}-blobs` })],
    ['maintain', () => log.maintain()],
  ];
}

async function expectAllRefused(o: { root: string; pipeline: string; experiment: string }, message: RegExp, watched: string): Promise<void> {
  const before = existsSync(watched) ? tree(watched) : null;
  const log = await openLog(o);
  try {
    for (const [name, call] of calls(log)) {
      const err = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err, name).toBeInstanceOf(LogNotFoundError);
      // Code that takes "not found" for "nothing yet" (durable steps, LangGraph) keeps working.
      expect(err, name).toBeInstanceOf(NotFoundError);
      expect(err, name).toMatchObject({ code: 'LOG_NOT_FOUND', retryable: false, uri: log.uri });
      expect((err as Error).message, name).toMatch(message);
    }
  } finally {
    await log.close();
  }
  expect(existsSync(watched) ? tree(watched) : null, 'nothing was created').toEqual(before);
}

describe('a log that does not exist', () => {
  it('a misspelt experiment: every read, report, export and maintain fail naming the experiments of the pipeline', async () => {
    await expectAllRefused(
      { root, pipeline: 'qa', experiment: 'exp-c' },
      new RegExp(`^no log at ${path.join(root, 'datagen_checkpoints/qa/exp-c/log.lance')}; experiments of pipeline "qa": exp-a, exp-b$`),
      root,
    );
  });

  it('a misspelt pipeline: the pipelines of the root are named', async () => {
    await expectAllRefused({ root, pipeline: 'qq', experiment: 'exp-a' }, /; pipeline "qq" has no log; pipelines under file:\/\/.*: qa$/, root);
  });

  it('a root that does not exist is named as such and is not created', async () => {
    const missing = path.join(root, 'no-such-root');
    await expectAllRefused({ root: missing, pipeline: 'qa', experiment: 'exp-a' }, new RegExp(`: the root folder ${missing} does not exist$`), root);
    expect(existsSync(missing)).toBe(false);
  });

  it('a root that is a plain file is named as such', async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'dgcl-nolog-file-')), 'plain');
    writeFileSync(file, 'not a folder');
    await expectAllRefused({ root: file, pipeline: 'qa', experiment: 'exp-a' }, new RegExp(`: the root ${file} is a file, not a folder$`), path.dirname(file));
  });

  it('a root with no pipeline at all says so', async () => {
    const empty = mkdtempSync(path.join(tmpdir(), 'dgcl-nolog-empty-'));
    await expectAllRefused({ root: empty, pipeline: 'qa', experiment: 'exp-a' }, /; no pipeline has a log under the root file:\/\//, empty);
  });

  it('a log folder with nothing in its meta folder yet (a first write that did not get far): maintain reports it empty and creates nothing', async () => {
    const half = mkdtempSync(path.join(tmpdir(), 'dgcl-nolog-half-'));
    const w = await openLog({ root: half, pipeline: 'p', experiment: 'e', hooks: { beforeCommit: () => Promise.reject(new Error('killed')) } });
    await w.append([createBatch('a')]).catch(() => undefined);
    const logDir = path.join(half, 'datagen_checkpoints', 'p', 'e', 'log.lance');
    expect(existsSync(logDir)).toBe(true);
    const before = tree(logDir);
    const m = await openLog({ root: half, pipeline: 'p', experiment: 'e' });
    expect(await m.maintain()).toMatchObject({ experiment: 'p/e', ran: false, empty: true, mergedShards: [], failures: [] });
    await m.close();
    expect(tree(logDir), 'nothing was created').toEqual(before);
    // Beside it, a misspelt experiment is still LOG_NOT_FOUND.
    const typo = await openLog({ root: half, pipeline: 'p', experiment: 'ee' });
    await expect(typo.maintain()).rejects.toMatchObject({ code: 'LOG_NOT_FOUND', message: expect.stringMatching(/experiments of pipeline "p": e$/) });
    await typo.close();
  });

  it('writing a new log is still one append, and durable steps start a new item of a new log', async () => {
    const fresh = mkdtempSync(path.join(tmpdir(), 'dgcl-nolog-new-'));
    const log = await openLog({ root: fresh, pipeline: 'p', experiment: 'new' });
    const [ack] = await log.append([createBatch('a', {})]);
    expect(ack).toMatchObject({ itemId: 'a', firstSeq: 1, duplicate: false });
    const other = await openLog({ root: fresh, pipeline: 'p', experiment: 'steps' });
    const item = await other.item('s-1', { runId: 'r' });
    const out = await item.step('gen', 0, () => ({ set: { answer: 42 } }));
    expect(out).toMatchObject({ replayed: false, set: { answer: 42 } });
    expect((await other.fold('s-1')).fields).toEqual({ answer: 42 });
    await log.close();
    await other.close();
  });

  it('the CLI exits 66 (EX_NOINPUT) naming the log; report, export and maintain write no file', async () => {
    const before = tree(root);
    const out = path.join(root, 'cli-out');
    const flags = ['--root', root, '--pipeline', 'qa', '--experiment', 'exp-typo'];
    const commands = [
      ['items'],
      ['failures'],
      ['stats'],
      ['fold', '--item', 'doc-1'],
      ['trajectory', '--item', 'doc-1'],
      ['report', '--out', `${out}.html`],
      ['export', '--out', `${out}.jsonl`],
      ['maintain'],
    ];
    for (const c of commands) {
      const r = await dgcl([...c, ...flags]);
      expect(r.code, `${c[0]}: ${r.stderr}`).toBe(66);
      expect(r.stdout, c[0]).toBe('');
      expect(r.stderr, c[0]).toBe(`dgcl: LOG_NOT_FOUND: no log at ${path.join(root, 'datagen_checkpoints/qa/exp-typo/log.lance')}; experiments of pipeline "qa": exp-a, exp-b\n`);
    }
    expect(tree(root)).toEqual(before);
  });

  // maintain() resolves the log's coordination store first; with create: true that made the
  // choice record (`log.lance/_dgcl/coordination`, and with a DynamoDB lease store a sentinel item
  // in the table that is never deleted) for an experiment with no log (a typo in `dgcl maintain`,
  // a handler call with an experiment name). From then on the folder counted as a log: the
  // scheduled maintenance listed it (functions/shared/experiments.ts) and maintained it on every
  // run, and the first real writer inherited a choice the maintainer made with ITS configuration.
  // A maintainer only checks: with no record it needs none (no table record can exist before the
  // record names the table, and old claims are objects), both at the start and in the claims step.
  it('maintaining an experiment that has no log makes no log: no coordination record, not listed by the scheduled maintenance', async () => {
    const fresh = mkdtempSync(path.join(tmpdir(), 'dgcl-nolog-maintain-'));
    try {
      const log = await openLog({ root: fresh, pipeline: 'p', experiment: 'typo' });
      try {
        await expect(log.maintain()).rejects.toMatchObject({ code: 'LOG_NOT_FOUND' });
      } finally {
        await log.close();
      }
      const experiments = await listExperiments(parseRoot(fresh), {});
      expect({ logFolder: existsSync(path.join(fresh, 'datagen_checkpoints', 'p', 'typo', 'log.lance')), experiments }).toEqual({ logFolder: false, experiments: [] });
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });
});
