/**
 * A process of test/coord.sqlite.test.ts's race: opens the store, says "ready", waits for "go",
 * then claims keys race-0..N-1 (from its own quarter on, wrapping) one turn at a time (each turn its own transaction) and prints the
 * keys it won.
 */
import { createInterface } from 'node:readline';
import { SqliteCoordStore } from '../../lib/coord/sqlite.ts';
import { claimKey } from '../../lib/log/layout.ts';

const [dir, p, n] = process.argv.slice(2);
const store = await SqliteCoordStore.open(dir!, { create: false });
process.stdout.write('ready\n');
const rl = createInterface({ input: process.stdin });
for await (const line of rl) if (line.trim() === 'go') break;
rl.close();
const won: number[] = [];
// Each process starts at its own quarter, so the processes meet on every key whatever their speed.
for (let i = 0; i < Number(n); i++) {
  const k = (i + Number(p) * Math.floor(Number(n) / 4)) % Number(n);
  if (await store.putIfAbsent(claimKey(`race-${k}`), `process ${p}`, { expiresAfterMs: 3_600_000 })) won.push(k);
}
store.close();
process.stdout.write(`${JSON.stringify({ won })}\n`);
