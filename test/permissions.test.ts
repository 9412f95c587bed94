/**
 * A permission problem is PERMISSION_DENIED naming the path (CLI exit 77, EX_NOPERM), never a
 * retryable UNAVAILABLE, and nothing is written. Read-only folders are real: the CLI runs as
 * `nobody` when the tests run as root (root ignores permissions), else as the test's own user.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openLog } from '../lib/index.ts';
import { coordDbPath } from './support/coord.ts';
import { createBatch } from './support/batches.ts';
import { tree } from './support/tree.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const asOther = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};

/** The CLI as another user (see above), stdin one batch. */
function dgclAs(args: string[], stdin: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/dgcl.js', ...args], { cwd: REPO, env: { ...process.env, HOME: tmpdir() }, ...asOther });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += String(d)));
    child.stderr.on('data', (d) => (stderr += String(d)));
    child.stdin.end(stdin);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A root holding one written log, every folder readable by all and writable by none but root. */
async function readOnlyLog(): Promise<string> {
  const root = mkdtempSync(path.join(tmpdir(), 'dgcl-perm-'));
  const log = await openLog({ root, pipeline: 'p', experiment: 'e' });
  await log.append([createBatch('a')]);
  await log.close();
  chmodTree(root, 0o555, 0o444);
  return root;
}

function chmodTree(dir: string, dirMode: number, fileMode: number): void {
  for (const line of tree(dir)) {
    const p = path.join(dir, line.replace(/( \d+|\/)$/, ''));
    chmodSync(p, line.endsWith('/') ? dirMode : fileMode);
  }
  chmodSync(dir, dirMode);
}

const flags = (root: string) => ['--root', root, '--pipeline', 'p', '--experiment', 'e'];
const batch = `${JSON.stringify(createBatch('b'))}\n`;

describe('permissions', () => {
  it('an append to a read-only log: PERMISSION_DENIED naming the file, exit 77, nothing written; reads still work', async () => {
    const root = await readOnlyLog();
    const before = tree(root);
    const r = await dgclAs(['append', ...flags(root)], batch);
    expect(r.code, r.stderr).toBe(77);
    expect(r.stderr).toBe(
      `dgcl: PERMISSION_DENIED: coordination database ${coordDbPath(path.join(root, 'datagen_checkpoints/p/e/log.lance'))}: open failed: attempt to write a readonly database; check the permissions of the log's folder\n`,
    );
    expect(tree(root)).toEqual(before);
    const items = await dgclAs(['items', '--json', ...flags(root)], '');
    expect(items.code, items.stderr).toBe(0);
    expect(JSON.parse(items.stdout).itemId).toBe('a');
  });

  it("a read-only meta folder: the log's own objects are PERMISSION_DENIED naming the object", async () => {
    const root = await readOnlyLog();
    const dgcl = path.join(root, 'datagen_checkpoints/p/e/log.lance/_dgcl');
    chmodSync(root, 0o777);
    chmodTree(path.join(root, '.dgcl'), 0o777, 0o666);
    chmodSync(dgcl, 0o777);
    for (const f of tree(dgcl).filter((l) => l.startsWith('coord.'))) chmodSync(path.join(dgcl, f.split(' ')[0]!), 0o666);
    const r = await dgclAs(['append', ...flags(root)], batch);
    expect(r.code, r.stderr).toBe(77);
    expect(r.stderr).toMatch(new RegExp(`^dgcl: PERMISSION_DENIED: local store put ${path.join(dgcl, 'meta')}/\\S+ was refused \\(EACCES\\)`));
  });

  it("a read of a log whose data files may not be read: PERMISSION_DENIED at once, not UNAVAILABLE after retries; exit 77", async () => {
    const root = await readOnlyLog();
    const logDir = path.join(root, 'datagen_checkpoints/p/e/log.lance');
    chmodSync(path.join(logDir, 'data'), 0o700);
    chmodSync(path.join(logDir, '_dgcl'), 0o755);
    const out = path.join(mkdtempSync(path.join(tmpdir(), 'dgcl-perm-out-')), 'x.jsonl');
    chmodSync(path.dirname(out), 0o777);
    const r = await dgclAs(['export', '--out', out, '--status', 'any', ...flags(root)], '');
    expect(r.code, r.stderr).toBe(77);
    expect(r.stderr).toMatch(/^dgcl: PERMISSION_DENIED: access to .* was refused \(.*Permission denied \(os error 13\)\); check the permissions/);
  });

  it('a read-only lease folder: PERMISSION_DENIED naming the lease file', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'dgcl-perm-leases-'));
    chmodSync(root, 0o777);
    mkdirSync(path.join(root, '.dgcl', 'leases'), { recursive: true });
    chmodTree(path.join(root, '.dgcl'), 0o555, 0o444);
    const r = await dgclAs(['append', ...flags(root)], batch);
    expect(r.code, r.stderr).toBe(77);
    expect(r.stderr).toMatch(new RegExp(`^dgcl: PERMISSION_DENIED: cannot create mutex ${path.join(root, '.dgcl', 'leases')}/[0-9a-f]{64}\\.lock: EACCES`));
    expect(r.stderr).toMatch(/check the permissions of the lease folder\n$/);
  });
});
