/**
 * Which process holds a local lease or mutex, and whether it is gone (lib/lease/local.ts). A
 * holder is recorded by its pid and host name and, where /proc can be read (Linux), by its pid
 * namespace (the inode of /proc/self/ns/pid) and its start time (field 22 of /proc/<pid>/stat,
 * clock ticks since boot). A pid means the same process only within one pid namespace and only
 * while it lives (pids are reused): two containers with one host name sharing a lease folder
 * see different processes under one pid, and a restarted container gives a dead writer's pid to
 * another process.
 *
 * So a holder is judged gone only when all of this is known: same host, same pid namespace as
 * this process, and its pid does not exist here or names a process started at another time.
 * Without /proc (macOS, Windows), or for a record without a namespace (written before it was
 * recorded, or by a process that could not read /proc), and for another user's process that
 * /proc hides (`hidepid`), nobody is judged gone: the lease frees by its expiry, as every lease
 * did before (docs/design/leases.md, "Dead holders").
 */
import { readFileSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { errCode } from '../fsutil.ts';

/** A process as recorded beside a lease or in a mutex file. */
export interface Holder {
  pid: number;
  host: string;
  /** Inode of its pid namespace; absent where /proc could not be read. */
  pidNs?: number;
  /** Its start time (clock ticks since boot, /proc/<pid>/stat field 22); absent where unreadable. */
  start?: number;
}

/** The inode of this process's pid namespace, or undefined without a readable /proc. */
function ownPidNamespace(): number | undefined {
  try {
    return statSync('/proc/self/ns/pid').ino;
  } catch {
    return undefined;
  }
}

/**
 * The start time of `pid` (as seen from this process's pid namespace), or undefined when it
 * cannot be read; null when the process does not exist.
 */
function startTime(pid: number | 'self'): number | null | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (e) {
    // Asked only where /proc is readable (HOLDER.pidNs is known): a missing entry is no process.
    return errCode(e) === 'ENOENT' ? null : undefined;
  }
  // Field 2 (the command) is in parentheses and may hold spaces and parentheses: fields 3 on
  // follow the last ')'. Field 22 is the 20th of those.
  const start = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  return Number.isSafeInteger(start) ? start : undefined;
}

function self(): Holder {
  const h: Holder = { pid: process.pid, host: hostname() };
  const pidNs = ownPidNamespace();
  const start = startTime('self');
  if (pidNs !== undefined) h.pidNs = pidNs;
  if (typeof start === 'number') h.start = start;
  return h;
}

/** This process, as it records itself. */
export const HOLDER: Readonly<Holder> = Object.freeze(self());

/** The holder fields of a parsed record or mutex body, or null when it names none. */
export function holderOf(r: Record<string, unknown>): Holder | null {
  if (!Number.isSafeInteger(r.pid) || typeof r.host !== 'string') return null;
  const h: Holder = { pid: r.pid as number, host: r.host };
  if (Number.isSafeInteger(r.pidNs)) h.pidNs = r.pidNs as number;
  if (Number.isSafeInteger(r.start)) h.start = r.start as number;
  return h;
}

/** Whether `h` is known to be a process that no longer runs (see the module's comment). */
export function holderGone(h: Holder): boolean {
  if (h.host !== HOLDER.host || HOLDER.pidNs === undefined || h.pidNs !== HOLDER.pidNs) return false;
  if (h.pid === HOLDER.pid) return h.start !== undefined && HOLDER.start !== undefined && h.start !== HOLDER.start;
  const alive = pidState(h.pid);
  if (alive === 'gone') return true;
  if (h.start === undefined) return false;
  const now = startTime(h.pid);
  // The pid names a process started later (reused); or it is gone between the two looks (null),
  // which only a process of our own user proves: another user's may be hidden from /proc
  // (`hidepid`), so its missing entry says nothing.
  if (now === null) return alive === 'ours';
  return now !== undefined && now !== h.start;
}

/** Whether `pid` runs as a process we may signal, one of another user's, or none. */
function pidState(pid: number): 'ours' | 'other user' | 'gone' {
  try {
    process.kill(pid, 0);
    return 'ours';
  } catch (e) {
    return errCode(e) === 'EPERM' ? 'other user' : 'gone';
  }
}
