/**
 * What the export and the report read (lib/export/, lib/report/): a log's current state
 * (`LanceCheckpointLog`) or a snapshot's (lib/log/snapshot/view.ts).
 */
import type { LogStats } from '../../api.ts';
import type { SelectSource } from './selected.ts';

export interface EventSource extends SelectSource {
  readonly uri: string;
  loadBlob(eventId: string): Promise<Uint8Array>;
  stats(): Promise<LogStats>;
}
