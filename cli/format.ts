/** Human-readable renderings for the CLI (the --json forms print the API objects as they are). */
import { shardLabel, type FailureSummary, type ItemSummary, type LogStats, type SearchHit, type SnapshotInfo, type SnapshotResult } from '../lib/api.ts';
import { formatDuration } from '../lib/duration.ts';
import { checkpointLabel, describeThreadField, isThreadCursor, summarizeThread } from '../lib/langgraph/view.ts';
import type { SlotWait } from '../lib/lease/slots.ts';
import { isTextIndexName } from '../lib/log/text-index.ts';
import type { Cursor, ItemState, TrajectoryEvent } from '../lib/types.ts';
import { describeFailure, preview } from './preview.ts';

export function formatCursor(c: Cursor | null): string {
  if (!c) return '-';
  if (isThreadCursor(c)) return `LangGraph ${checkpointLabel(c.stepInstanceId)}`;
  const it = c.iteration !== null ? `#${c.iteration}` : '';
  const idx = c.stepIndex !== null ? `${c.stepIndex}:` : '';
  return `${idx}${c.stepName ?? '?'}${it} (attempt ${c.attempt})`;
}

function table(rows: string[][]): string {
  if (rows.length === 0) return '';
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}

/** `names`: display names of some items (LangGraph threads: cli/threads.ts), shown after the cursor. */
export function formatItems(items: ItemSummary[], names: ReadonlyMap<string, string> = new Map()): string {
  if (items.length === 0) return '(no items)';
  const cursor = (i: ItemSummary) => {
    const name = names.get(i.itemId);
    return name ? `${name}, ${formatCursor(i.cursor).replace(/^LangGraph /, '')}` : formatCursor(i.cursor);
  };
  return table([['ITEM', 'STATUS', 'CURSOR', 'LAST_SEQ'], ...items.map((i) => [i.itemId, i.status, cursor(i), String(i.lastSeq)])]);
}

/** `2026-12-04 18:53:03.123` of an event's ISO time (UTC, to the millisecond). */
function shortTime(iso: string): string {
  return iso.replace('T', ' ').replace(/(\.\d{3})\d*Z$/, '$1').replace(/Z$/, '');
}

/** A step instance id that says nothing the step column does not (the default: the name, `#iteration`). */
const plainInstance = (e: TrajectoryEvent) => e.stepInstanceId === e.stepName || e.stepInstanceId === `${e.stepName}#${e.iteration}`;

export function formatTrajectory(events: TrajectoryEvent[]): string {
  const rows = events.map((e) => {
    const step = e.stepName ? `${e.stepIndex !== undefined ? `${e.stepIndex}:` : ''}${e.stepName}${e.iteration !== undefined ? `#${e.iteration}` : ''}` : '';
    let detail = '';
    if (e.fieldName) detail = `${describeThreadField(e.fieldName) ?? e.fieldName} = ${preview(e.value)}`;
    else if (e.eventType === 'FAILED') detail = describeFailure(e).head;
    else if (e.eventType === 'TERMINAL') detail = e.terminal ?? '';
    else if (e.eventType === 'STEP_COMPLETED' && e.stepInstanceId && !plainInstance(e)) detail = checkpointLabel(e.stepInstanceId) ?? `instance ${e.stepInstanceId}`;
    return [String(e.itemSeq), shortTime(e.eventTs), e.eventType, step, String(e.attempt), e.writerEpoch, detail];
  });
  return table([['SEQ', 'TIME (UTC)', 'EVENT', 'STEP', 'ATTEMPT', 'WRITER', 'DETAIL'], ...rows]);
}

export function formatFailures(list: FailureSummary[]): string {
  if (list.length === 0) return '(no failed items)';
  return list
    .map((f) => {
      const { head, frame } = describeFailure(f);
      return `${f.itemId}  ${f.stepName ?? '?'} attempt ${f.attempt} (seq ${f.seq}): ${head}${frame ? `\n    ${frame}` : ''}`;
    })
    .join('\n');
}

/** An item's state for a person: values as previews, a LangGraph thread's fields summarised. */
export function formatFold(s: ItemState): string {
  const thread = isThreadCursor(s.cursor) ? summarizeThread(s.fields) : null;
  const name = thread ? `LangGraph thread${thread.threadId !== null ? ` ${JSON.stringify(thread.threadId)}` : ''}` : null;
  const lines = [
    `item        ${s.itemId}${name ? `  (${name})` : ''}`,
    `status      ${s.status}`,
    `cursor      ${formatCursor(s.cursor)}`,
    `lineage     root ${s.rootItemId ?? '-'}, parent ${s.parentItemId ?? '-'}`,
    `attempts    ${s.attempts}, last seq ${s.lastSeq}`,
  ];
  const fields = Object.keys(s.fields).sort();
  if (thread) {
    const nss = thread.namespaces.map((n) => JSON.stringify(n)).join(', ');
    lines.push(
      `thread      ${thread.checkpoints} checkpoints (namespaces ${nss}; latest ${thread.latest}), ${thread.values} channel values (${thread.channels.join(', ') || 'none'}), ${thread.writes} pending writes; --json for the records`,
    );
    if (thread.others.length > 0) lines.push(`fields      (${thread.others.length} more)`, ...fieldLines(s, thread.others.sort()));
  } else {
    lines.push(`fields      ${fields.length === 0 ? 'none' : `(${fields.length})`}`, ...fieldLines(s, fields));
  }
  lines.push(`failures    ${s.failures.length === 0 ? 'none' : `(${s.failures.length})`}`);
  for (const f of s.failures) {
    const { head, frame } = describeFailure(f);
    lines.push(`  seq ${f.seq}  ${f.stepName ?? '?'} attempt ${f.attempt}: ${head}${frame ? `\n      ${frame}` : ''}`);
  }
  lines.push(`violations  ${s.violations.length === 0 ? 'none' : `(${s.violations.length})`}`);
  for (const v of s.violations) lines.push(`  seq ${v.seq}  ${v.kind}: ${v.message}`);
  return lines.join('\n');
}

function fieldLines(s: ItemState, names: string[]): string[] {
  const width = Math.min(32, Math.max(0, ...names.map((n) => n.length)));
  return names.map((n) => `  ${n.padEnd(width)}  ${preview(s.fields[n], 100)}`);
}

export function formatStats(s: LogStats, snapshots?: readonly SnapshotInfo[]): string {
  const lines = [
    `log      ${s.uri}`,
    `base     version ${s.base.version}, ${s.base.rows} rows, ${s.base.fragments} fragments, indexes: ${indexesText(s.base.indexes)}`,
    `shards   ${s.shards.length === 0 ? 'none unmerged' : ''}`,
  ];
  for (const sh of s.shards) lines.push(`  ${sh.name}  v${sh.version}  ${sh.rows} rows  ${shardLabel(sh)}`);
  if (snapshots) {
    lines.push(`snapshots${snapshots.length === 0 ? ' none' : ''}`);
    if (snapshots.length > 0) lines.push(...formatSnapshots(snapshots).split('\n').map((l) => `  ${l}`));
  }
  if (s.hint) lines.push(`note     ${s.hint}`);
  return lines.join('\n');
}

/** The base's indexes, the full-text ones (search) named as such. */
function indexesText(names: readonly string[]): string {
  const text = names.filter(isTextIndexName);
  const other = names.filter((n) => !isTextIndexName(n));
  return `${other.join(', ') || 'none'}${text.length > 0 ? `; full-text (search): ${text.join(', ')}` : ''}`;
}

/** Matching events as a table; the snippet last (it is the long column). */
export function formatSearch(hits: readonly SearchHit[]): string {
  if (hits.length === 0) return '(no matching events)';
  return table([['ITEM', 'SEQ', 'EVENT', 'FIELD/ERROR', 'SNIPPET'], ...hits.map((h) => [h.itemId, String(h.seq), h.eventType, h.field ?? h.errorType ?? '', h.snippet])]);
}

/** One line per snapshot: name, when, base version, unmerged rows copied, events. */
export function formatSnapshots(list: readonly SnapshotInfo[]): string {
  if (list.length === 0) return 'no snapshots';
  return table(list.map((x) => [x.name, new Date(x.createdAtMs).toISOString(), x.baseVersion === null ? 'no base' : `base v${x.baseVersion}`, `${x.tailRows} unmerged rows`, `${x.events} events`]));
}

/** What `dgcl snapshot --name` did. */
export function formatSnapshot(r: SnapshotResult): string {
  const what = `${r.baseVersion === null ? 'no base' : `base version ${r.baseVersion}`} + ${r.tailRows} unmerged rows, ${r.events} events`;
  return r.created ? `snapshot ${r.name} taken: ${what}` : `snapshot ${r.name} already holds this state (taken ${new Date(r.createdAtMs).toISOString()}): ${what}`;
}

/** The line a writer prints while it waits for a slot: who holds the slots, until when. */
export function formatSlotWait(w: SlotWait, nowMs: number): string {
  const at = (ms: number) => `${new Date(ms).toISOString()} (in ${Math.max(0, Math.ceil((ms - nowMs) / 1000))} s)`;
  const what = w.slot === null ? `all ${w.slots} writer slots of ${w.pipeline}/${w.experiment} are held` : `writer slot ${w.slot} of ${w.pipeline}/${w.experiment} is held`;
  const holders = w.holders.map((h) => `slot ${h.slot}: ${h.owner} until ${new Date(h.expiresAtMs).toISOString()}`).join('; ');
  const first = w.firstFreeAtMs === null ? '' : `; the first frees at ${at(w.firstFreeAtMs)} unless renewed`;
  return `waiting for a writer slot: ${what} (${holders})${first}; giving up at ${at(w.untilMs)}`;
}

/** One row of `dgcl resume`: a stalled item, and what became of it with --send. */
export interface StalledRow {
  itemId: string;
  status: string;
  cursor: Cursor | null;
  lastEventAt: string;
  idleMs: number;
  /** Absent without --send. */
  sent?: boolean;
  reason?: string;
  error?: { code: string; message: string };
}

/** A block of `dgcl resume` rows (a long sweep prints several, the header on the first). */
export function formatStalled(rows: readonly StalledRow[], header: boolean): string {
  const sending = rows.some((r) => r.sent !== undefined);
  const sent = (r: StalledRow) => (r.sent ? 'yes' : `no: ${r.reason ?? '?'}${r.error ? ` (${r.error.code}: ${r.error.message})` : ''}`);
  const body = rows.map((r) => [r.itemId, r.status, formatCursor(r.cursor), shortTime(r.lastEventAt), formatDuration(r.idleMs), ...(sending ? [sent(r)] : [])]);
  const head = ['ITEM', 'STATUS', 'CURSOR', 'LAST EVENT (UTC)', 'IDLE', ...(sending ? ['SENT'] : [])];
  const text = table([head, ...body]);
  return header ? text : text.slice(text.indexOf('\n') + 1);
}
