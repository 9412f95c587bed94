/**
 * Frees a record batch's memory as soon as a whole-log pass is done with it, instead of when V8
 * next collects garbage.
 *
 * Why: LanceDB hands each batch over as its own Arrow IPC buffer, memory outside the V8 heap. A
 * pass keeps little on the heap, so V8 collects rarely and lets those dead buffers pile up before
 * it does, a large share of items()'s peak resident memory (docs/design/performance.md, "Memory
 * of whole-log reads"). Detaching the buffer (`ArrayBuffer.prototype.transfer(0)`) gives its memory
 * back at once. A host cannot be asked to run with V8 flags; this needs none.
 *
 * Only for batches nothing else views: every visitor copies out what it keeps (lib/log/read/stream.ts,
 * EventVisitor), and LanceDB decodes each batch from a buffer of its own.
 */
import type * as arrow from 'apache-arrow';

interface DataLike {
  values?: ArrayBufferView | null;
  valueOffsets?: ArrayBufferView | null;
  nullBitmap?: ArrayBufferView | null;
  typeIds?: ArrayBufferView | null;
  children?: readonly DataLike[];
  dictionary?: { data: readonly DataLike[] } | null;
}

type Detachable = ArrayBuffer & { transfer?(length: number): ArrayBuffer; readonly detached?: boolean };

/** The distinct buffers under a batch's columns (nested columns and dictionaries included). */
function buffersOf(d: DataLike, out: Set<ArrayBufferLike>): void {
  for (const view of [d.values, d.valueOffsets, d.nullBitmap, d.typeIds]) if (view && view.byteLength > 0) out.add(view.buffer);
  for (const c of d.children ?? []) buffersOf(c, out);
  for (const c of d.dictionary?.data ?? []) buffersOf(c, out);
}

/**
 * Detach every buffer under `b`: its columns read as empty afterwards, so call it only once
 * nothing reads `b` again. Buffers that cannot be detached are left to the garbage collector.
 */
export function releaseBatch(b: arrow.RecordBatch): void {
  const buffers = new Set<ArrayBufferLike>();
  buffersOf(b.data as unknown as DataLike, buffers);
  for (const buf of buffers) {
    const ab = buf as Detachable;
    if (!(ab instanceof ArrayBuffer) || typeof ab.transfer !== 'function' || ab.detached === true) continue;
    try {
      ab.transfer(0);
    } catch {
      // Not detachable (a host may pin buffers it shares): the collector frees it as before.
    }
  }
}
