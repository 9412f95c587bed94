/**
 * Making a Lance commit on a local folder survive power loss. Lance's local object store writes
 * files without fsync (notes/lancedb-0.39-facts.md), so an acknowledged commit could vanish with
 * the page cache. After a commit, `sync()` fsyncs every file of the dataset it has not synced
 * before (the commit's data file, manifest, transaction file, deletion and index files), then
 * the folders that gained entries, so the new names are durable too. Files never change once
 * written (Lance's files are immutable), so a file synced once stays synced: each commit costs
 * the fsyncs of what it wrote plus one readdir per folder.
 *
 * One instance per dataset folder, shared by everything in the process that commits to it.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { errCode, fsyncPath } from '../fsutil.ts';

export class DatasetSync {
  private readonly synced = new Set<string>();
  /** One sync at a time; a caller arriving meanwhile waits for the next round (it may cover its commit). */
  private running: Promise<void> | null = null;
  private again: Promise<void> | null = null;

  private parentSynced = false;

  /** `skip`: names directly below `dir` that are not the dataset's (the log's own `_dgcl` folder). */
  constructor(
    readonly dir: string,
    private readonly skip: ReadonlySet<string> = new Set(),
  ) {}

  /** Fsync what was written to the dataset since the last sync (and the folders naming it). */
  sync(): Promise<void> {
    if (!this.running) {
      this.running = this.round().finally(() => (this.running = null));
      return this.running;
    }
    // A round in progress may have listed the folders before our commit's files existed.
    this.again ??= this.running.catch(() => undefined).then(() => {
      this.again = null;
      return this.sync();
    });
    return this.again;
  }

  private async round(): Promise<void> {
    const dirs: string[] = [];
    const files: string[] = [];
    await this.walk(this.dir, dirs, files, true);
    // The dataset's own name, the first time (a new shard generation's folder), and its
    // parent's: the local store prunes emptied folders, so `_dgcl/shards` itself may be new.
    if (!this.parentSynced) dirs.push(path.dirname(this.dir), path.dirname(path.dirname(this.dir)));
    await Promise.all(files.map((f) => fsyncPath(f)));
    // Folders after their files: a name becomes durable with its folder.
    await Promise.all(dirs.map((d) => fsyncPath(d)));
    for (const f of files) this.synced.add(f);
    this.parentSynced = true;
  }

  /** New files below `dir`, and every folder holding one (or a new folder). */
  private async walk(dir: string, dirs: string[], files: string[], top = false): Promise<boolean> {
    let entries;
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch (e) {
      if (errCode(e) === 'ENOENT') return false;
      throw e;
    }
    let changed = false;
    for (const e of entries) {
      if (top && this.skip.has(e.name)) continue;
      const p = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (await this.walk(p, dirs, files)) changed = true;
      } else if (!this.synced.has(p)) {
        files.push(p);
        changed = true;
      }
    }
    if (changed) dirs.push(dir);
    return changed;
  }
}
