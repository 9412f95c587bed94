import { randomUUID } from 'node:crypto';
import { itemApiConformance } from './conformance/item-api.ts';
import { servers, useLeaseTable } from './support/servers.ts';

const { bucket } = servers;
const table = useLeaseTable();

itemApiConformance('s3:// root on Ceph RGW, leases on DynamoDB Local', {
  newRoot: async () => ({ root: `s3://${bucket}/item-api-${randomUUID().slice(0, 8)}`, env: { DGCL_LEASE_TABLE: table } }),
});
