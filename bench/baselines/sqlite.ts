/**
 * Baseline: SQLite through `node:sqlite` (built into Node 22, no dependency), one table with the
 * project's 33 columns, WAL + synchronous=FULL, one transaction per batch.
 */
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { COLUMN_NAMES, SUMMARY_COLUMNS } from '../../lib/schema.ts';
import type { EventRow } from '../../lib/types.ts';

const INTEGER = new Set(['item_seq', 'step_index', 'iteration', 'attempt', 'codec_version', 'value_i64', 'value_bool', 'payload_size', 'event_ts', 'schema_version']);
const REAL = new Set(['value_f64']);
const BLOB = new Set(['value_blob']);

function sqlType(c: string): string {
  return INTEGER.has(c) ? 'INTEGER' : REAL.has(c) ? 'REAL' : BLOB.has(c) ? 'BLOB' : 'TEXT';
}

type Param = null | number | bigint | string | Uint8Array;

export class SqliteLog {
  readonly db: DatabaseSync;
  private readonly insert: StatementSync;

  constructor(file: string) {
    this.db = new DatabaseSync(file);
    this.db.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=60000;');
    this.db.exec(
      `CREATE TABLE IF NOT EXISTS events (${COLUMN_NAMES.map((c) => `${c} ${sqlType(c)}`).join(', ')}, PRIMARY KEY (item_id, item_seq)) WITHOUT ROWID`,
    );
    this.db.exec('CREATE UNIQUE INDEX IF NOT EXISTS events_event_id ON events (event_id)');
    this.insert = this.db.prepare(`INSERT INTO events (${COLUMN_NAMES.join(', ')}) VALUES (${COLUMN_NAMES.map(() => '?').join(', ')})`);
  }

  /** One transaction per batch (BEGIN IMMEDIATE so concurrent processes queue on the lock). */
  addBatch(rows: readonly EventRow[]): void {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      for (const r of rows) this.insert.run(...COLUMN_NAMES.map((c) => toParam(r[c])));
      this.db.exec('COMMIT');
    } catch (e) {
      this.db.exec('ROLLBACK');
      throw e;
    }
  }

  /** The rows of one item, in sequence order, as EventRows. */
  item(itemId: string): EventRow[] {
    return this.db
      .prepare('SELECT * FROM events WHERE item_id = ? ORDER BY item_seq')
      .all(itemId)
      .map((r) => fromRecord(r as Record<string, Param>));
  }

  /**
   * Every row in (item, seq) order, one at a time (the iterator keeps memory flat), with the
   * columns item listings read (SUMMARY_COLUMNS, as `items()` does); the others come back null.
   */
  *scan(): Generator<EventRow> {
    const cols = SUMMARY_COLUMNS.join(', ');
    const blank = Object.fromEntries(COLUMN_NAMES.filter((c) => !SUMMARY_COLUMNS.includes(c)).map((c) => [c, null]));
    for (const r of this.db.prepare(`SELECT ${cols} FROM events ORDER BY item_id, item_seq`).iterate()) {
      Object.assign(r, blank);
      yield fromRecord(r as Record<string, Param>);
    }
  }

  /** Fold the WAL into the main file so the file size is the data's. */
  checkpoint(): void {
    this.db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  }

  close(): void {
    this.db.close();
  }
}

function toParam(v: unknown): Param {
  if (v === undefined || v === null) return null;
  if (typeof v === 'boolean') return v ? 1 : 0;
  return v as Param;
}

function fromRecord(r: Record<string, Param>): EventRow {
  const o: Record<string, unknown> = { ...r };
  if (o.value_i64 !== null) o.value_i64 = BigInt(o.value_i64 as number);
  if (o.value_bool !== null) o.value_bool = o.value_bool === 1;
  return o as unknown as EventRow;
}
