import { randomUUID } from 'node:crypto';
import { stepsConformance } from './conformance/steps.ts';
import { servers, useLeaseTable } from './support/servers.ts';

const { bucket } = servers;
const table = useLeaseTable();

stepsConformance('s3:// root on Ceph RGW, leases on DynamoDB Local', {
  newRoot: async () => ({ root: `s3://${bucket}/steps-suite-${randomUUID().slice(0, 8)}`, env: { DGCL_LEASE_TABLE: table } }),
});
