/**
 * LocalLeaseStore: the conformance suite in a temp folder, then what only a file-based store
 * must prove: real `node` processes racing for one key, and a process killed (or frozen) while
 * holding a key's mutex. Plus the pure rules and writer-epoch strings.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, systemClock } from '../lib/clock.ts';
import { InvalidInputError, LeaseHeldError } from '../lib/errors.ts';
import { LocalLeaseStore } from '../lib/lease/local.ts';
import * as rules from '../lib/lease/rules.ts';
import { formatWriterEpoch, parseWriterEpoch, slotKey } from '../lib/lease/slots.ts';
import { leaseStoreConformance } from './conformance/lease.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const LOCAL_MODULE = fileURLToPath(new URL('../lib/lease/local.ts', import.meta.url));

async function tempDir(): Promise<string> {
  return fs.mkdtemp(join(tmpdir(), 'dgcl-lease-'));
}

leaseStoreConformance('local', {
  async create() {
    const dir = await tempDir();
    const clock = new ManualClock();
    return {
      store: new LocalLeaseStore({ dir, clock }),
      clock,
      destroy: () => fs.rm(dir, { recursive: true, force: true }),
    };
  },
});

describe('lease rules (pure)', () => {
  const held = { key: 'k', owner: 'a', epoch: 4, expiresAtMs: 1000 };
  it('free = never acquired, released, or expired (inclusive)', () => {
    expect(rules.isFree(null, 0)).toBe(true);
    expect(rules.isFree(held, 999)).toBe(false);
    expect(rules.isFree(held, 1000)).toBe(true);
    expect(rules.isFree(rules.releasedRecord(held), 0)).toBe(true);
    expect(rules.canAcquire(held, 999)).toBe(false);
  });
  it('next epoch, records written by acquire/renew/release', () => {
    expect(rules.nextEpoch(null)).toBe(1);
    expect(rules.nextEpoch(held)).toBe(5);
    expect(rules.acquiredRecord(held, 'k', 'b', 2000, 50)).toEqual({ key: 'k', owner: 'b', epoch: 5, expiresAtMs: 2050 });
    expect(rules.renewedRecord(held, 1500, 100)).toEqual({ ...held, expiresAtMs: 1600 });
    expect(rules.releasedRecord(held)).toEqual({ key: 'k', owner: '', epoch: 4, expiresAtMs: 0 });
  });
  it('current = same key, owner and epoch, not released; expiry ignored', () => {
    expect(rules.isCurrent(held, { ...held, expiresAtMs: 1 })).toBe(true);
    expect(rules.isCurrent(held, { ...held, epoch: 3 })).toBe(false);
    expect(rules.isCurrent(held, { ...held, owner: 'b' })).toBe(false);
    expect(rules.isCurrent(rules.releasedRecord(held), held)).toBe(false);
    expect(rules.isCurrent(null, held)).toBe(false);
  });
  it('own acquire = the record carries the token of this call and is not released', () => {
    const mine = { ...held, acquireToken: 't1' };
    expect(rules.isOwnAcquire(mine, 't1')).toBe(true);
    expect(rules.isOwnAcquire(mine, 't2')).toBe(false);
    expect(rules.isOwnAcquire(held, 't1')).toBe(false); // a record without a token is nobody's
    expect(rules.isOwnAcquire({ ...rules.releasedRecord(held), acquireToken: 't1' }, 't1')).toBe(false);
    expect(rules.isOwnAcquire(null, 't1')).toBe(false);
    expect(rules.newAcquireToken()).not.toBe(rules.newAcquireToken());
  });
  it('validates ttl, owner and key', () => {
    expect(() => rules.validateTtl(0)).toThrow(InvalidInputError);
    expect(() => rules.validateTtl(1.5)).toThrow(InvalidInputError);
    expect(() => rules.validateTtl(rules.MAX_TTL_MS + 1)).toThrow(InvalidInputError);
    expect(() => rules.validateOwner('')).toThrow(InvalidInputError);
    expect(() => rules.validateKey('')).toThrow(InvalidInputError);
  });
});

describe('LocalLeaseStore when a write fails after its commit', () => {
  it('acquire returns the lease its commit made (not an error that leaks the key until expiry)', async () => {
    const dir = await tempDir();
    const clock = new ManualClock();
    let failures = 1;
    // the record is renamed into place, then the step after it fails (as a failing fsync would)
    const store = new LocalLeaseStore({
      dir,
      clock,
      faultInjection: {
        afterCommit: () => {
          if (failures-- > 0) throw new Error('EIO after the commit');
        },
      },
    });
    try {
      const lease = await store.acquire('k', 'a', 10_000);
      expect(lease).toEqual({ key: 'k', owner: 'a', epoch: 1, expiresAtMs: clock.nowMs() + 10_000 });
      expect(await store.read('k')).toEqual(lease);
      await store.assertCurrent(lease);
      // a later call by the same owner is another acquire: refused while the lease is held
      await expect(store.acquire('k', 'a', 10_000)).rejects.toBeInstanceOf(LeaseHeldError);
      // renew keeps working and release frees the key at once
      await store.renew(lease, 10_000);
      await store.release(lease);
      expect((await store.acquire('k', 'b', 10_000)).epoch).toBe(2);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('a failure before the commit is still an error, and the key stays free', async () => {
    const dir = await tempDir();
    const store = new LocalLeaseStore({
      dir,
      faultInjection: {
        beforeCommit: () => {
          throw new Error('EIO before the commit');
        },
      },
    });
    try {
      await expect(store.acquire('k', 'a', 10_000)).rejects.toThrow(/EIO before the commit/);
      expect(await store.read('k')).toBeNull();
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('writer epochs and keys', () => {
  it('formats and parses s<slot:02>-e<epoch:06>', () => {
    expect(formatWriterEpoch(3, 7)).toBe('s03-e000007');
    expect(parseWriterEpoch('s03-e000007')).toEqual({ slot: 3, epoch: 7 });
    expect(parseWriterEpoch(formatWriterEpoch(99, 1_234_567))).toEqual({ slot: 99, epoch: 1_234_567 });
    for (const bad of ['s3-e000007', 's03-e7', 's03-e000000', 'x03-e000007', 's03-e0000007', '']) {
      expect(() => parseWriterEpoch(bad)).toThrow(InvalidInputError);
    }
    expect(() => formatWriterEpoch(100, 1)).toThrow(InvalidInputError);
    expect(() => formatWriterEpoch(1, 0)).toThrow(InvalidInputError);
  });
  it('builds keys from validated names', () => {
    expect(slotKey('p', 'e', 3)).toBe('p/e/slot/3');
    expect(() => slotKey('..', 'e', 3)).toThrow(InvalidInputError);
    expect(() => slotKey('p', 'a/b', 3)).toThrow(InvalidInputError);
  });
});

// ---- other processes ------------------------------------------------------------------------

/**
 * A child `node` process (tsx loader) driving its own LocalLeaseStore on `dir`. It prints
 * `{"ready":true}`, waits for `go` on stdin, acquires KEY and prints the outcome as JSON (KEY may
 * list several keys, comma-separated: acquired concurrently, printed as {"results": [...]}).
 * MODE=hang-after-lock: prints {"locked":true} while holding the mutex, then waits for
 *   `continue` on stdin (a frozen holder; SIGKILL it to simulate a crash).
 * MODE=hang-before-commit: the same after deciding, with the new record in its temp file.
 * MODE=hang-after-commit: the same after the record was written, mutex still held.
 */
const CHILD = `
import { createInterface } from 'node:readline';
const { LocalLeaseStore } = await import(process.env.LEASE_MODULE);
const lines = createInterface({ input: process.stdin });
const waiting = new Map();
lines.on('line', (l) => { const w = waiting.get(l.trim()); if (w) w(); });
const waitFor = (word) => new Promise((res) => waiting.set(word, res));
const say = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
const mode = process.env.MODE ?? 'plain';
const hang = async (what) => { say({ [what]: true }); await waitFor('continue'); };
const store = new LocalLeaseStore({
  dir: process.env.DIR,
  faultInjection: {
    afterLock: mode === 'hang-after-lock' ? () => hang('locked') : undefined,
    beforeCommit: mode === 'hang-before-commit' ? () => hang('deciding') : undefined,
    afterCommit: mode === 'hang-after-commit' ? () => hang('committed') : undefined,
  },
});
say({ ready: true });
await waitFor('go');
const one = async (key) => {
  try {
    const lease = await store.acquire(key, process.env.OWNER, Number(process.env.TTL));
    return { key, ok: true, lease };
  } catch (e) {
    return { key, ok: false, error: e.name, holder: e.holder ?? null, message: e.message };
  }
};
const keys = process.env.KEY.split(',');
if (keys.length === 1) say(await one(keys[0]));
else say({ results: await Promise.all(keys.map(one)) });
// Stays alive until the test kills it: a holder whose process died frees its lease at once.
`;

interface Child {
  proc: ChildProcessWithoutNullStreams;
  next(): Promise<Record<string, unknown>>;
  send(line: string): void;
  exited: Promise<number | null>;
}

const children: Child[] = [];

function startChild(env: Record<string, string>): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CHILD], {
    cwd: REPO,
    env: { ...process.env, LEASE_MODULE: LOCAL_MODULE, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const queue: Array<Record<string, unknown>> = [];
  const waiters: Array<(v: Record<string, unknown>) => void> = [];
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  createInterface({ input: proc.stdout }).on('line', (line) => {
    const msg = JSON.parse(line) as Record<string, unknown>;
    const w = waiters.shift();
    if (w) w(msg);
    else queue.push(msg);
  });
  const exited = new Promise<number | null>((res) => proc.on('exit', (code) => res(code)));
  const child: Child = {
    proc,
    exited,
    send: (line) => proc.stdin.write(`${line}\n`),
    next: () => {
      const m = queue.shift();
      if (m) return Promise.resolve(m);
      return new Promise((res, rej) => {
        waiters.push(res);
        void exited.then((code) => rej(new Error(`child exited (${code}) before answering: ${stderr}`)));
      });
    },
  };
  children.push(child);
  return child;
}

afterEach(() => {
  for (const c of children.splice(0)) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
});

describe('LocalLeaseStore across processes', () => {
  it('8 node processes race for one key: exactly one wins', async () => {
    const dir = await tempDir();
    try {
      const kids = Array.from({ length: 8 }, (_, i) =>
        startChild({ DIR: dir, KEY: 'pipe/exp/slot/0', OWNER: `proc-${i}`, TTL: '60000' }),
      );
      for (const k of kids) expect(await k.next()).toEqual({ ready: true });
      for (const k of kids) k.send('go');
      const results = await Promise.all(kids.map((k) => k.next()));
      const winners = results.filter((r) => r.ok === true);
      expect(winners).toHaveLength(1);
      const lease = winners[0]!.lease as { owner: string; epoch: number };
      expect(lease.epoch).toBe(1);
      for (const r of results.filter((x) => x.ok !== true)) {
        expect(r.error).toBe('LeaseHeldError');
        expect((r.holder as { owner: string }).owner).toBe(lease.owner);
      }
      const record = await new LocalLeaseStore({ dir }).read('pipe/exp/slot/0');
      expect(record).toEqual(winners[0]!.lease);
      // no mutex or temp file left behind
      const left = (await fs.readdir(dir)).filter((f) => !f.endsWith('.json'));
      expect(left).toEqual([]);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('6 processes x 25 keys, all at once: exactly one winner per key', async () => {
    const dir = await tempDir();
    try {
      const keys = Array.from({ length: 25 }, (_, i) => `pipe/exp/slot/${i}`);
      const kids = Array.from({ length: 6 }, (_, i) =>
        startChild({ DIR: dir, KEY: keys.join(','), OWNER: `proc-${i}`, TTL: '60000' }),
      );
      for (const k of kids) expect(await k.next()).toEqual({ ready: true });
      for (const k of kids) k.send('go');
      const all = (await Promise.all(kids.map((k) => k.next()))).flatMap(
        (m) => m.results as Array<{ key: string; ok: boolean; error?: string; lease?: { owner: string } }>,
      );
      const reader = new LocalLeaseStore({ dir });
      for (const key of keys) {
        const forKey = all.filter((r) => r.key === key);
        expect(forKey).toHaveLength(6);
        const won = forKey.filter((r) => r.ok);
        expect(won, key).toHaveLength(1);
        expect(forKey.filter((r) => !r.ok).every((r) => r.error === 'LeaseHeldError')).toBe(true);
        expect(await reader.read(key)).toEqual(won[0]!.lease);
      }
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('waiters racing to break the mutex of a SIGKILLed holder: still exactly one winner', async () => {
    const dir = await tempDir();
    try {
      const doomed = startChild({ DIR: dir, KEY: 'k', OWNER: 'doomed', TTL: '60000', MODE: 'hang-after-lock' });
      expect(await doomed.next()).toEqual({ ready: true });
      doomed.send('go');
      expect(await doomed.next()).toEqual({ locked: true });
      const kids = Array.from({ length: 6 }, (_, i) => startChild({ DIR: dir, KEY: 'k', OWNER: `w${i}`, TTL: '60000' }));
      for (const k of kids) expect(await k.next()).toEqual({ ready: true });
      for (const k of kids) k.send('go');
      await new Promise((r) => setTimeout(r, 300)); // all six are now polling the held mutex
      doomed.proc.kill('SIGKILL');
      await doomed.exited;
      const results = await Promise.all(kids.map((k) => k.next()));
      const won = results.filter((r) => r.ok === true);
      expect(won).toHaveLength(1);
      expect((won[0]!.lease as { epoch: number }).epoch).toBe(1);
      expect(results.filter((r) => r.ok !== true).every((r) => r.error === 'LeaseHeldError')).toBe(true);
      expect((await fs.readdir(dir)).filter((f) => !f.endsWith('.json'))).toEqual([]);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('a process SIGKILLed while holding the mutex does not block others', async () => {
    const dir = await tempDir();
    try {
      const kid = startChild({ DIR: dir, KEY: 'k', OWNER: 'doomed', TTL: '60000', MODE: 'hang-after-lock' });
      expect(await kid.next()).toEqual({ ready: true });
      kid.send('go');
      expect(await kid.next()).toEqual({ locked: true });
      expect((await fs.readdir(dir)).some((f) => f.endsWith('.lock'))).toBe(true);
      kid.proc.kill('SIGKILL');
      await kid.exited;
      // a dead pid is recognised at once: without that, the 10 min staleness would time this out
      const store = new LocalLeaseStore({ dir, lockStaleMs: 600_000, lockTimeoutMs: 20_000 });
      const lease = await store.acquire('k', 'survivor', 60_000);
      expect(lease.epoch).toBe(1); // the dead process never committed
      expect((await fs.readdir(dir)).filter((f) => !f.endsWith('.json'))).toEqual([]);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('a process SIGKILLed after committing, mutex still held: its lease is taken at once, at the next epoch (its holder is dead)', async () => {
    const dir = await tempDir();
    try {
      const kid = startChild({ DIR: dir, KEY: 'k', OWNER: 'doomed', TTL: '5000', MODE: 'hang-after-commit' });
      expect(await kid.next()).toEqual({ ready: true });
      kid.send('go');
      expect(await kid.next()).toEqual({ committed: true });
      kid.proc.kill('SIGKILL');
      await kid.exited;
      const clock = new ManualClock(systemClock.nowMs());
      const store = new LocalLeaseStore({ dir, clock, lockStaleMs: 600_000, lockTimeoutMs: 20_000 });
      const dead = await store.read('k');
      expect(dead).toMatchObject({ owner: 'doomed', epoch: 1 });
      expect(dead!.expiresAtMs, 'not expired').toBeGreaterThan(clock.nowMs());
      const lease = await store.acquire('k', 'next', 60_000);
      expect(lease).toMatchObject({ owner: 'next', epoch: 2 });
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('a frozen mutex holder (alive pid) is broken after lockStaleMs', async () => {
    const dir = await tempDir();
    try {
      const kid = startChild({ DIR: dir, KEY: 'k', OWNER: 'frozen', TTL: '60000', MODE: 'hang-after-lock' });
      expect(await kid.next()).toEqual({ ready: true });
      kid.send('go');
      expect(await kid.next()).toEqual({ locked: true });
      const store = new LocalLeaseStore({ dir, lockStaleMs: 500, lockTimeoutMs: 20_000 });
      const lease = await store.acquire('k', 'other', 60_000);
      expect(lease.epoch).toBe(1);
      expect(kid.proc.exitCode).toBeNull(); // broken by age, its holder still alive
      kid.send('continue'); // wakes up inside its critical section, before reading: sees the holder
      expect(await kid.next()).toMatchObject({ ok: false, error: 'LeaseHeldError' });
      expect(await store.read('k')).toEqual(lease);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('a holder frozen between its decision and its commit cannot overwrite once its mutex was broken', async () => {
    const dir = await tempDir();
    try {
      const kid = startChild({ DIR: dir, KEY: 'k', OWNER: 'frozen', TTL: '60000', MODE: 'hang-before-commit' });
      expect(await kid.next()).toEqual({ ready: true });
      kid.send('go');
      expect(await kid.next()).toEqual({ deciding: true }); // it saw the key free and wants epoch 1
      const store = new LocalLeaseStore({ dir, lockStaleMs: 500, lockTimeoutMs: 20_000 });
      const lease = await store.acquire('k', 'other', 60_000);
      expect(lease.epoch).toBe(1);
      kid.send('continue');
      expect(await kid.next()).toMatchObject({ ok: false, error: 'ConflictError' });
      expect(await store.read('k')).toEqual(lease); // not overwritten: still one holder
      expect((await fs.readdir(dir)).filter((f) => !f.endsWith('.json'))).toEqual([]);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('a live holder is waited for, and a lockTimeoutMs exceeded is UnavailableError', async () => {
    const dir = await tempDir();
    try {
      const kid = startChild({ DIR: dir, KEY: 'k', OWNER: 'slow', TTL: '60000', MODE: 'hang-after-lock' });
      expect(await kid.next()).toEqual({ ready: true });
      kid.send('go');
      expect(await kid.next()).toEqual({ locked: true });
      const impatient = new LocalLeaseStore({ dir, lockTimeoutMs: 300 });
      const e = await impatient.acquire('k', 'other', 60_000).catch((x: unknown) => x);
      expect((e as Error).name).toBe('UnavailableError');
      const patient = new LocalLeaseStore({ dir, lockTimeoutMs: 10_000 });
      const waiting = patient.acquire('k', 'other', 60_000).catch((x: unknown) => x);
      kid.send('continue');
      expect(await kid.next()).toMatchObject({ ok: true });
      const result = await waiting;
      expect(result).toBeInstanceOf(LeaseHeldError);
      expect((result as LeaseHeldError).holder?.owner).toBe('slow');
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
