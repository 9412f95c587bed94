/**
 * Reading a snapshot: the base at its Lance tag, plus the rows it copied from the generations
 * that were unmerged then (its tail dataset), with the tombstones in force then. The same
 * streaming read as the log's (lib/log/read/stream.ts `streamUnion`): each event once, the copy
 * with the lowest seq, so every pass over a snapshot sees what a pass over the log saw when it
 * was taken. Nothing of it changes later, so a read needs no listing and never starts over.
 *
 * A drop (catalog.ts) deletes the record first, then the tag and the tail. So a read that fails
 * once the record is gone, or names another attempt, was of a snapshot dropped since it was
 * opened: NOT_FOUND. With the record still its own, a missing or moved tag or tail is CORRUPT.
 * The record is read only after a failure: a read that succeeds costs no extra request.
 */
import type { LogStats } from '../../api.ts';
import { CorruptError, DgclError, NotFoundError, UnavailableError } from '../../errors.ts';
import { SNAPSHOT_TAILS_DIR } from '../layout.ts';
import { blobIn } from '../read/blob-read.ts';
import { permissionOf } from '../read/damage.ts';
import type { EventSource } from '../read/source.ts';
import { collect, streamUnion, type EventVisitor, type ScanOptions, type TailRead } from '../read/stream.ts';
import { SUMMARY_SCAN_COLUMNS, SummaryVisitor, type ItemAggregate } from '../read/summary.ts';
import type { ObjectStore } from '../../storage/objects.ts';
import type { LanceTables, Table } from '../tables.ts';
import { readRecord, type SnapshotRecord } from './record.ts';

/** Runs a read as one of the log's own (refused once it is closed; close() waits for it). */
export type Track = <T>(fn: () => Promise<T>) => Promise<T>;

export interface ViewContext {
  uri: string;
  tables: LanceTables;
  objects: ObjectStore;
  track: Track;
}

/** Lance's answer for a tag (`Ref not found ... does not exist`) or a dataset (`Table '...' was not found`) that is not there. */
const MISSING_RE = /Ref not found|does not exist|Table '[^']*' was not found/;

export class SnapshotView implements EventSource {
  readonly uri: string;
  readonly name: string;
  private readonly tombstones: ReadonlyMap<string, number>;
  private baseTable: Promise<Table | null> | null = null;
  private tailTable: Promise<Table | null> | null = null;

  /**
   * `recorded`: the record was read from the store (an opened snapshot), so a read failing once it
   * is gone is NOT_FOUND; false while an attempt counts its own snapshot before writing its record.
   */
  constructor(
    private readonly c: ViewContext,
    readonly record: SnapshotRecord,
    private readonly o: { recorded: boolean } = { recorded: false },
  ) {
    this.uri = c.uri;
    this.name = record.name;
    this.tombstones = new Map(Object.entries(record.tombstones));
  }

  /** The base at the snapshot's tag (CORRUPT when the tag is gone or moved: read() tells a drop), or null (no base then). */
  private base(): Promise<Table | null> {
    const { baseTag, baseVersion } = this.record;
    if (baseTag === null) return Promise.resolve(null);
    this.baseTable ??= (async () => {
      let t: Table;
      try {
        t = await this.c.tables.baseAtTag(baseTag);
      } catch (e) {
        if (e instanceof Error && MISSING_RE.test(e.message)) {
          throw new CorruptError(`snapshot ${JSON.stringify(this.name)} of ${this.uri}: the base's tag ${baseTag} is gone (deleted outside dgcl?): the snapshot cannot be read`, { cause: e });
        }
        throw e;
      }
      const v = await t.version();
      if (v !== baseVersion) throw new CorruptError(`snapshot ${JSON.stringify(this.name)} of ${this.uri}: the base's tag ${baseTag} points at version ${v}, the snapshot was taken at ${baseVersion}`);
      return t;
    })();
    this.baseTable.catch(() => (this.baseTable = null));
    return this.baseTable;
  }

  private tail(): Promise<Table | null> {
    const tail = this.record.tail;
    if (tail === null) return Promise.resolve(null);
    this.tailTable ??= this.c.tables.side(SNAPSHOT_TAILS_DIR, tail, { create: false }).catch((e: unknown) => {
      if (e instanceof Error && MISSING_RE.test(e.message)) {
        throw new CorruptError(`snapshot ${JSON.stringify(this.name)} of ${this.uri}: its tail dataset ${SNAPSHOT_TAILS_DIR}/${tail}.lance is gone (deleted outside dgcl?): the snapshot cannot be read`, { cause: e });
      }
      throw e;
    });
    this.tailTable.catch(() => (this.tailTable = null));
    return this.tailTable;
  }

  /**
   * A read of the snapshot: one of the log's (track), with Lance's errors as UNAVAILABLE (storage
   * did not answer: retry) or PERMISSION_DENIED, and any failure of a snapshot dropped meanwhile
   * as NOT_FOUND.
   */
  private read<T>(fn: () => Promise<T>): Promise<T> {
    return this.c.track(async () => {
      try {
        return await fn();
      } catch (e) {
        if (e instanceof DgclError && !(e instanceof CorruptError)) throw e;
        const gone = await this.dropped(e);
        if (gone) throw gone;
        if (e instanceof DgclError) throw e;
        throw permissionOf(e, this.uri) ?? new UnavailableError(`read of snapshot ${JSON.stringify(this.name)} of ${this.uri} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
      }
    });
  }

  /** NOT_FOUND when the snapshot's record is gone or names another attempt; null otherwise (or when the store does not answer). */
  private async dropped(cause: unknown): Promise<NotFoundError | null> {
    if (!this.o.recorded) return null;
    const now = await readRecord(this.c, this.name).catch(() => undefined);
    if (now === undefined || now?.nonce === this.record.nonce) return null;
    const since = now === null ? 'dgcl snapshot --list lists the snapshots it has' : 'a snapshot of that name was taken again since: open it again to read that one';
    return new NotFoundError(`snapshot ${JSON.stringify(this.name)} of ${this.uri} was dropped while it was being read; ${since}`, { cause });
  }

  /** Every event of the snapshot matching `o.filter`, each once, to a visitor (as `LanceCheckpointLog.scanEvents`). */
  scanEvents<T>(o: ScanOptions, make: () => EventVisitor<T>): Promise<T> {
    return this.read(async () => {
      const [base, tail] = await Promise.all([this.base(), this.tail()]);
      const tailRead: TailRead = async (columns, filter) => ({ batches: tail ? await collect(tail, filter, columns) : [], shared: false });
      const visitor = make();
      await streamUnion(tailRead, this.tombstones, base, { columns: o.columns, filter: o.filter ?? null }, visitor);
      return visitor.done();
    });
  }

  /** Every item's listing aggregate (lib/log/read/summary.ts), by one streaming pass. */
  aggregates(filter: string | null = null): Promise<ItemAggregate[]> {
    return this.scanEvents({ columns: SUMMARY_SCAN_COLUMNS, filter }, () => new SummaryVisitor());
  }

  /** A blob's bytes by its event id, as the snapshot holds it. */
  loadBlob(eventId: string): Promise<Uint8Array> {
    return this.read(async () => {
      const tables = (await Promise.all([this.base(), this.tail()])).filter((t): t is Table => t !== null);
      const bytes = await blobIn(tables, eventId, this.tombstones);
      if (bytes === null) throw new NotFoundError(`no event ${eventId} in snapshot ${JSON.stringify(this.name)} of ${this.uri}`);
      return bytes;
    });
  }

  /**
   * The snapshot's base as `stats()` shows a base (at the tagged version), and no shards: its
   * unmerged rows are in its tail (`record.tailRows`).
   */
  stats(): Promise<LogStats> {
    return this.read(async () => {
      const base = await this.base();
      const s = base ? await base.stats() : null;
      return {
        uri: this.uri,
        base: base && s ? { version: await base.version(), rows: s.numRows, fragments: s.fragmentStats.numFragments, indexes: (await base.listIndices()).map((i) => i.name) } : { version: 0, rows: 0, fragments: 0, indexes: [] },
        shards: [],
        hint: null,
      };
    });
  }
}
