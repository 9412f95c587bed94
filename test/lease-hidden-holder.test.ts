/**
 * A live lease holder owned by another user stays live where /proc hides other users' processes
 * (`mount -o hidepid=2`, common on hardened hosts): kill(pid, 0) answers EPERM (it exists) and
 * /proc/<pid>/stat ENOENT (hidden, not gone), which says nothing; judged gone, its slot would be
 * taken at once and its next ack FENCED.
 *
 * Real setup: a child in its own mount namespace remounts /proc with hidepid=2 and judges this
 * (root, live) test process as user nobody. Needs root (unshare, mount); skipped otherwise.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { HOLDER } from '../lib/lease/holder.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const canRun = process.getuid?.() === 0 && existsSync('/proc/self/ns/pid') && existsSync('/usr/bin/setpriv');

describe.skipIf(!canRun)('a live lease holder of another user hidden by hidepid', () => {
  it('is not judged gone (it is alive: kill says EPERM)', () => {
    expect(HOLDER.start).toEqual(expect.any(Number));
    const judge = `
      import { holderGone } from './lib/lease/holder.ts';
      const h = JSON.parse(process.env.HOLDER_UNDER_TEST);
      let alive; try { process.kill(h.pid, 0); alive = 'yes'; } catch (e) { alive = e.code; }
      console.log(JSON.stringify({ alive, gone: holderGone(h) }));
    `;
    const inner = `mount -t proc -o hidepid=2 proc /proc && exec setpriv --reuid=65534 --regid=65534 --clear-groups ${JSON.stringify(process.execPath)} --import tsx --input-type=module -e ${shq(judge)}`;
    const r = spawnSync('unshare', ['-m', 'sh', '-c', inner], { cwd: REPO, env: { ...process.env, HOLDER_UNDER_TEST: JSON.stringify(HOLDER) }, encoding: 'utf8' });
    const line = r.stdout.trim().split('\n').at(-1) ?? '';
    expect(line, r.stderr).not.toBe('');
    // kill(2) says the process exists (EPERM: another user's), so it must not be gone.
    expect(JSON.parse(line)).toEqual({ alive: 'EPERM', gone: false });
  });
});

function shq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
