/**
 * A log deleted and made again at the same place, merged by a long-lived maintainer: every file of
 * the new base is fsynced. noteLogId dropped every handle, but not LanceTables.syncs. A DatasetSync
 * remembers the paths it fsynced; a log made again at the same place has the same manifest
 * paths (_versions/<n>.manifest), so a process that synced the old base skips the new base's
 * manifests (and their folders) before it retires the merged generation.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';

const fsynced: string[] = [];
vi.mock('../lib/fsutil.ts', async (orig) => {
  const m = (await orig()) as typeof import('../lib/fsutil.ts');
  return { ...m, fsyncPath: async (p: string) => (fsynced.push(p), m.fsyncPath(p)) };
});

const { createBatch } = await import('./support/batches.ts');
const { raceFixture } = await import('./support/race-kit.ts');
const { setup } = raceFixture(60_000);

async function files(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) { if (e.name !== '_dgcl') out.push(...(await files(p))); } else out.push(p);
  }
  return out;
}

describe('a long-lived maintainer merges into a log made again at the same place', () => {
  it('every file of the new base is fsynced before the generation is retired', async () => {
    const { open } = setup();
    const M = open({}); // a long-lived maintainer process
    const W1 = open({ slot: 0, mergeEveryCommits: 1000 });
    await W1.log.append([createBatch('a')]);
    await W1.log.close();
    expect((await M.log.maintain()).failures).toEqual([]);
    const uri = M.log.uri;
    await fs.rm(uri, { recursive: true, force: true });
    const W2 = open({ slot: 1, mergeEveryCommits: 1000 });
    await W2.log.append([createBatch('x')]);
    await W2.log.close();
    fsynced.length = 0;
    expect((await M.log.maintain()).failures).toEqual([]);
    const newBase = await files(uri);
    const missed = newBase.filter((f) => !fsynced.includes(f));
    expect((await M.log.items()).items.map((i) => i.itemId)).toEqual(['x']);
    expect(missed, 'files of the new base M did not fsync').toEqual([]);
  });
});
