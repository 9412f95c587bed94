/**
 * The export's columns: five fixed ones, then one per chosen field, each with the Parquet type
 * its values allow (from the value kinds the first pass saw) and the conversion of a folded value
 * (lib/fold.ts's OutputValue) into it. Fields whose values mix kinds, hold JSON or were appended
 * to are JSON text; a blob field is its `$blobRef` as JSON, or the written file's path (--blobs).
 */
import { InvalidInputError } from '../errors.ts';
import type { OutputValue } from '../types.ts';
import type { FieldKinds } from './plan.ts';

export const FIXED_COLUMNS = ['item_id', 'root_item_id', 'parent_item_id', 'status', 'attempts'] as const;

export type ColumnType = 'STRING' | 'INT32' | 'INT64' | 'DOUBLE' | 'BOOLEAN' | 'JSON';

export interface FieldColumn {
  name: string;
  type: ColumnType;
  blob: boolean;
}

export function fieldColumns(names: readonly string[], kinds: Map<string, FieldKinds>, blobFiles: boolean): FieldColumn[] {
  return names.map((name) => {
    if ((FIXED_COLUMNS as readonly string[]).includes(name)) {
      throw new InvalidInputError(`field ${JSON.stringify(name)} has the name of a fixed export column (${FIXED_COLUMNS.join(', ')}); leave it out with --fields`, { field: 'fields' });
    }
    const k = kinds.get(name);
    const set = k ? [...k.kinds] : [];
    const only = (...allowed: string[]) => set.length > 0 && set.every((x) => allowed.includes(x));
    let type: ColumnType = 'JSON';
    let blob = false;
    if (k && !k.appended) {
      if (only('int')) type = 'INT64';
      else if (only('int', 'float')) type = 'DOUBLE';
      else if (only('bool')) type = 'BOOLEAN';
      else if (only('str')) type = 'STRING';
      else if (only('blob')) [type, blob] = [blobFiles ? 'STRING' : 'JSON', true];
    }
    return { name, type, blob };
  });
}

/** A folded value as its Parquet cell. */
export function parquetCell(v: OutputValue | undefined, type: ColumnType): unknown {
  if (v === undefined || v === null) return null;
  switch (type) {
    case 'INT64':
      return typeof v === 'number' ? BigInt(v) : BigInt((v as { $int: string }).$int);
    case 'DOUBLE':
      return typeof v === 'number' ? v : Number((v as { $int: string }).$int);
    case 'BOOLEAN':
    case 'STRING':
      return v;
    default:
      // hyparquet-writer serializes JSON columns itself (JSON.stringify of the cell).
      return v;
  }
}
