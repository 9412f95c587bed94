/** Baseline: a bare LanceDB table in the project's schema, rows added with `add()`. */
import * as lancedb from '@lancedb/lancedb';
import { dataStorageVersion } from '../../lib/log/tables.ts';
import { EVENT_SCHEMA, rowsFromArrow, rowsToArrow } from '../../lib/schema.ts';
import type { EventRow } from '../../lib/types.ts';

export class RawLance {
  private constructor(private readonly table: lancedb.Table) {}

  /** `dir`: a folder or an s3:// URI (then with `storageOptions`, as the log passes them). */
  static async open(dir: string, name = 'events', storageOptions?: Record<string, string>): Promise<RawLance> {
    const db = await lancedb.connect(dir, storageOptions ? { storageOptions } : {});
    // The same file format as the log's tables: the comparison is of the protocol, not the format.
    return new RawLance(await db.createEmptyTable(name, EVENT_SCHEMA, { storageOptions: { new_table_data_storage_version: dataStorageVersion(dir) } }));
  }

  async add(rows: readonly EventRow[]): Promise<void> {
    await this.table.add(rowsToArrow(rows) as never);
  }

  async item(itemId: string): Promise<EventRow[]> {
    return rowsFromArrow(await this.table.query().where(`item_id = '${itemId}'`).toArrow());
  }

  close(): void {
    this.table.close();
  }
}
