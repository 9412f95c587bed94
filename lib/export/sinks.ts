/**
 * Row writers of an export: JSON Lines (one object per item, values as fold shows them) and
 * Parquet (hyparquet-writer, one row group per buffered block of rows, so memory stays bounded).
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { ParquetWriter, fileWriter } from 'hyparquet-writer';
import type { ColumnSource } from 'hyparquet-writer';
import type { OutputValue } from '../types.ts';
import { FIXED_COLUMNS, parquetCell, type ColumnType, type FieldColumn } from './columns.ts';

export interface ExportRow {
  itemId: string;
  rootItemId: string | null;
  parentItemId: string | null;
  status: string;
  attempts: number;
  fields: Record<string, OutputValue | undefined>;
}

export interface Sink {
  write(row: ExportRow): Promise<void> | void;
  close(): Promise<void> | void;
}

/** Rows per Parquet row group (and the most rows held before one is written). */
const ROW_GROUP = 10_000;
/** Bytes of JSON Lines buffered before one write. */
const JSONL_BUFFER = 1 << 20;

export class JsonlSink implements Sink {
  private readonly fd: number;
  private buf: string[] = [];
  private size = 0;

  constructor(
    file: string,
    private readonly fields: readonly FieldColumn[],
  ) {
    this.fd = openSync(file, 'w');
  }

  write(row: ExportRow): void {
    const o: Record<string, unknown> = { item_id: row.itemId, root_item_id: row.rootItemId, parent_item_id: row.parentItemId, status: row.status, attempts: row.attempts };
    for (const f of this.fields) o[f.name] = row.fields[f.name] ?? null;
    const line = `${JSON.stringify(o)}\n`;
    this.buf.push(line);
    this.size += line.length;
    if (this.size >= JSONL_BUFFER) this.flush();
  }

  private flush(): void {
    if (this.buf.length) writeSync(this.fd, this.buf.join(''));
    this.buf = [];
    this.size = 0;
  }

  close(): void {
    try {
      this.flush();
    } finally {
      closeSync(this.fd);
    }
  }
}

type Schema = ConstructorParameters<typeof ParquetWriter>[0]['schema'];

const SCHEMA_OF: Record<ColumnType, Omit<Schema[number], 'name'>> = {
  STRING: { type: 'BYTE_ARRAY', converted_type: 'UTF8' },
  JSON: { type: 'BYTE_ARRAY', converted_type: 'JSON' },
  INT32: { type: 'INT32' },
  INT64: { type: 'INT64' },
  DOUBLE: { type: 'DOUBLE' },
  BOOLEAN: { type: 'BOOLEAN' },
};

const FIXED_TYPES: Record<(typeof FIXED_COLUMNS)[number], [ColumnType, boolean]> = {
  item_id: ['STRING', true],
  root_item_id: ['STRING', false],
  parent_item_id: ['STRING', false],
  status: ['STRING', true],
  attempts: ['INT32', true],
};

export class ParquetSink implements Sink {
  private readonly writer: ParquetWriter;
  private readonly cols: { name: string; type: ColumnType; required: boolean }[];
  private block: unknown[][];
  private rows = 0;

  constructor(
    file: string,
    private readonly fields: readonly FieldColumn[],
  ) {
    this.cols = [
      ...FIXED_COLUMNS.map((name) => ({ name, type: FIXED_TYPES[name][0], required: FIXED_TYPES[name][1] })),
      ...fields.map((f) => ({ name: f.name, type: f.type, required: false })),
    ];
    const schema: Schema = [
      { name: 'root', num_children: this.cols.length },
      ...this.cols.map((c) => ({ name: c.name, ...SCHEMA_OF[c.type], repetition_type: c.required ? ('REQUIRED' as const) : ('OPTIONAL' as const) })),
    ];
    this.writer = new ParquetWriter({ writer: fileWriter(file), schema, createdBy: 'datagen-checkpoint-log' });
    this.block = this.cols.map(() => []);
  }

  async write(row: ExportRow): Promise<void> {
    const fixed = [row.itemId, row.rootItemId, row.parentItemId, row.status, row.attempts];
    for (let i = 0; i < fixed.length; i++) this.block[i]!.push(fixed[i]);
    this.fields.forEach((f, j) => this.block[fixed.length + j]!.push(parquetCell(row.fields[f.name], f.type)));
    if (++this.rows >= ROW_GROUP) await this.flush();
  }

  private async flush(): Promise<void> {
    if (this.rows === 0) return;
    const columnData = this.cols.map((c, i) => ({ name: c.name, data: this.block[i]!, type: c.type, nullable: !c.required }) as ColumnSource);
    await this.writer.write({ columnData, rowGroupSize: this.rows });
    this.block = this.cols.map(() => []);
    this.rows = 0;
  }

  async close(): Promise<void> {
    await this.flush();
    await this.writer.finish();
  }
}
