/** Human-readable renderings for the CLI (the --json forms print the API objects as they are). */
import type { FailureSummary, ItemSummary, LogStats } from '../lib/api.ts';
import type { SlotWait } from '../lib/lease/slots.ts';
import { shardLabel } from '../lib/log/stats.ts';
import type { Cursor, TrajectoryEvent } from '../lib/types.ts';

export function formatCursor(c: Cursor | null): string {
  if (!c) return '-';
  const it = c.iteration !== null ? `#${c.iteration}` : '';
  const idx = c.stepIndex !== null ? `${c.stepIndex}:` : '';
  return `${idx}${c.stepName ?? '?'}${it} (attempt ${c.attempt})`;
}

function table(rows: string[][]): string {
  if (rows.length === 0) return '';
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}

export function formatItems(items: ItemSummary[]): string {
  if (items.length === 0) return '(no items)';
  return table([['ITEM', 'STATUS', 'CURSOR', 'LAST_SEQ'], ...items.map((i) => [i.itemId, i.status, formatCursor(i.cursor), String(i.lastSeq)])]);
}

export function formatTrajectory(events: TrajectoryEvent[]): string {
  return table(
    events.map((e) => {
      const step = e.stepName ? `${e.stepName}${e.iteration !== undefined ? `#${e.iteration}` : ''} a${e.attempt}` : '';
      let detail = '';
      if (e.fieldName) detail = `${e.fieldName} = ${JSON.stringify(e.value)}`;
      else if (e.eventType === 'FAILED') detail = `${e.errorType ?? ''}`;
      else if (e.eventType === 'TERMINAL') detail = e.terminal ?? '';
      if (detail.length > 100) detail = `${detail.slice(0, 97)}...`;
      return [String(e.itemSeq), e.eventType, step, e.writerEpoch, detail];
    }),
  );
}

export function formatFailures(list: FailureSummary[]): string {
  if (list.length === 0) return '(no failed items)';
  return list
    .map((f) => {
      const tb = f.traceback ? `\n    ${f.traceback.split('\n').slice(-3).join('\n    ')}` : '';
      return `${f.itemId}  ${f.stepName ?? '?'} attempt ${f.attempt}: ${f.errorType ?? 'error'} (seq ${f.seq})${tb}`;
    })
    .join('\n');
}

export function formatStats(s: LogStats): string {
  const lines = [
    `log      ${s.uri}`,
    `base     version ${s.base.version}, ${s.base.rows} rows, ${s.base.fragments} fragments, indexes: ${s.base.indexes.join(', ') || 'none'}`,
    `shards   ${s.shards.length === 0 ? 'none unmerged' : ''}`,
  ];
  for (const sh of s.shards) lines.push(`  ${sh.name}  v${sh.version}  ${sh.rows} rows  ${shardLabel(sh)}`);
  if (s.hint) lines.push(`note     ${s.hint}`);
  return lines.join('\n');
}

/** The line a writer prints while it waits for a slot: who holds the slots, until when. */
export function formatSlotWait(w: SlotWait, nowMs: number): string {
  const at = (ms: number) => `${new Date(ms).toISOString()} (in ${Math.max(0, Math.ceil((ms - nowMs) / 1000))} s)`;
  const what = w.slot === null ? `all ${w.slots} writer slots of ${w.pipeline}/${w.experiment} are held` : `writer slot ${w.slot} of ${w.pipeline}/${w.experiment} is held`;
  const holders = w.holders.map((h) => `slot ${h.slot}: ${h.owner} until ${new Date(h.expiresAtMs).toISOString()}`).join('; ');
  const first = w.firstFreeAtMs === null ? '' : `; the first frees at ${at(w.firstFreeAtMs)} unless renewed`;
  return `waiting for a writer slot: ${what} (${holders})${first}; giving up at ${at(w.untilMs)}`;
}
