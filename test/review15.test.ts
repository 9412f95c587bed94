/**
 * review15: adversarial review of the review14 fixes (HEAD f21a460, 0.2.0).
 *
 * F1 (rolling upgrade, I4): 0.2.0 writes claims without event ids (`events`: the count). The
 *     version before lib/coord (2d9ee09, the "old process" docs/operations.md "Upgrades and
 *     migrations" tells to run beside 0.2.0 with `coordination: 'objects'`) still reads claims as whole acks: when it loses a
 *     claim race to a 0.2.0 writer it answers `{duplicate: true, eventIds: undefined}`. Shown
 *     with the real old code (git archive of 2d9ee09 into a temp folder), not a stand-in: the
 *     review14 F1 test's `BeforeChoiceObjects` runs today's claim code, so it cannot see this.
 *
 * A barrier proves the overlap: each writer's beforeCommit waits until both have sequenced the
 * batch (neither saw the other's rows), the new writer commits and claims first, the old one
 * then commits its identical copy and meets the new claim.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import type { Ack } from '../lib/types.ts';
import { createBatch } from './support/batches.ts';

/** The last commit before lib/coord (ad2074d~1): markers and claims always objects. */
const OLD_COMMIT = '2d9ee09';
const repo = path.resolve(import.meta.dirname, '..');
let oldDir = '';
let roots: string[] = [];

type OldLog = { append(b: unknown[]): Promise<Ack[]>; close(): Promise<void> };
type OldOpen = (o: Record<string, unknown>) => Promise<OldLog>;
let openOld: OldOpen;

beforeAll(async () => {
  oldDir = mkdtempSync(path.join(tmpdir(), 'dgcl-rev15-old-'));
  const tar = execFileSync('git', ['-C', repo, 'archive', '--format=tar', OLD_COMMIT, 'lib'], { maxBuffer: 64 * 2 ** 20 });
  mkdirSync(oldDir, { recursive: true });
  execFileSync('tar', ['-x', '-C', oldDir], { input: tar });
  symlinkSync(path.join(repo, 'node_modules'), path.join(oldDir, 'node_modules'));
  symlinkSync(path.join(repo, 'package.json'), path.join(oldDir, 'package.json'));
  openOld = ((await import(pathToFileURL(path.join(oldDir, 'lib', 'index.ts')).href)) as { openLog: OldOpen }).openLog;
});
afterAll(() => {
  if (oldDir) rmSync(oldDir, { recursive: true, force: true });
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

/** A promise with its resolver. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open = () => {};
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

describe('review15', () => {
  it('F1: a pre-0.2.0 writer that loses a claim race to a 0.2.0 writer still names the events of its duplicate ack (I4)', async () => {
    const rootDir = mkdtempSync(path.join(tmpdir(), 'dgcl-rev15-'));
    roots.push(rootDir);
    const root = `file://${rootDir}`;
    const experiment = `e-${randomUUID().slice(0, 8)}`;
    const newPlanned = gate();
    const oldPlanned = gate();
    const newAcked = gate();
    // Both sequence the batch before either commits (barrier), the new writer claims first.
    const fresh = await openLog({
      root,
      pipeline: 'p',
      experiment,
      owner: 'new',
      slots: 2,
      slot: 0,
      coordination: 'objects',
      hooks: {
        beforeCommit: async () => {
          newPlanned.open();
          await oldPlanned.wait;
        },
      },
    });
    const old = await openOld({
      root,
      pipeline: 'p',
      experiment,
      owner: 'old',
      slots: 2,
      slot: 1,
      hooks: {
        beforeCommit: async () => {
          oldPlanned.open();
          await newPlanned.wait;
          await newAcked.wait;
        },
      },
    });
    try {
      const batch = createBatch('i1');
      const newAck = fresh.append([batch]).then((acks) => {
        newAcked.open();
        return acks;
      });
      const oldAck = old.append([batch]);
      const [[n], [o]] = await Promise.all([newAck, oldAck]);
      expect(n!.duplicate).toBe(false);
      expect(n!.eventIds).toHaveLength(3);
      // The old writer lost the claim: a duplicate of the new writer's ack, naming its events.
      expect(o!.duplicate).toBe(true);
      expect({ eventIds: o!.eventIds, firstSeq: o!.firstSeq, lastSeq: o!.lastSeq }).toEqual({ eventIds: n!.eventIds, firstSeq: n!.firstSeq, lastSeq: n!.lastSeq });
    } finally {
      await fresh.close();
      await old.close();
    }
  });
});
