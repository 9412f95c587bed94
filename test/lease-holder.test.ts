/**
 * When a local lease's holder counts as gone (lib/lease/holder.ts): only with the same host and
 * pid namespace as this process, and its pid dead or naming a process started at another time.
 * Anything not known (no namespace recorded, another namespace or host, no /proc) waits for the
 * lease's expiry. The cross-namespace case with real namespaces: test/pid-namespace.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HOLDER, holderGone, holderOf, type Holder } from '../lib/lease/holder.ts';

const proc = existsSync('/proc/self/ns/pid');

/** Field 22 of /proc/<pid>/stat. */
const startOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
};

/** A pid no process has: one of a child that has exited (and was reaped). */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

describe.skipIf(!proc)('a local lease holder is gone', () => {
  const here = (h: Partial<Holder> & { pid: number }): Holder => ({ host: HOLDER.host, ...(HOLDER.pidNs !== undefined ? { pidNs: HOLDER.pidNs } : {}), ...h });

  it('records this process with its pid namespace and start time', () => {
    expect(HOLDER).toEqual({ pid: process.pid, host: expect.any(String), pidNs: expect.any(Number), start: startOf(process.pid) });
  });

  it('when its pid is dead in this namespace, or names a process started at another time', () => {
    expect(holderGone(here({ pid: deadPid() }))).toBe(true);
    const parent = process.ppid;
    expect(holderGone(here({ pid: parent, start: startOf(parent) })), 'the live parent').toBe(false);
    expect(holderGone(here({ pid: parent, start: startOf(parent) + 1 })), 'its pid reused by another process').toBe(true);
    expect(holderGone(here({ pid: process.pid, start: HOLDER.start! })), 'this process').toBe(false);
  });

  it('never when what decides it is not known: another namespace or host, or no namespace recorded', () => {
    const pid = deadPid();
    expect(holderGone(here({ pid, pidNs: HOLDER.pidNs! + 1 }))).toBe(false);
    expect(holderGone(here({ pid, host: `${HOLDER.host}-other` }))).toBe(false);
    expect(holderGone({ pid, host: HOLDER.host })).toBe(false);
  });

  it('reads what records and mutex bodies hold (none: judged by expiry)', () => {
    expect(holderOf({ pid: 7, host: 'h', pidNs: 9, start: 11, token: 't' })).toEqual({ pid: 7, host: 'h', pidNs: 9, start: 11 });
    expect(holderOf({ pid: 7, host: 'h' })).toEqual({ pid: 7, host: 'h' });
    expect(holderOf({ owner: 'w' })).toBeNull();
  });
});
