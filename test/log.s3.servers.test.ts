import { randomUUID } from 'node:crypto';
import { logStoreConformance } from './conformance/log.ts';
import { servers, useLeaseTable } from './support/servers.ts';

const { bucket } = servers;
const table = useLeaseTable();

logStoreConformance('s3:// root on Ceph RGW, leases on DynamoDB Local', {
  newRoot: async () => ({ root: `s3://${bucket}/log-suite-${randomUUID().slice(0, 8)}`, env: { DGCL_LEASE_TABLE: table } }),
});
