/** Batch fixtures shared by the log tests and the writer process. */
export const itemOf = (i: number) => `k-${String(i).padStart(5, '0')}`;

/** Batch i creates item k-i with (i % 7) + 1 fields, a step completion: (i % 7) + 3 events. */
export function loopBatch(i: number): Record<string, unknown> {
  const set: Record<string, unknown> = {};
  for (let f = 0; f <= i % 7; f++) set[`f${f}`] = f % 2 === 0 ? `v${i}-${f}` : i * 10 + f;
  return { itemId: itemOf(i), runId: 'loop', create: {}, step: { name: 'load', index: 0 }, set };
}
export const loopBatchEvents = (i: number) => (i % 7) + 3;

export function createBatch(itemId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { itemId, runId: 'r1', create: {}, step: { name: 'load', index: 0 }, set: { prompt: `about ${itemId}` }, ...extra };
}

export function stepBatch(itemId: string, index: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { itemId, runId: 'r1', step: { name: `step${index}`, index }, set: { [`out${index}`]: `result ${index} of ${itemId}` }, ...extra };
}
