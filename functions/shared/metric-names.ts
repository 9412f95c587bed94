/**
 * Names of the custom metrics the stack alarms on (infra/stack.ts), shared so the alarm and the
 * handler cannot drift apart. Powertools Metrics publishes them in METRICS_NAMESPACE with the
 * dimension `service` = the function's POWERTOOLS_SERVICE_NAME.
 */
export const METRICS_NAMESPACE = 'dgcl';

/** Append: SQS records reported back as failed (invalid or not durable) in one invocation. */
export const RECORD_FAILURES_METRIC = 'BatchItemFailures';
