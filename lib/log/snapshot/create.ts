/**
 * Taking a snapshot (docs/usage.md, "Snapshots"; where things go: lib/log/layout.ts):
 *  1. an attempt marker, so that the sweep (catalog.ts) leaves this attempt's tag and tail alone;
 *  2. under the maintainer lease, so that no version clean-up runs between reading the base
 *     version and tagging it: one consistent read (LogReader.read) pins the base's current
 *     version and copies each visible generation, at the version it reads, into a tail dataset of
 *     the attempt's own; then a Lance tag on that base version;
 *  3. the events it shows are counted, by a pass over the snapshot itself;
 *  4. the record, put if absent: the commit point; then the marker goes.
 * An attempt that finds the name taken (before or at its commit) answers as for an existing
 * snapshot: the same state is fine (`created: false`), another is refused (INVALID_INPUT, the name
 * is the input to change). What a failed or losing attempt made is deleted, or swept later.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type * as arrow from 'apache-arrow';
import type { SnapshotResult } from '../../api.ts';
import { DgclError, FencedError, InvalidInputError, LeaseHeldError, NotFoundError, UnavailableError } from '../../errors.ts';
import { fsyncPath } from '../../fsutil.ts';
import { acquireMaintainer, LeaseKeeper } from '../../lease/slots.ts';
import type { Lease } from '../../lease/types.ts';
import { Utf8Column } from '../columns.ts';
import { SNAPSHOT_TAILS_DIR, snapshotAttemptKey, snapshotRecordKey, snapshotTag } from '../layout.ts';
import { permissionOf } from '../read/damage.ts';
import { pinnedBase, scanEvents, type EventVisitor } from '../read/stream.ts';
import { readOrder } from '../read/visibility.ts';
import type { Table } from '../tables.ts';
import { sweepLeftovers, type SnapshotContext } from './catalog.ts';
import { checkSnapshotName, infoOf, nonceOfTail, readRecord, tailName, type SnapshotRecord } from './record.ts';
import { SnapshotView } from './view.ts';

/** How long a snapshot waits for a maintenance pass to end before it answers LEASE_HELD. */
const LEASE_WAIT_MS = 30_000;

export async function createSnapshot(c: SnapshotContext, name: string): Promise<SnapshotResult> {
  checkSnapshotName(name);
  const existing = await readRecord(c, name);
  if (existing) return answerExisting(c, existing);
  const nonce = randomBytes(8).toString('hex');
  await c.objects.putIfAbsent(snapshotAttemptKey(nonce), JSON.stringify({ name, startedAtMs: c.clock.nowMs() }));
  let record: SnapshotRecord;
  try {
    record = await lanceErrors(c, async () => {
      const taken = await takeState(c, name, nonce);
      return { ...taken, events: await new SnapshotView(c, taken).scanEvents({ columns: ['item_seq'] }, () => new CountVisitor()) };
    });
  } catch (e) {
    await discard(c, nonce).catch(() => undefined); // else swept once its marker is old
    throw e;
  }
  let won: boolean;
  try {
    won = await c.objects.putIfAbsent(snapshotRecordKey(name), JSON.stringify(record), { once: true });
  } catch (e) {
    const now = await readRecord(c, name).catch(() => undefined);
    if (now?.nonce !== nonce) {
      // No record, or no answer: ours may still land, naming this attempt's tag and tail, so they
      // stay (the sweep keeps them if it does, and deletes them once the marker is old if not).
      if (!now) throw e;
      await discard(c, nonce).catch(() => undefined);
      return answerExisting(c, now);
    }
    won = true;
  }
  if (!won) {
    // Ours, resent by the store's client after its first try landed, or another attempt's.
    const now = await readRecord(c, name);
    if (now?.nonce !== nonce) {
      await discard(c, nonce).catch(() => undefined);
      return now ? answerExisting(c, now) : Promise.reject(new UnavailableError(`snapshot ${JSON.stringify(name)} was taken and dropped meanwhile: retry`));
    }
  }
  await c.objects.delete(snapshotAttemptKey(nonce));
  // Leftovers of attempts that died: they hold base versions back from the clean-up. Best effort:
  // the snapshot is taken; the next one or a drop sweeps again.
  await sweepLeftovers(c).catch(() => undefined);
  return { ...infoOf(record), created: true };
}

/** An existing snapshot of this name: fine when it names the log's state now, else refused. */
async function answerExisting(c: SnapshotContext, r: SnapshotRecord): Promise<SnapshotResult> {
  const same = await lanceErrors(c, () => sameState(c, r)).catch((e: unknown) => {
    // Its reading view found it dropped meanwhile (lib/log/snapshot/view.ts): the name is free now.
    if (e instanceof NotFoundError) throw new UnavailableError(`snapshot ${JSON.stringify(r.name)} of ${c.uri} was dropped while this one compared the log with it: retry`, { cause: e });
    throw e;
  });
  if (same) return { ...infoOf(r), created: false };
  throw new InvalidInputError(
    `snapshot ${JSON.stringify(r.name)} already exists in ${c.uri} (taken ${new Date(r.createdAtMs).toISOString()}, ${r.events} events) and the log holds other events now: pick another name, or drop it first (dgcl snapshot --drop ${r.name})`,
    { field: 'name' },
  );
}

/**
 * Whether the log shows the events the snapshot holds: at once when nothing moved (same base
 * version, generations at the same versions, same tombstones), else by comparing a digest of
 * both sets of event ids (a merge or a compaction since moves rows without changing them).
 */
async function sameState(c: SnapshotContext, r: SnapshotRecord): Promise<boolean> {
  const now = await c.reader.read(async (listing) => {
    const base = await pinnedBase(c.tables, listing);
    const gens: Record<string, number> = {};
    for (const v of readOrder(listing.visible)) gens[v.name] = v.version ?? (await (await c.reader.shardTable(v)).version());
    return { baseVersion: base ? await base.version() : null, gens, tombstones: Object.fromEntries(listing.tombstones) };
  });
  if (now.baseVersion === r.baseVersion && sameCounts(now.gens, r.gens) && sameCounts(now.tombstones, r.tombstones)) return true;
  const [live, snap] = await Promise.all([
    scanEvents(c.reader, c.tables, { columns: ['event_id'] }, () => new DigestVisitor()),
    new SnapshotView(c, r, { recorded: true }).scanEvents({ columns: ['event_id'] }, () => new DigestVisitor()),
  ]);
  return live === snap;
}

function sameCounts(a: Record<string, number>, b: Record<string, number>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => b[k] === a[k]);
}

/** Steps 2 of the header: the state read, its tail copied and its base version tagged. */
async function takeState(c: SnapshotContext, name: string, nonce: string): Promise<SnapshotRecord> {
  const keeper = new LeaseKeeper(c.leases, await maintainerLease(c), { ttlMs: c.leaseTtlMs, clock: c.clock });
  try {
    let reads = 0;
    const made: string[] = [];
    const state = await c.reader.read(async (listing) => {
      // A read that starts over (the layout changed under it) fills a tail of its own.
      const tail = tailName(nonce, ++reads);
      made.push(tail);
      const base = await pinnedBase(c.tables, listing);
      const gens: Record<string, number> = {};
      let table: Table | null = null;
      let rows = 0;
      // Pinned, each epoch's newest generation first (readOrder): a live writer's next commit
      // is after the snapshot.
      for (const v of readOrder(listing.visible)) gens[v.name] = v.version ?? (await (await c.reader.shardTable(v)).version());
      for (const v of listing.visible) {
        const version = gens[v.name]!;
        // Every column, blobs too: the snapshot's blobs are read from here.
        const data = await (v.version === null ? await c.tables.shardAt(v.name, version) : await c.reader.shardTable(v)).query().toArrow();
        if (data.numRows === 0) continue;
        table ??= await c.tables.side(SNAPSHOT_TAILS_DIR, tail, { create: true });
        await table.add(data);
        rows += data.numRows;
      }
      return { baseVersion: base ? await base.version() : null, tail: table ? tail : null, rows, gens, tombstones: Object.fromEntries(listing.tombstones), logId: listing.logId };
    });
    for (const t of made) if (t !== state.tail) await c.objects.deletePrefix(`${SNAPSHOT_TAILS_DIR}/${t}.lance`);
    if (state.tail) await c.tables.sync(state.tail, SNAPSHOT_TAILS_DIR);
    const baseTag = state.baseVersion === null ? null : snapshotTag(nonce);
    if (baseTag !== null) {
      const base = (await c.tables.base(true))!;
      await (await base.tags()).create(baseTag, state.baseVersion!);
      await syncTag(c, baseTag);
    }
    // Still the maintainer: no clean-up began before the tag was there (it clamps at tagged versions).
    await c.leases.assertCurrent(keeper.current()).catch((e: unknown) => {
      if (e instanceof FencedError) throw new UnavailableError(`another process took the maintainer lease of ${c.pipeline}/${c.experiment} while snapshot ${JSON.stringify(name)} was taken: retry`, { cause: e });
      throw e;
    });
    return {
      format: 1,
      name,
      logId: state.logId,
      nonce,
      createdAtMs: c.clock.nowMs(),
      baseVersion: state.baseVersion,
      baseTag,
      tail: state.tail,
      tailRows: state.rows,
      events: 0,
      gens: state.gens,
      tombstones: state.tombstones,
    };
  } finally {
    await keeper.stop();
    if (!keeper.lost) await c.leases.release(keeper.current()).catch(() => undefined);
  }
}

/**
 * The maintainer lease, waited for while a maintenance pass holds it (up to LEASE_WAIT_MS). Its
 * owner is the log's with `/snapshot`: a maintain() of this very log object holds it as itself.
 */
async function maintainerLease(c: SnapshotContext): Promise<Lease> {
  const deadline = c.clock.nowMs() + LEASE_WAIT_MS;
  for (let wait = 100; ; wait = Math.min(2 * wait, 2000)) {
    try {
      return await acquireMaintainer(c.leases, { pipeline: c.pipeline, experiment: c.experiment, owner: `${c.owner}/snapshot`, ttlMs: c.leaseTtlMs });
    } catch (e) {
      if (!(e instanceof LeaseHeldError)) throw e;
      if (c.clock.nowMs() + wait > deadline) {
        throw new LeaseHeldError(
          `a maintenance pass of ${c.pipeline}/${c.experiment} holds the maintainer lease (${e.holder?.owner ?? 'unknown owner'}); a snapshot is taken between passes: retry once it ends`,
          e.holder,
          { cause: e },
        );
      }
      await c.clock.sleep(wait);
    }
  }
}

/** Make a new tag survive power loss (local roots; object stores are durable once a PUT returns). */
async function syncTag(c: SnapshotContext, tag: string): Promise<void> {
  const root = c.tables.logUri;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(root)) return;
  const dir = path.join(root, '_refs', 'tags');
  await fsyncPath(path.join(dir, `${tag}.json`));
  for (const d of [dir, path.dirname(dir), root]) await fsyncPath(d);
}

/** Delete what attempt `nonce` made: its tag, its tails, its marker. */
async function discard(c: SnapshotContext, nonce: string): Promise<void> {
  const base = await c.tables.base((await c.reader.listShards()).baseExists);
  const tags = base ? await base.tags() : null;
  if (tags && Object.hasOwn(await tags.list(), snapshotTag(nonce))) await tags.delete(snapshotTag(nonce));
  for (const e of await c.objects.list(SNAPSHOT_TAILS_DIR)) {
    if (nonceOfTail(e) === nonce) await c.objects.deletePrefix(`${SNAPSHOT_TAILS_DIR}/${e.replace(/\/$/, '')}`);
  }
  await c.objects.delete(snapshotAttemptKey(nonce));
}

/** Lance's own errors (plain Errors) as PERMISSION_DENIED, or UNAVAILABLE: storage trouble, retry. */
async function lanceErrors<T>(c: SnapshotContext, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof DgclError) throw e;
    throw permissionOf(e, c.uri) ?? new UnavailableError(`snapshot of ${c.uri} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}

/** Counts the events a pass keeps. */
class CountVisitor implements EventVisitor<number> {
  private n = 0;
  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    for (let r = 0; r < b.numRows; r++) if (keep(r)) this.n++;
  }
  done(): number {
    return this.n;
  }
}

/**
 * An order-free digest of the event ids a pass keeps: their number and sums and xors of two
 * 32-bit hashes of each (equal sets give equal digests; different ones, all but never).
 */
class DigestVisitor implements EventVisitor<string> {
  private n = 0;
  private sum1 = 0;
  private sum2 = 0;
  private xor1 = 0;
  batch(b: arrow.RecordBatch, keep: (row: number) => boolean): void {
    const ids = new Utf8Column(b, 'event_id');
    for (let r = 0; r < b.numRows; r++) {
      if (!keep(r)) continue;
      const id = ids.get(r)!;
      let h1 = 0xdeadbeef;
      let h2 = 0x41c6ce57;
      for (let i = 0; i < id.length; i++) {
        const ch = id.charCodeAt(i);
        h1 = Math.imul(h1 ^ ch, 2654435761);
        h2 = Math.imul(h2 ^ ch, 1597334677);
      }
      h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
      h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
      this.n++;
      this.sum1 = (this.sum1 + (h1 >>> 0)) >>> 0;
      this.sum2 = (this.sum2 + (h2 >>> 0)) >>> 0;
      this.xor1 = (this.xor1 ^ h1) >>> 0;
    }
  }
  done(): string {
    return `${this.n}:${this.sum1}:${this.sum2}:${this.xor1}`;
  }
}
