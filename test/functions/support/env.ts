/**
 * Imported first by every handler test, before any handler module: Powertools reads its
 * settings when the handler modules create their Logger/Metrics. Logs are silent unless
 * DGCL_TEST_LOGS is set; metrics are not printed.
 */
if (!process.env.DGCL_TEST_LOGS) process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
process.env.POWERTOOLS_METRICS_DISABLED = 'true';
export {};
