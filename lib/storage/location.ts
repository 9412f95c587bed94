/**
 * Roots and the URIs derived from them:
 *  - a root is `file:///abs/dir`, a plain local path (resolved to absolute), or
 *    `s3://bucket/prefix`, whose bucket name must follow the AWS naming rules and whose prefix
 *    must be storable as S3 keys (checked here, so a bad root is bad input, not a network error);
 *  - an experiment's log is `<root>/datagen_checkpoints/<pipeline>/<experiment>/log.lance`;
 *  - S3 settings come from the standard AWS environment plus `AWS_ENDPOINT_URL_S3` (or
 *    `AWS_ENDPOINT_URL`) for an S3-compatible server. Nothing here is specific to one server.
 * Pure: no I/O.
 */
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { S3ClientConfig } from '@aws-sdk/client-s3';
import { InvalidInputError } from '../errors.ts';
import { validateName, type NameKind } from '../names.ts';

export type Location = { kind: 'file'; dir: string } | { kind: 's3'; bucket: string; prefix: string };
export type FileLocation = Extract<Location, { kind: 'file' }>;
export type S3Location = Extract<Location, { kind: 's3' }>;

/** Environment variables as `process.env` has them. */
export type Env = Record<string, string | undefined>;

/** The folder below a root that holds every pipeline's logs. */
export const CHECKPOINTS_DIR = 'datagen_checkpoints';
/** The Lance dataset folder of one experiment. */
export const LOG_DATASET = 'log.lance';

const SCHEME_RE = /^([A-Za-z][A-Za-z0-9+.-]+):\/\//;

/**
 * Whether `uri` names an object store (`s3://...`) rather than a local path (`file://` counts as
 * local): a request there costs more than its bytes, and a commit is durable once it returns.
 */
export function isObjectStoreUri(uri: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(uri) && !uri.startsWith('file://');
}

/** Parses a root (`file:///abs`, a plain path, or `s3://bucket/prefix`). */
export function parseRoot(root: string): Location {
  if (typeof root !== 'string' || root.trim() === '') {
    throw new InvalidInputError(`root must be a non-empty path or URI, got ${JSON.stringify(root)}`, {
      field: 'root',
    });
  }
  const scheme = SCHEME_RE.exec(root)?.[1]?.toLowerCase() ?? (/^file:/i.test(root) ? 'file' : undefined);
  if (scheme === undefined) return { kind: 'file', dir: path.resolve(root) };
  if (scheme === 'file') {
    let dir: string;
    try {
      dir = fileURLToPath(new URL(root));
    } catch (e) {
      throw new InvalidInputError(`root ${JSON.stringify(root)} is not a valid local file URL`, {
        field: 'root',
        cause: e,
      });
    }
    return { kind: 'file', dir: path.resolve(dir) };
  }
  if (scheme === 's3') {
    const rest = root.slice('s3://'.length);
    const slash = rest.indexOf('/');
    const bucket = slash < 0 ? rest : rest.slice(0, slash);
    const prefix = slash < 0 ? '' : normalizePrefix(rest.slice(slash + 1));
    if (bucket === '') {
      throw new InvalidInputError(`root ${JSON.stringify(root)} has an empty bucket name (expected s3://bucket/prefix)`, {
        field: 'root',
      });
    }
    const broken = bucketRuleBroken(bucket);
    if (broken !== undefined) {
      throw new InvalidInputError(`root ${JSON.stringify(root)}: invalid S3 bucket name ${JSON.stringify(bucket)}: ${broken}`, {
        field: 'root',
      });
    }
    if (/[?#]/.test(prefix)) {
      throw new InvalidInputError(`root ${JSON.stringify(root)}: the prefix may not contain '?' or '#'`, {
        field: 'root',
      });
    }
    checkS3Prefix(root, prefix);
    return { kind: 's3', bucket, prefix };
  }
  throw new InvalidInputError(
    `root ${JSON.stringify(root)} has an unsupported scheme '${scheme}:' (use file:///abs/dir, a local path, or s3://bucket/prefix)`,
    { field: 'root' },
  );
}

/**
 * The AWS naming rules for general purpose buckets, checked up front so a name S3 can never
 * have fails as bad input (exit 2) instead of as a network error later. Returns the first rule
 * `bucket` breaks, or undefined. Directory bucket names (`base--zone--x-s3`) pass: they obey
 * the general rules and are real buckets. Legacy us-east-1 buckets with uppercase letters or
 * `_` (created before March 2018) are rejected, as are the relaxed names some S3-compatible
 * servers allow.
 */
function bucketRuleBroken(bucket: string): string | undefined {
  if (bucket.length < 3 || bucket.length > 63) return `must be 3 to 63 characters long (it has ${bucket.length})`;
  const bad = /[^a-z0-9.-]/.exec(bucket);
  if (bad) return `may contain only lowercase letters, digits, dots and hyphens (found ${JSON.stringify(bad[0])})`;
  if (!/^[a-z0-9].*[a-z0-9]$/.test(bucket)) return 'must begin and end with a letter or digit';
  if (bucket.includes('..')) return 'must not contain two adjacent dots';
  if (/^\d+\.\d+\.\d+\.\d+$/.test(bucket)) return 'must not be formatted as an IP address';
  for (const p of RESERVED_BUCKET_PREFIXES) if (bucket.startsWith(p)) return `must not start with the reserved prefix "${p}"`;
  for (const s of RESERVED_BUCKET_SUFFIXES) if (bucket.endsWith(s)) return `must not end with the reserved suffix "${s}"`;
  return undefined;
}

const RESERVED_BUCKET_PREFIXES = ['xn--', 'sthree-', 'amzn-s3-demo-'];
/** Access point aliases, Object Lambda aliases, Multi-Region Access Points, table buckets. */
const RESERVED_BUCKET_SUFFIXES = ['-s3alias', '--ol-s3', '.mrap', '--table-s3'];

/** S3's limit on an object key, in UTF-8 bytes. */
const S3_MAX_KEY_BYTES = 1024;
/** The fixed part of the shortest object key under a root (one-character names, one-byte file). */
const SHORTEST_LOG_KEY_TAIL = `/${CHECKPOINTS_DIR}/p/e/${LOG_DATASET}/x`;

/**
 * Rejects only prefixes S3 cannot hold: text that is not well-formed Unicode (a lone surrogate
 * has no UTF-8 form, so the SDK would write U+FFFD instead), and a prefix so long that no key of
 * a log fits under it. Any other character is a legal key character and stays accepted.
 */
function checkS3Prefix(root: string, prefix: string): void {
  // In a `u` regex a paired surrogate is one astral code point, so \p{Cs} matches lone ones only.
  if (/\p{Cs}/u.test(prefix)) {
    throw new InvalidInputError(`root ${JSON.stringify(root)}: the prefix is not well-formed Unicode (it has a lone UTF-16 surrogate)`, {
      field: 'root',
    });
  }
  const bytes = Buffer.byteLength(prefix, 'utf8');
  if (bytes + Buffer.byteLength(SHORTEST_LOG_KEY_TAIL) > S3_MAX_KEY_BYTES) {
    throw new InvalidInputError(
      `root ${JSON.stringify(root.length > 80 ? `${root.slice(0, 80)}...` : root)}: the prefix is ${bytes} bytes in UTF-8; the keys of a log under it would exceed S3's ${S3_MAX_KEY_BYTES}-byte key limit`,
      { field: 'root' },
    );
  }
}

/** The root back as a URI: `file:///abs/dir` or `s3://bucket/prefix` (no trailing slash). */
export function formatLocation(loc: Location): string {
  if (loc.kind === 'file') return pathToFileURL(loc.dir).href;
  return loc.prefix ? `s3://${loc.bucket}/${loc.prefix}` : `s3://${loc.bucket}`;
}

/**
 * Checks a pipeline or experiment name (lib/names.ts): 1-128 chars of `[A-Za-z0-9._-]`, not
 * `.` or `..`. Throws InvalidInputError naming `field`; returns the name.
 */
export function checkLogName(name: string, field: NameKind): string {
  return validateName(field, name);
}

/** The location of one experiment's log folder (`.../datagen_checkpoints/<p>/<e>/log.lance`). */
export function logLocation(loc: Location, pipeline: string, experiment: string): Location {
  checkLogName(pipeline, 'pipeline');
  checkLogName(experiment, 'experiment');
  if (loc.kind === 'file') {
    return { kind: 'file', dir: path.join(loc.dir, CHECKPOINTS_DIR, pipeline, experiment, LOG_DATASET) };
  }
  return {
    kind: 's3',
    bucket: loc.bucket,
    prefix: joinKey(loc.prefix, CHECKPOINTS_DIR, pipeline, experiment, LOG_DATASET),
  };
}

/**
 * The Lance dataset URI of an experiment's log: an absolute path for local roots,
 * `s3://bucket/prefix/datagen_checkpoints/<pipeline>/<experiment>/log.lance` for S3.
 */
export function logUri(loc: Location, pipeline: string, experiment: string): string {
  const l = logLocation(loc, pipeline, experiment);
  return l.kind === 'file' ? l.dir : `s3://${l.bucket}/${l.prefix}`;
}

/** The folder of every experiment of one pipeline (`<root>/datagen_checkpoints/<pipeline>`). */
export function pipelineLocation(loc: Location, pipeline: string): Location {
  checkLogName(pipeline, 'pipeline');
  if (loc.kind === 'file') return { kind: 'file', dir: path.join(loc.dir, CHECKPOINTS_DIR, pipeline) };
  return { kind: 's3', bucket: loc.bucket, prefix: joinKey(loc.prefix, CHECKPOINTS_DIR, pipeline) };
}

/** The S3 endpoint from the environment (`AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL`). */
export function s3Endpoint(env: Env = process.env): string | undefined {
  return nonEmpty(env.AWS_ENDPOINT_URL_S3) ?? nonEmpty(env.AWS_ENDPOINT_URL);
}

/** The AWS region from the environment (`AWS_REGION`, `AWS_DEFAULT_REGION`, else us-east-1). */
export function awsRegion(env: Env = process.env): string {
  return nonEmpty(env.AWS_REGION) ?? nonEmpty(env.AWS_DEFAULT_REGION) ?? 'us-east-1';
}

/**
 * Lance `storageOptions` for a root: undefined for local roots; for S3 the region, the custom
 * endpoint (and `allow_http` when it is plain http), and static credentials when the
 * environment has them (otherwise Lance uses its own AWS credential chain).
 */
export function lanceStorageOptions(loc: Location, env: Env = process.env): Record<string, string> | undefined {
  if (loc.kind === 'file') return undefined;
  const opts: Record<string, string> = { region: awsRegion(env) };
  const endpoint = s3Endpoint(env);
  if (endpoint !== undefined) {
    opts.endpoint = endpoint;
    if (/^http:/i.test(endpoint)) opts.allow_http = 'true';
  }
  const keyId = nonEmpty(env.AWS_ACCESS_KEY_ID);
  const secret = nonEmpty(env.AWS_SECRET_ACCESS_KEY);
  if (keyId !== undefined && secret !== undefined) {
    opts.aws_access_key_id = keyId;
    opts.aws_secret_access_key = secret;
    const token = nonEmpty(env.AWS_SESSION_TOKEN);
    if (token !== undefined) opts.aws_session_token = token;
  }
  return opts;
}

/**
 * Configuration for an `S3Client` from the environment: region, and for a custom endpoint
 * (MinIO, Ceph RGW, ...) the endpoint with path-style addressing. Credentials are left to the
 * SDK's default chain (which reads the same environment).
 */
export function s3ClientConfig(env: Env = process.env): S3ClientConfig {
  const config: S3ClientConfig = { region: awsRegion(env) };
  const endpoint = s3Endpoint(env);
  if (endpoint !== undefined) {
    config.endpoint = endpoint;
    config.forcePathStyle = true;
  }
  return config;
}

/** Joins key parts with single slashes, dropping empty parts. */
export function joinKey(...parts: string[]): string {
  return normalizePrefix(parts.filter((p) => p !== '').join('/'));
}

function normalizePrefix(p: string): string {
  return p
    .split('/')
    .filter((s) => s !== '')
    .join('/');
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

/**
 * Checks an object key or prefix relative to a store's base: `/`-separated, no empty, `.` or
 * `..` segments, no leading slash; a prefix may be empty (the base itself) and may end in one
 * `/`, which is dropped. Returns the normalized key.
 */
export function checkObjectKey(key: string, kind: 'key' | 'prefix'): string {
  if (typeof key !== 'string') throw new InvalidInputError(`${kind} must be a string`, { field: kind });
  let k = key;
  if (kind === 'prefix') {
    if (k === '') return '';
    if (k.endsWith('/')) k = k.slice(0, -1);
  }
  const parts = k.split('/');
  if (k === '' || parts.some((s) => s === '' || s === '.' || s === '..') || k.includes('\0')) {
    throw new InvalidInputError(`invalid object ${kind} ${JSON.stringify(key)}`, { field: kind });
  }
  return k;
}
