// LangGraph's validation suite, unchanged, against the saver on an s3:// root (Ceph RGW, leases
// on DynamoDB Local). Project `langgraph` (vitest.config.ts); `npm run test:langgraph`.
import { randomUUID } from 'node:crypto';
import { validate } from '@langchain/langgraph-checkpoint-validation';
import { DgclCheckpointSaver } from '../../lib/langgraph/index.ts';
import { servers, useLeaseTable } from '../support/servers.ts';

const table = useLeaseTable('dgcl-langgraph');
const root = `s3://${servers.bucket}/langgraph-validate-${randomUUID().slice(0, 8)}`;
let n = 0;

validate({
  checkpointerName: 'DgclCheckpointSaver (s3:// root on RGW)',
  createCheckpointer: () =>
    new DgclCheckpointSaver({ root, pipeline: 'langgraph-validate', experiment: `e${++n}`, env: { ...process.env, DGCL_LEASE_TABLE: table } }),
  destroyCheckpointer: (saver) => saver.close(),
});
