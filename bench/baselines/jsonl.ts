/** Baseline: JSON lines appended to one file, fsync after every batch. */
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import type { EventRow } from '../../lib/types.ts';

const replacer = (_k: string, v: unknown) =>
  typeof v === 'bigint' ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString('base64') : v;

export class JsonLines {
  private readonly fd: number;

  constructor(file: string) {
    this.fd = openSync(file, 'a');
  }

  /** One write and one fsync per batch: the batch is durable when this returns. */
  append(rows: readonly EventRow[]): void {
    writeSync(this.fd, rows.map((r) => JSON.stringify(r, replacer)).join('\n') + '\n');
    fsyncSync(this.fd);
  }

  /** Bulk load without per-batch fsync (for disk-size figures). */
  appendNoSync(rows: readonly EventRow[]): void {
    writeSync(this.fd, rows.map((r) => JSON.stringify(r, replacer)).join('\n') + '\n');
  }

  close(): void {
    fsyncSync(this.fd);
    closeSync(this.fd);
  }
}
