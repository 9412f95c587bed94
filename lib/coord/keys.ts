/**
 * The folder of checkpoint claims inside a log (`_dgcl/claims/<checkpointId>.json`): the
 * coordination stores sweep expired claims by it. Part of the log's storage map
 * (lib/log/layout.ts, which re-exports it and names each claim's key, `claimKey`); kept here so
 * that lib/coord does not import lib/log.
 */
export const CLAIMS_DIR = '_dgcl/claims';
