/**
 * A fresh process for the S3 bench's cold reads: nothing cached, no connection open. The parent
 * (bench/s3.ts) counts this process's requests at its proxy (AWS_ENDPOINT_URL_S3 points there)
 * and reads one JSON result line: the time from opening to having the item's rows.
 *
 *   s3-child.ts fold <root> <pipeline> <experiment> <itemId>   # openLog + fold
 *   s3-child.ts lance <datasetParentUri> <tableName> <itemId>  # lancedb connect + openTable + query
 */
import * as lancedb from '@lancedb/lancedb';
import { openLog } from '../lib/index.ts';
import { lanceStorageOptions, parseRoot } from '../lib/storage/location.ts';

export interface ColdResult {
  ms: number;
  rows: number;
}

const [mode, a, b, c, d] = process.argv.slice(2);
let out: ColdResult;
if (mode === 'fold') {
  const t = performance.now();
  const log = await openLog({ root: a!, pipeline: b!, experiment: c! });
  const st = await log.fold(d!);
  out = { ms: performance.now() - t, rows: st.lastSeq };
  await log.close();
} else if (mode === 'lance') {
  const t = performance.now();
  const db = await lancedb.connect(a!, { storageOptions: lanceStorageOptions(parseRoot(a!)) });
  const table = await db.openTable(b!);
  const got = await table.query().where(`item_id = '${c!}'`).toArrow();
  out = { ms: performance.now() - t, rows: got.numRows };
  table.close();
} else {
  throw new Error(`s3-child: unknown mode ${JSON.stringify(mode)}`);
}
process.stdout.write(`result ${JSON.stringify(out)}\n`);
