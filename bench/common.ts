/** Helpers shared by the bench sections: batches, rows, percentiles, allocated disk size. */
import { readdirSync, readFileSync, lstatSync } from 'node:fs';
import path from 'node:path';
import { parseBatch, toRows } from '../lib/batch.ts';
import type { EventRow } from '../lib/types.ts';

export const now = (): number => performance.now();

export function pct(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** A 10-event batch: create + 8 fields + step completion. */
export function newItemBatch(itemId: string): Record<string, unknown> {
  return { itemId, runId: 'bench', create: {}, step: { name: 'gen', index: 0 }, set: fields(itemId) };
}

/** A 10-event batch for an item that already exists: 8 fields, a step start and its completion. */
export function ownedItemBatch(itemId: string, step: number): Record<string, unknown> {
  return { itemId, runId: 'bench', step: { name: 'gen', index: step }, set: fields(itemId), append: { log: [step] } };
}

function fields(itemId: string): Record<string, unknown> {
  const set: Record<string, unknown> = {};
  for (let f = 0; f < 8; f++) set[`f${f}`] = f % 2 ? f * 1.5 : `value ${f} of ${itemId}`;
  return set;
}

/** The rows a batch becomes, with unique event ids (for the baselines that store rows directly). */
export function rowsOf(batch: Record<string, unknown>, tag: string | number): EventRow[] {
  const b = parseBatch(batch);
  // A batch for an existing item names no root: the item is its own root here.
  const rows = toRows(b, { firstSeq: 1, writerEpoch: 's00-e000001', eventTsUs: Date.now() * 1000, rootItemId: b.itemId });
  return rows.map((r) => ({ ...r, event_id: `${r.event_id}-${tag}` }));
}

export const PER_ITEM = 50;

export function itemName(k: number): string {
  return `item-${String(k).padStart(8, '0')}`;
}

/**
 * Rows [start, end) of a synthetic log of 50-event items (create, 48 appended values, step
 * completion), generated in chunks so a 10^7 log never sits in memory at once.
 */
export function bulkRows(start: number, end: number): EventRow[] {
  const rows: EventRow[] = [];
  for (let k = start; k < end; k += PER_ITEM) {
    const itemId = itemName(k / PER_ITEM);
    const b = parseBatch({
      itemId,
      runId: 'bench',
      create: {},
      step: { name: 's', index: 0 },
      append: { m: Array.from({ length: PER_ITEM - 2 }, (_, j) => j) },
    });
    rows.push(...toRows(b, { firstSeq: 1, writerEpoch: 's00-e000001', eventTsUs: Date.now() * 1000 }));
  }
  return rows;
}

/** Allocated bytes under a path, like `du`: st_blocks * 512, symlinks not followed. */
export function allocatedBytes(p: string): number {
  const st = lstatSync(p);
  let total = st.blocks * 512;
  if (st.isDirectory()) for (const e of readdirSync(p)) total += allocatedBytes(path.join(p, e));
  return total;
}

/** Count of files under a path. */
export function fileCount(p: string): number {
  const st = lstatSync(p);
  if (!st.isDirectory()) return 1;
  let n = 0;
  for (const e of readdirSync(p)) n += fileCount(path.join(p, e));
  return n;
}

/** Run `work` with `inFlight` concurrent loops pulling batch numbers 0..count-1. */
export async function pool(count: number, inFlight: number, work: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

/**
 * Peak resident set of this process, bytes (VmHWM). Not `process.resourceUsage().maxRSS`: Linux
 * keeps that across exec, so a child reports its parent's peak if that was higher at fork.
 */
export function peakRssBytes(): number {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
  if (!m) throw new Error('bench: no VmHWM in /proc/self/status');
  return Number(m[1]) * 1024;
}
