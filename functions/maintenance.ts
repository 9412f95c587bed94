/**
 * `maintenance` handler (scheduled; docs/design/handlers.md). Input `{pipeline?,
 * experiment?}` narrows it (the schedule sends `{}`: every experiment under DGCL_ROOT); a raw
 * EventBridge event is accepted too, narrowed by its `detail`.
 *
 * Per experiment, one after the other: open the log, `maintain()` (the lib elects one maintainer
 * per experiment through the lease store; a report with `ran: false, heldBy` means another
 * maintainer holds the lease and nothing was done here; `ran: false, empty: true` that the log's
 * folder holds no log yet, a first writer that did not get far), close. An experiment is not started
 * with less than MAINTAIN_START_RESERVE_MS of the invocation left (it is reported `skipped`;
 * the order starts at a random experiment, so a root too large for one invocation is still
 * covered across runs). An experiment that fails does not stop the others; after all ran, the
 * invocation fails with the first error (so the function's Errors alarm fires), its full result
 * in the log.
 */
import type { Context } from 'aws-lambda';
import type { MaintenanceReport } from '../lib/api.ts';
import { systemClock } from '../lib/clock.ts';
import { NotFoundError } from '../lib/errors.ts';
import { openLog } from '../lib/index.ts';
import { readConfig } from './shared/config.ts';
import { summarizeError, toLambdaError, type ErrorSummary } from './shared/errors.ts';
import { listExperiments, type ExperimentRef } from './shared/experiments.ts';
import { containerOwner, logCache } from './shared/logs.ts';
import { lambdaHandler, MetricUnit, observability } from './shared/observability.ts';
import { isEventBridgeEvent, MaintenanceSchema, parseInput } from './shared/schemas.ts';
import { deadlineOf, leaseTtlFor, untilDeadline } from './shared/time.ts';

const obs = observability('maintenance');
const { logger, metrics } = obs;

/** An experiment is not started with less time than this left in the invocation. */
export const MAINTAIN_START_RESERVE_MS = 30_000;

/**
 * How a pass is logged and counted. An overtaken pass (paused past its lease, the steps left
 * skipped because another maintainer took it over: `stoppedBy: FENCED`, nothing else failed) is
 * no failure: the maintainer that took over does those steps. A pass stopped because its lease
 * ran out and the lease store did not answer (`stoppedBy: UNAVAILABLE`) is one failure, not one
 * per step it skipped.
 */
export function passOutcome(report: MaintenanceReport): PassOutcome {
  if (report.empty) return 'empty';
  if (!report.ran) return 'held';
  if (failedSteps(report) > 0) return 'failed';
  if (report.stoppedBy === 'FENCED') return 'overtaken';
  return report.stoppedBy === 'UNAVAILABLE' ? 'stopped' : 'maintained';
}

export type PassOutcome = 'maintained' | 'failed' | 'overtaken' | 'stopped' | 'held' | 'empty';

/** Steps that failed by themselves (not those a stopped pass skipped). */
const failedSteps = (report: MaintenanceReport): number => report.failures.filter((f) => !f.skipped).length;

/** Steps that failed (not those a stopped pass skipped), and a stop for an unanswering lease store as one. */
export function stepFailures(report: MaintenanceReport): number {
  return failedSteps(report) + (report.stoppedBy === 'UNAVAILABLE' ? 1 : 0);
}

/** How each outcome is logged (a Record: an outcome without a line does not compile). */
const PASS_LOG: Record<PassOutcome, { level: 'info' | 'warn' | 'error'; message: string }> = {
  maintained: { level: 'info', message: 'maintained' },
  held: { level: 'info', message: 'another maintainer holds the lease; nothing done' },
  empty: { level: 'info', message: 'the log holds nothing yet (a first write did not get far); nothing done' },
  overtaken: { level: 'warn', message: 'pass overtaken by another maintainer (it was paused past its lease); steps left to it' },
  stopped: { level: 'error', message: 'pass stopped: its lease ran out and the lease store did not answer; the next run does the steps left' },
  failed: { level: 'error', message: 'maintenance steps failed; the next run retries them' },
};

/** One experiment's outcome: the lib's report, or why there is none. */
export type MaintenanceEntry =
  | (MaintenanceReport & { pipeline: string; experimentName: string; durationMs: number })
  | { experiment: string; pipeline: string; experimentName: string; ran: false; skipped: 'time' }
  | { experiment: string; pipeline: string; experimentName: string; ran: false; error: ErrorSummary };

export interface MaintenanceResult {
  root: string;
  experiments: MaintenanceEntry[];
  summary: { experiments: number; ran: number; leaseHeld: number; skipped: number; failed: number };
}

export const handler = lambdaHandler(
  obs,
  async (event: unknown, context: Context): Promise<MaintenanceResult> => {
    const config = readConfig(process.env, { leases: true });
    const input = isEventBridgeEvent(event)
      ? parseInput(MaintenanceSchema, event.detail ?? {}, 'event.detail')
      : parseInput(MaintenanceSchema, event ?? {}, 'event');
    const deadline = deadlineOf(context);

    let targets = await listExperiments(config.location, config.env, input.pipeline);
    if (input.experiment !== undefined) {
      targets = targets.filter((t) => t.experiment === input.experiment);
      if (targets.length === 0) {
        throw new NotFoundError(`no experiment ${input.pipeline}/${input.experiment} with a log under ${config.root}`);
      }
    }
    targets = rotate(targets);

    const entries: MaintenanceEntry[] = [];
    const errors: unknown[] = [];
    for (const t of targets) {
      const names = { experiment: `${t.pipeline}/${t.experiment}`, pipeline: t.pipeline, experimentName: t.experiment };
      if (untilDeadline(deadline) < MAINTAIN_START_RESERVE_MS) {
        entries.push({ ...names, ran: false, skipped: 'time' });
        continue;
      }
      try {
        const started = systemClock.nowMs();
        const report = await maintainOne(t, config, context);
        entries.push({ ...report, pipeline: t.pipeline, experimentName: t.experiment, durationMs: systemClock.nowMs() - started });
        const outcome = passOutcome(report);
        const { level, message } = PASS_LOG[outcome];
        logger[level](message, outcome === 'held' ? { experiment: report.experiment, heldBy: report.heldBy } : { ...report });
      } catch (e) {
        errors.push(e);
        entries.push({ ...names, ran: false, error: summarizeError(e) });
      }
    }

    const result: MaintenanceResult = {
      root: config.root,
      experiments: entries,
      summary: {
        experiments: entries.length,
        ran: entries.filter((e) => e.ran).length,
        leaseHeld: entries.filter((e) => !e.ran && 'heldBy' in e && e.heldBy !== undefined).length,
        skipped: entries.filter((e) => 'skipped' in e).length,
        failed: errors.length,
      },
    };
    metrics.addMetric('MaintainedExperiments', MetricUnit.Count, result.summary.ran);
    metrics.addMetric('MaintenanceLeaseHeld', MetricUnit.Count, result.summary.leaseHeld);
    metrics.addMetric('MaintenanceSkipped', MetricUnit.Count, result.summary.skipped);
    metrics.addMetric('MaintenanceFailures', MetricUnit.Count, result.summary.failed);
    metrics.addMetric('MaintenanceStepFailures', MetricUnit.Count, entries.reduce((n, e) => n + ('failures' in e ? stepFailures(e) : 0), 0));
    metrics.addMetric('MaintenanceOvertaken', MetricUnit.Count, entries.filter((e) => 'failures' in e && e.stoppedBy === 'FENCED').length);
    metrics.addMetric('MergedRows', MetricUnit.Count, entries.reduce((n, e) => n + ('mergedRows' in e ? e.mergedRows : 0), 0));
    if (errors.length > 0) {
      logger.error('maintenance failed for some experiments', { ...result });
      throw toLambdaError(errors[0]);
    }
    logger.info('maintenance done', { summary: result.summary });
    return result;
  },
  { metrics: true },
);

/** Maintains one experiment on a log opened for this run only (it takes no writer slot). */
async function maintainOne(t: ExperimentRef, config: ReturnType<typeof readConfig>, context: Context): Promise<MaintenanceReport> {
  const owner = containerOwner(config.env);
  const log = await openLog({
    root: config.root,
    pipeline: t.pipeline,
    experiment: t.experiment,
    env: config.env,
    leases: logCache.leaseStoreFor(config),
    leaseTtlMs: leaseTtlFor(context, config.leaseTtlMaxMs),
    ...(owner ? { owner } : {}),
  });
  try {
    return await log.maintain();
  } finally {
    await log.close().catch((e: unknown) => logger.warn('closing the log after maintenance failed', { error: summarizeError(e) }));
  }
}

/** The list from a random position on (fair across runs when time runs out). */
function rotate<T>(list: T[]): T[] {
  if (list.length < 2) return list;
  const start = Math.floor(Math.random() * list.length);
  return [...list.slice(start), ...list.slice(0, start)];
}
