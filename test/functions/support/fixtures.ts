/** Roots, batches and contexts shared by the handler tests. */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Context } from 'aws-lambda';
import { lambdaContext } from '../../../functions/shared/events.ts';

export { createBatch, stepBatch } from '../../support/batches.ts';

/** A fresh local root (file://), set as DGCL_ROOT. Returns its folder. */
export function freshFileRoot(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'dgcl-fn-'));
  process.env.DGCL_ROOT = `file://${dir}`;
  delete process.env.DGCL_LEASE_TABLE;
  return dir;
}

export const uniq = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

/** A Lambda context with `timeoutMs` left (default: a 60 s function, as infra/stack.ts sizes append). */
export function ctx(name = 'dgcl-test', timeoutMs = 60_000): Context {
  return lambdaContext(name, timeoutMs);
}

/** Calls a middy handler the way the Lambda runtime does (event, context). */
export type Invoke = (event: unknown, context: Context) => Promise<unknown>;

/** The error a handler invocation threw (fails the test if it resolved). */
export async function thrown(p: Promise<unknown>): Promise<Error & { code?: string; field?: string }> {
  try {
    await p;
  } catch (e) {
    return e as Error & { code?: string; field?: string };
  }
  throw new Error('expected the invocation to fail, it succeeded');
}
