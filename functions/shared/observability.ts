/**
 * Structured JSON logs (Powertools Logger) and EMF metrics (Powertools Metrics), and the one
 * middy chain every handler uses: Lambda context in the logs, metrics flushed after each
 * invocation, errors mapped to the closed set of names of functions/shared/errors.ts.
 *
 * Environment: POWERTOOLS_LOG_LEVEL (default INFO), POWERTOOLS_METRICS_NAMESPACE (default dgcl),
 * POWERTOOLS_METRICS_DISABLED=true to print no metrics (tests, local runs).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy, { type MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { InvalidInputError, NotFoundError } from '../../lib/errors.ts';
import { summarizeError, toLambdaError } from './errors.ts';
import { logCache } from './logs.ts';
import { METRICS_NAMESPACE } from './metric-names.ts';

export { MetricUnit };

export interface Observability {
  logger: Logger;
  metrics: Metrics;
}

/** Logger and metrics of one handler (`service` = `dgcl-<name>`). */
export function observability(name: string): Observability {
  const serviceName = process.env.POWERTOOLS_SERVICE_NAME ?? `dgcl-${name}`;
  return {
    logger: new Logger({ serviceName }),
    metrics: new Metrics({ namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? METRICS_NAMESPACE, serviceName }),
  };
}

/**
 * Maps any error to a DgclError (stable `name` and `code`), logs it once, and counts it as a
 * metric named after the error kind (e.g. `InvalidInputError`).
 */
function errorMapping(obs: Observability, withMetrics: boolean): MiddlewareObj {
  const { logger, metrics } = obs;
  return {
    onError: (request) => {
      const mapped = toLambdaError(request.error);
      const summary = summarizeError(mapped);
      if (withMetrics) metrics.addMetric(mapped.name, MetricUnit.Count, 1);
      // The caller's mistake or a missing item is a warning; everything else an error.
      if (mapped instanceof InvalidInputError || mapped instanceof NotFoundError) logger.warn('invocation rejected', { error: summary });
      else logger.error('invocation failed', { error: summary, cause: mapped.cause instanceof Error ? mapped.cause : undefined });
      request.error = mapped;
    },
  };
}

/** After each invocation (success or not): close the logs the container keeps beyond its limit. */
function trimLogCache(logger: Logger): MiddlewareObj {
  const trim = async () => {
    await logCache.trim().catch((e: unknown) => logger.warn('closing cached logs failed', { error: summarizeError(e) }));
  };
  return { after: trim, onError: trim };
}

export interface HandlerOptions {
  /** Attach the metrics middleware (only handlers that publish metrics: it warns when empty). */
  metrics?: boolean;
}

/** A middy handler with the shared middlewares around `fn`. */
export function lambdaHandler<TResult>(
  obs: Observability,
  fn: (event: unknown, context: Context) => Promise<TResult>,
  options: HandlerOptions = {},
) {
  const h = middy<unknown, TResult>(fn)
    .use(injectLambdaContext(obs.logger, { resetKeys: true }))
    .use(trimLogCache(obs.logger));
  if (options.metrics) h.use(logMetrics(obs.metrics));
  // Used last: middy runs onError middlewares in reverse order, so this maps the error first.
  return h.use(errorMapping(obs, options.metrics === true));
}
