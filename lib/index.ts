/**
 * datagen-checkpoint-log: the public TypeScript API.
 *
 *   const log = await openLog({ root: './data', pipeline: 'p', experiment: 'e' });
 *   const [ack] = await log.append([{ itemId: 'doc-1', runId: 'r1', create: {}, step: { name: 'gen', index: 0 } }]);
 *   const state = await log.fold('doc-1');
 *   await log.close();
 */
import './runtime.ts';

export { openLog, freezingHost, DEFAULTS, type OpenLogOptions } from './open.ts';
export { defaultLeaseStore } from './open-aws.ts';
export { UnsupportedNodeError } from './runtime.ts';

export * from './api.ts';
export * from './errors.ts';
export * from './types.ts';
export type { Clock } from './clock.ts';
export type { Lease, LeaseStore } from './lease/types.ts';
export type { SlotWait, SlotWaitListener } from './lease/slots.ts';
export { LocalLeaseStore } from './lease/local.ts';
export { MissingLeaseStore } from './lease/missing.ts';
export { DynamoLeaseStore, createLeaseTable } from './lease/dynamo.ts';
export { parseBatch, parseBatches } from './batch.ts';
export { foldItem, trajectory } from './fold.ts';
export { parseWhere, formatWhere, checkWhere, decide, matches, subjectOfState, WhereSyntaxError, ITEM_ATTRIBUTES, VALUE_OPS, MAX_WHERE_DEPTH } from './select/index.ts';
export type { Where, Comparison, Attribute, ItemAttribute, CompareOp, ValueOp, Literal, Subject } from './select/index.ts';
export { report, DEFAULT_REPORT_ITEMS, type ReportOptions, type ReportResult } from './report/report.ts';
export type * from './report/model.ts';
export { exportItems, EXPORT_FORMATS, EXPORT_STATUSES, DEFAULT_CHUNK_EVENTS, type ExportOptions, type ExportResult, type ExportFormat, type ExportStatus } from './export/export.ts';
export { DurableItem, item, type ItemOptions, type StepContext, type StepFn, type StepOutput, type StepResult } from './steps.ts';
export { MAX_INLINE_BYTES, MAX_LATEST_EVENTS } from './log/read/item-reads.ts';
export { resumeInstruction, resumePoint, type ResumeBy, type ResumeInstruction, type ResumePoint } from './resume.ts';
export {
  stalledItems,
  sendResumes,
  type SweepLog,
  type StalledItem,
  type StalledItems,
  type StalledOptions,
  type StalledPredicate,
  type SweepCounts,
  type ResumeSender,
  type SendResult,
  type SendOptions,
  type SendError,
  type NotSentReason,
} from './resume-sweep.ts';
export { parseDuration } from './duration.ts';
