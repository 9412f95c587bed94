/** functions/shared: configuration, error mapping, event parsing, time budget, log cache. */
import './support/env.ts';
import { realpathSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { handler as foldHandler } from '../../functions/fold.ts';
import { ConfigurationError, readConfig, requireResumeQueueUrl } from '../../functions/shared/config.ts';
import { summarizeError, toLambdaError } from '../../functions/shared/errors.ts';
import { eventBridgeEvent, sqsEvent } from '../../functions/shared/events.ts';
import { LAMBDA_LAYER_NODE_MODULES, LayerModuleError, layerSearchPaths, resolveLayerModule } from '../../functions/shared/layer.ts';
import { LogCache, logCache } from '../../functions/shared/logs.ts';
import { isEventBridgeEvent, isSqsEvent, parseInput, ResumeMessageSchema } from '../../functions/shared/schemas.ts';
import { beforeDeadline, leaseTtlFor, mapLimit, MIN_LEASE_TTL_MS } from '../../functions/shared/time.ts';
import { CorruptError, InvalidInputError } from '../../lib/errors.ts';
import { createBatch, ctx, freshFileRoot, thrown } from './support/fixtures.ts';

afterAll(async () => {
  await logCache.closeAll();
});

describe('readConfig', () => {
  const cfgError = (env: Record<string, string>, leases = false) => {
    try {
      readConfig(env, { leases });
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigurationError);
      return e as ConfigurationError;
    }
    throw new Error('expected a ConfigurationError');
  };

  it('names the variable at fault', () => {
    expect(cfgError({}).variable).toBe('DGCL_ROOT');
    expect(cfgError({ DGCL_ROOT: 'ftp://x/y' }).variable).toBe('DGCL_ROOT');
    // Only handlers that take leases (append, maintenance) need the table; readers do not.
    expect(cfgError({ DGCL_ROOT: 's3://bucket/prefix' }, true).variable).toBe('DGCL_LEASE_TABLE');
    expect(readConfig({ DGCL_ROOT: 's3://bucket/prefix' }).leaseTable).toBeUndefined();
    expect(cfgError({ DGCL_ROOT: '/tmp/x', DGCL_LEASE_TTL_MS: '-3' }).variable).toBe('DGCL_LEASE_TTL_MS');
    // A deployment mistake, not bad input (openLog alone would call it INVALID_INPUT).
    expect(cfgError({ DGCL_ROOT: '/tmp/x', DGCL_COORDINATION: 'dynamo' }).variable).toBe('DGCL_COORDINATION');
    expect(readConfig({ DGCL_ROOT: '/tmp/x', DGCL_COORDINATION: 'objects' }).root).toBe('/tmp/x');
    const e = cfgError({});
    expect([e.name, e.code, e.retryable]).toEqual(['ConfigurationError', 'INTERNAL', false]);
  });

  it('reads a complete configuration', () => {
    const c = readConfig({ DGCL_ROOT: 's3://bkt/p', DGCL_LEASE_TABLE: 't', DGCL_RESUME_QUEUE_URL: 'https://sqs.us-east-1.amazonaws.com/123456789012/q', DGCL_MERGE_EVERY_MS: '1000' });
    expect(c).toMatchObject({ location: { kind: 's3', bucket: 'bkt', prefix: 'p' }, leaseTable: 't', mergeEveryMs: 1000, leaseTtlMaxMs: 60_000 });
    expect(requireResumeQueueUrl(c)).toBe('https://sqs.us-east-1.amazonaws.com/123456789012/q');
    expect(() => requireResumeQueueUrl(readConfig({ DGCL_ROOT: '/x', DGCL_RESUME_QUEUE_URL: 'queue' }))).toThrow(ConfigurationError);
    expect(readConfig({ DGCL_ROOT: './rel' }).location).toMatchObject({ kind: 'file' });
  });
});

describe('errors as Lambda reports them', () => {
  it('keeps DgclErrors, turns timeouts into UnavailableError and anything else into InternalError', () => {
    const corrupt = new CorruptError('bad');
    expect(toLambdaError(corrupt)).toBe(corrupt);
    const timeout = Object.assign(new Error('[AbortError]: The operation was aborted.'), { name: 'TimeoutError' });
    expect(toLambdaError(timeout)).toMatchObject({ name: 'UnavailableError', code: 'UNAVAILABLE', retryable: true });
    const other = toLambdaError(new TypeError('x is undefined'));
    expect(other).toMatchObject({ name: 'InternalError', code: 'INTERNAL' });
    expect(other.message).toContain('TypeError');
    expect(other.cause).toBeInstanceOf(TypeError);
    expect(summarizeError(new InvalidInputError('nope', { field: 'a.b' }))).toEqual({ name: 'InvalidInputError', code: 'INVALID_INPUT', message: 'a.b: nope', retryable: false, field: 'a.b' });
  });

  it('a handler that runs out of time fails with UnavailableError', async () => {
    freshFileRoot();
    const fold = foldHandler as unknown as (e: unknown, c: unknown) => Promise<unknown>;
    const err = await thrown(fold({ pipeline: 'p', experiment: 'e', itemId: 'x' }, ctx('fold', 3)));
    expect(err.name).toBe('UnavailableError');
  });
});

describe('event shapes', () => {
  it('recognizes SQS and EventBridge events as AWS documents them', () => {
    const sqs = sqsEvent([{ a: 1 }, 'raw'], { groupIds: ['g', 'g'] });
    expect(isSqsEvent(sqs)).toBe(true);
    expect(sqs.Records[0]).toMatchObject({ body: '{"a":1}', eventSource: 'aws:sqs', attributes: { MessageGroupId: 'g', ApproximateReceiveCount: '1' } });
    expect(sqs.Records[1]!.body).toBe('raw');
    expect(isEventBridgeEvent(sqs)).toBe(false);
    const eb = eventBridgeEvent({ x: 1 });
    expect(isEventBridgeEvent(eb)).toBe(true);
    expect(isSqsEvent(eb)).toBe(false);
    expect(isSqsEvent({ Records: [{ eventSource: 'aws:s3' }] })).toBe(false);
    expect(isSqsEvent({ pipeline: 'p' })).toBe(false);
  });

  it('resume messages name exactly one of itemId or itemIds', () => {
    expect(parseInput(ResumeMessageSchema, { pipeline: 'p', experiment: 'e', itemId: 'a' })).toMatchObject({ itemId: 'a' });
    expect(() => parseInput(ResumeMessageSchema, { pipeline: 'p', experiment: 'e' })).toThrow(/event\.itemId: give exactly one of itemId or itemIds/);
    expect(() => parseInput(ResumeMessageSchema, { pipeline: 'p', experiment: 'e', itemId: 'a', itemIds: ['b'] })).toThrow(InvalidInputError);
  });
});

describe('time budget', () => {
  it('bounds the lease by the remaining time', () => {
    expect(leaseTtlFor(ctx('x', 20_000), 60_000)).toBeLessThanOrEqual(20_000);
    expect(leaseTtlFor(ctx('x', 900_000), 60_000)).toBe(60_000);
    expect(leaseTtlFor(ctx('x', 100), 60_000)).toBe(MIN_LEASE_TTL_MS);
    expect(leaseTtlFor(undefined, 60_000)).toBe(60_000);
  });

  it('stops waiting at the deadline', async () => {
    const slow = new Promise((r) => setTimeout(() => r('late'), 200));
    expect(await beforeDeadline(slow, Date.now() + 20)).toEqual({ done: false });
    expect(await beforeDeadline(Promise.resolve(1), Date.now() + 1_000)).toEqual({ done: true, value: 1 });
    await expect(beforeDeadline(Promise.reject(new Error('x')), Date.now() + 1_000)).rejects.toThrow('x');
  });

  it('mapLimit keeps the order and the limit', async () => {
    let inFlight = 0;
    let most = 0;
    const out = await mapLimit([5, 1, 4, 2, 3], 2, async (n) => {
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setTimeout(r, n));
      inFlight--;
      return n * 10;
    });
    expect(out).toEqual([50, 10, 40, 20, 30]);
    expect(most).toBe(2);
  });
});

describe('LogCache', () => {
  it('keeps at most maxOpen logs between invocations, closing the least recently used (which releases its slot)', async () => {
    freshFileRoot();
    const cache = new LogCache(2);
    const config = readConfig();
    try {
      const a = await cache.get(config, 'p', 'a', { leaseTtlMs: 10_000 });
      await a.log.append([createBatch('x')]);
      expect(a.log.writerEpoch).not.toBeNull();
      await cache.get(config, 'p', 'b', { leaseTtlMs: 10_000 });
      expect(await cache.get(config, 'p', 'a', { leaseTtlMs: 10_000 })).toBe(a); // a is now the most recent
      await cache.get(config, 'p', 'c', { leaseTtlMs: 10_000 });
      expect(cache.size).toBe(3); // nothing is closed during an invocation
      await cache.trim(); // closes b
      expect(cache.size).toBe(2);
      expect(await cache.get(config, 'p', 'a', { leaseTtlMs: 10_000 })).toBe(a);
      await cache.get(config, 'p', 'd', { leaseTtlMs: 10_000 });
      await cache.get(config, 'p', 'e', { leaseTtlMs: 10_000 });
      await cache.trim(); // closes c, then a: merged, sealed, released
      expect(cache.size).toBe(2);
      await expect(a.log.append([createBatch('y')])).rejects.toThrow(/closed/);
      const again = await cache.get(config, 'p', 'a', { leaseTtlMs: 10_000 });
      expect(again).not.toBe(a);
      expect((await again.log.stats()).shards.filter((s) => !s.retired && s.rows > 0)).toEqual([]);
      expect((await again.log.fold('x')).lastSeq).toBe(3);
    } finally {
      await cache.closeAll();
    }
  });
});

describe('layer modules (functions/shared/layer.ts)', () => {
  const repoModules = new URL('../../node_modules', import.meta.url).pathname;

  it('searches NODE_PATH, then /opt/nodejs/node_modules', () => {
    expect(layerSearchPaths({ NODE_PATH: '/a:/b::/a' })).toEqual(['/a', '/b', LAMBDA_LAYER_NODE_MODULES]);
    expect(layerSearchPaths({})).toEqual([LAMBDA_LAYER_NODE_MODULES]);
  });

  it('resolves a package and a subpath to their CommonJS builds in the folder NODE_PATH names', () => {
    const real = realpathSync(repoModules); // node_modules may be a symlink; require resolves real paths
    expect(resolveLayerModule('apache-arrow', { NODE_PATH: repoModules })).toBe(`${real}/apache-arrow/Arrow.node.js`);
    expect(resolveLayerModule('apache-arrow/visitor/vectorassembler', { NODE_PATH: repoModules })).toBe(`${real}/apache-arrow/visitor/vectorassembler.js`);
  });

  it('does not fall back to the node_modules around the code, and names the folders it searched', () => {
    let err: unknown;
    try {
      resolveLayerModule('apache-arrow', { NODE_PATH: '/nonexistent-layer' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LayerModuleError);
    expect((err as LayerModuleError).code).toBe('INTERNAL');
    expect((err as LayerModuleError).specifier).toBe('apache-arrow');
    expect((err as Error).message).toBe(
      `apache-arrow is not in the Lambda layer: searched /nonexistent-layer, ${LAMBDA_LAYER_NODE_MODULES} (NODE_PATH and ${LAMBDA_LAYER_NODE_MODULES}); deploy the function with the LanceDB layer`,
    );
  });
});
