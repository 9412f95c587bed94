/** The choices of an export, apart from lib/export/export.ts so the CLI can list them without loading it. */
export const EXPORT_STATUSES = ['completed', 'filtered', 'any'] as const;
export type ExportStatus = (typeof EXPORT_STATUSES)[number];
export const EXPORT_FORMATS = ['jsonl', 'parquet'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];
