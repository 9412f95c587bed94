/**
 * The lease store of an s3:// root with no lease table configured. Reading a log takes no lease
 * (fold, items, trajectory, blob, failures and stats never call the store), so such a root
 * opens and reads; anything that would take a lease (append, maintain) fails with the error
 * naming the missing setting instead of reaching DynamoDB with no table.
 */
import { InvalidInputError } from '../errors.ts';
import type { Lease, LeaseStore } from './types.ts';

export class MissingLeaseStore implements LeaseStore {
  /** The error every use raises (append and maintain raise it before any request, see lib/index.ts). */
  error(): InvalidInputError {
    return new InvalidInputError('an s3:// root needs a DynamoDB lease table to append or maintain: set DGCL_LEASE_TABLE (or pass `leases`); reads need none', {
      field: 'DGCL_LEASE_TABLE',
    });
  }

  acquire(_key: string, _owner: string, _ttlMs: number): Promise<Lease> {
    return Promise.reject(this.error());
  }

  renew(_lease: Lease, _ttlMs: number): Promise<Lease> {
    return Promise.reject(this.error());
  }

  release(_lease: Lease): Promise<void> {
    return Promise.reject(this.error());
  }

  read(_key: string): Promise<Lease | null> {
    return Promise.reject(this.error());
  }

  assertCurrent(_lease: Lease): Promise<void> {
    return Promise.reject(this.error());
  }

  raiseEpoch(_key: string, _epoch: number): Promise<void> {
    return Promise.reject(this.error());
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
