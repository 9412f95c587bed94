/** One event row with every column set (an int FIELD_SET), for schema and encoding tests. */
import type { EventRow } from '../../lib/types.ts';

export function fullRow(over: Partial<EventRow> = {}): EventRow {
  return {
    event_id: 'e1', item_id: 'i', root_item_id: 'i', parent_item_id: null, item_seq: 1, checkpoint_id: 'c',
    event_type: 'FIELD_SET', step_name: 's', step_index: 2, step_instance_id: null, iteration: 0, attempt: 1,
    run_id: 'r', writer_epoch: 's00-e000001', field_name: 'f', field_type: 'dgcl.int64', codec_version: 1,
    value_kind: 'int', value_i64: -(2n ** 63n), value_f64: null, value_bool: null, value_str: null, value_json: null,
    value_blob: null, payload_size: null, payload_checksum: null, query_tags_json: null, terminal: null,
    error_type: null, error_dump: null, traceback: null, event_ts: 1_700_000_000_123_456, schema_version: 1,
    ...over,
  };
}
