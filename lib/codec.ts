/**
 * Field value codec (the value kinds): user JSON <-> the typed value columns of a row.
 *
 * Input (a field value of `set`, or one element of `append`):
 *   - a JS number that is a safe integer (|n| <= 2^53-1)  -> int   (value_i64, exact)
 *   - a JS number that is integral but not safe           -> rejected: precision may already be
 *     lost, send {"$int": "<decimal>"} instead. (This includes huge floats such as 1e300: JSON
 *     cannot tell them from integers.)
 *   - {"$int": "<decimal>"} (exactly that one key)        -> int, must fit signed int64
 *   - any other finite number                             -> float (value_f64)
 *   - boolean -> bool, string -> str
 *   - {"$blob": "<base64>"} (exactly that one key)        -> blob (value_blob + size + checksum)
 *   - any other object or array                           -> json (canonical JSON text)
 *   - null                                                -> rejected (there is no null kind)
 *   TypeScript-API conveniences (not reachable from JSON): a bigint in int64 range -> int,
 *   a Uint8Array (or Buffer) -> blob.
 *   Objects at the top of a value that use a reserved key (`$int`, `$blob`, `$blobRef`) in any
 *   other way are rejected rather than stored as json, so that fold output (which uses the same
 *   spellings) is never ambiguous.
 *
 * Output (fold, trajectory): ints within ±(2^53-1) as JSON numbers, others as {"$int": "..."};
 * json parsed; blobs as {"$blobRef": {eventId, size, checksum}} without touching value_blob.
 *
 * Strings anywhere (str values, json keys and strings) must be well-formed UTF-16: a lone
 * surrogate cannot be stored in Arrow's UTF-8 columns without being silently replaced.
 */
import { guard } from './guards.ts';
import { createHash } from 'node:crypto';
import { CorruptError, InvalidInputError } from './errors.ts';
import type { EncodedValue, EventRow, JsonValue, OutputValue, ValueKind } from './types.ts';

/**
 * Stable codec ids written to `field_type`, one per value kind. A reader that meets an id it does
 * not know must refuse the value rather than guess. Never change an id's meaning; add a new one.
 *   dgcl.int64.v1          value_i64, two's-complement signed 64-bit integer
 *   dgcl.float64.v1        value_f64, IEEE-754 binary64, finite
 *   dgcl.bool.v1           value_bool
 *   dgcl.utf8.v1           value_str, UTF-8 text
 *   dgcl.json.canonical.v1 value_json, canonical JSON (see canonicalJson)
 *   dgcl.blob.sha256.v1    value_blob bytes, payload_size, payload_checksum = "sha256:<hex>"
 */
export const FIELD_TYPES: Readonly<Record<ValueKind, string>> = Object.freeze({
  int: 'dgcl.int64.v1',
  float: 'dgcl.float64.v1',
  bool: 'dgcl.bool.v1',
  str: 'dgcl.utf8.v1',
  json: 'dgcl.json.canonical.v1',
  blob: 'dgcl.blob.sha256.v1',
});

/** Written to `codec_version` of every field event. */
export const CODEC_VERSION = 1;

export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;
const SAFE_MAX = BigInt(Number.MAX_SAFE_INTEGER);
const SAFE_MIN = -SAFE_MAX;

/** Largest accepted blob (decoded bytes). Lambda payloads are far smaller anyway. */
export const MAX_BLOB_BYTES = 64 * 1024 * 1024;
/** Deepest accepted nesting of a json value (guards the recursion). */
export const MAX_JSON_DEPTH = 512;

const RESERVED_KEYS = ['$int', '$blob', '$blobRef'] as const;

// ---------------------------------------------------------------------------------------------
// Small shared helpers (also used by lib/batch.ts).

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// C0, DEL and C1 control characters.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** False when `s` holds a lone surrogate (it could not be stored as UTF-8 unchanged). */
export function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

export function hasControlChars(s: string): boolean {
  return CONTROL.test(s);
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** `base.key` for identifier-like keys, `base["odd key"]` otherwise, `base[3]` for indexes. */
export function joinPath(base: string, key: string | number): string {
  if (typeof key === 'number') return `${base}[${key}]`;
  return IDENT.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'object') {
    const ctor = (Object.getPrototypeOf(v) as { constructor?: { name?: string } } | null)?.constructor?.name;
    return ctor ? `${ctor} object` : 'object';
  }
  return typeof v;
}

// ---------------------------------------------------------------------------------------------
// Canonical JSON.

/**
 * Canonical JSON text of a JSON-like value: object keys sorted by UTF-16 code units (the default
 * JS sort) at every level, no whitespace, numbers as JS prints them (shortest round-trip form,
 * -0 as 0). Rejects, with InvalidInputError whose field is the offending path: non-finite numbers,
 * undefined, functions, symbols, bigints, non-plain objects (Date, Map, class instances),
 * lone surrogates, cycles and nesting deeper than MAX_JSON_DEPTH.
 */
export function canonicalJson(v: unknown, path = 'value'): string {
  // The offending path is built only for an error: joining it at every key was a third of the
  // time of a checkpoint id's content (written once per batch).
  const keys: (string | number)[] = [];
  const parents: object[] = [];
  const fail = (message: string, key?: string): never => {
    const at = keys.reduce<string>((p, k) => joinPath(p, k), path);
    throw new InvalidInputError(message, { field: key === undefined ? at : joinPath(at, key) });
  };
  let out = '';
  const write = (x: unknown): void => {
    switch (typeof x) {
      case 'string':
        if (!isWellFormed(x)) fail('string holds a lone UTF-16 surrogate (not valid Unicode)');
        out += JSON.stringify(x);
        return;
      case 'number':
        if (!Number.isFinite(x)) fail(`number ${String(x)} is not valid JSON (must be finite)`);
        out += JSON.stringify(x);
        return;
      case 'boolean':
        out += x ? 'true' : 'false';
        return;
      case 'object':
        break;
      default:
        fail(`${typeName(x)} is not a JSON value`);
    }
    if (x === null) {
      out += 'null';
      return;
    }
    if (parents.length >= MAX_JSON_DEPTH) fail(`nested deeper than ${MAX_JSON_DEPTH} levels`);
    if (parents.includes(x as object)) fail('circular reference');
    if (Array.isArray(x)) {
      parents.push(x);
      out += '[';
      for (let i = 0; i < x.length; i++) {
        if (i > 0) out += ',';
        keys.push(i);
        write(x[i]);
        keys.pop();
      }
      out += ']';
      parents.pop();
      return;
    }
    if (!isPlainObject(x)) fail(`${typeName(x)} is not a plain JSON object`);
    const o = x as Record<string, unknown>;
    parents.push(o);
    const ks = Object.keys(o).sort();
    out += '{';
    for (let i = 0; i < ks.length; i++) {
      const k = ks[i]!;
      if (!isWellFormed(k)) fail('object key holds a lone UTF-16 surrogate (not valid Unicode)', k);
      if (i > 0) out += ',';
      out += JSON.stringify(k) + ':';
      keys.push(k);
      write(o[k]);
      keys.pop();
    }
    out += '}';
    parents.pop();
  };
  write(v);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Input -> EncodedValue.

/** `sha256:<64 lowercase hex>` of the bytes. */
export function blobChecksum(bytes: Uint8Array): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/**
 * Throws CorruptError unless `bytes` hash to `checksum` (and, when given, have `expectedSize`
 * bytes). `what` names the blob in the message (e.g. its event id).
 */
export function verifyBlob(bytes: Uint8Array, checksum: string, expectedSize?: number | null, what = 'blob'): void {
  if (expectedSize != null && bytes.byteLength !== expectedSize) {
    throw new CorruptError(`${what}: expected ${expectedSize} bytes, got ${bytes.byteLength}`);
  }
  if (!checksum.startsWith('sha256:')) throw new CorruptError(`${what}: unsupported checksum ${JSON.stringify(checksum)}`);
  const actual = blobChecksum(bytes);
  if (actual !== checksum.toLowerCase()) throw new CorruptError(`${what}: checksum mismatch (stored ${checksum}, computed ${actual})`);
}

/**
 * Strict base64 (RFC 4648 section 4: standard alphabet, `=` padding required, no whitespace,
 * zero pad bits) -> bytes. Returns null when `s` is not exactly that. Node's decoder silently
 * skips junk, so strictness is checked by re-encoding.
 */
export function decodeBase64Strict(s: string): Uint8Array | null {
  if (s.length % 4 !== 0) return null;
  const buf = Buffer.from(s, 'base64');
  if (buf.toString('base64') !== s) return null;
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

const DECIMAL = /^-?[0-9]{1,25}$/;

function blobOf(bytes: Uint8Array, path: string): EncodedValue {
  if (bytes.byteLength > MAX_BLOB_BYTES) {
    throw new InvalidInputError(`blob of ${bytes.byteLength} bytes exceeds the limit of ${MAX_BLOB_BYTES} bytes`, { field: path });
  }
  return { kind: 'blob', bytes, size: bytes.byteLength, checksum: blobChecksum(bytes) };
}

function intOf(i: bigint, path: string): EncodedValue {
  if (i < INT64_MIN || i > INT64_MAX) {
    throw new InvalidInputError(`integer ${i} does not fit in a signed 64-bit integer [${INT64_MIN}, ${INT64_MAX}]`, { field: path });
  }
  return { kind: 'int', i64: i };
}

/** Encodes one field value (see the module comment). `path` names it in errors, e.g. `batch.set.n`. */
export function encodeValue(v: unknown, path: string): EncodedValue {
  switch (typeof v) {
    case 'number':
      if (!Number.isFinite(v)) throw new InvalidInputError(`number ${String(v)} is not allowed (must be finite)`, { field: path });
      if (Number.isInteger(v)) {
        if (!Number.isSafeInteger(v)) {
          throw new InvalidInputError(
            `integer ${v} is beyond ±(2^53-1) and cannot be represented exactly as a JSON number; send it as {"$int": "<decimal>"}`,
            { field: path },
          );
        }
        return { kind: 'int', i64: BigInt(v) };
      }
      return { kind: 'float', f64: v };
    case 'bigint':
      return intOf(v, path);
    case 'boolean':
      return { kind: 'bool', bool: v };
    case 'string':
      if (!isWellFormed(v)) throw new InvalidInputError('string holds a lone UTF-16 surrogate (not valid Unicode)', { field: path });
      return { kind: 'str', str: v };
    case 'undefined':
      throw new InvalidInputError('value is missing (undefined)', { field: path });
    case 'object':
      break;
    default:
      throw new InvalidInputError(`${typeName(v)} is not a storable value`, { field: path });
  }
  if (v === null) {
    throw new InvalidInputError('null is not a storable value (there is no null kind); omit the field or store a json value such as {"value": null}', { field: path });
  }
  // A copy: the caller may reuse its buffer once the append returned, and the writer keeps the
  // rows of recent commits to merge them later (else the merged blob may no longer match
  // its checksum). Copied before the checksum, so both describe the same bytes.
  if (v instanceof Uint8Array) return blobOf(guard('blob-copied-at-validation') ? new Uint8Array(v) : v, path);
  if (isPlainObject(v)) {
    const keys = Object.keys(v);
    const reserved = RESERVED_KEYS.find((k) => Object.hasOwn(v, k));
    if (reserved !== undefined) {
      if (keys.length !== 1) {
        throw new InvalidInputError(`an object with "${reserved}" must have no other keys (got ${keys.map((k) => JSON.stringify(k)).join(', ')})`, { field: path });
      }
      const inner = v[reserved];
      const innerPath = joinPath(path, reserved);
      if (reserved === '$int') {
        if (typeof inner !== 'string' || !DECIMAL.test(inner)) {
          throw new InvalidInputError('"$int" must be a decimal integer string such as "9007199254740993"', { field: innerPath });
        }
        return intOf(BigInt(inner), innerPath);
      }
      if (reserved === '$blob') {
        if (typeof inner !== 'string') throw new InvalidInputError('"$blob" must be a base64 string', { field: innerPath });
        if (inner.length > Math.ceil(MAX_BLOB_BYTES / 3) * 4) {
          throw new InvalidInputError(`blob exceeds the limit of ${MAX_BLOB_BYTES} bytes`, { field: innerPath });
        }
        const bytes = decodeBase64Strict(inner);
        if (bytes === null) {
          throw new InvalidInputError('"$blob" is not valid base64 (standard alphabet A-Z a-z 0-9 + /, "=" padding, no whitespace)', { field: innerPath });
        }
        return blobOf(bytes, innerPath);
      }
      throw new InvalidInputError('"$blobRef" is a read-only reference and cannot be written; send the bytes as {"$blob": "<base64>"}', { field: path });
    }
  }
  return { kind: 'json', json: canonicalJson(v, path) };
}

/** The typed row columns of an encoded value (for field events). */
export function valueColumns(v: EncodedValue): Pick<
  EventRow,
  | 'field_type'
  | 'codec_version'
  | 'value_kind'
  | 'value_i64'
  | 'value_f64'
  | 'value_bool'
  | 'value_str'
  | 'value_json'
  | 'value_blob'
  | 'payload_size'
  | 'payload_checksum'
> {
  return {
    field_type: FIELD_TYPES[v.kind],
    codec_version: CODEC_VERSION,
    value_kind: v.kind,
    value_i64: v.kind === 'int' ? v.i64 : null,
    value_f64: v.kind === 'float' ? v.f64 : null,
    value_bool: v.kind === 'bool' ? v.bool : null,
    value_str: v.kind === 'str' ? v.str : null,
    value_json: v.kind === 'json' ? v.json : null,
    value_blob: v.kind === 'blob' ? v.bytes : null,
    payload_size: v.kind === 'blob' ? v.size : null,
    payload_checksum: v.kind === 'blob' ? v.checksum : null,
  };
}

// ---------------------------------------------------------------------------------------------
// Row -> OutputValue.

/** An int64 as JSON output shows it: a number within ±(2^53-1), else {"$int": "<decimal>"}. */
export function outputInt(i: bigint): number | { $int: string } {
  return i >= SAFE_MIN && i <= SAFE_MAX ? Number(i) : { $int: i.toString() };
}

/**
 * The output value of a field event row. Never reads `value_blob`. Throws CorruptError when the
 * row is not a field event, its kind/codec is unknown, or its value column is missing/invalid.
 */
function where(row: EventRow): string {
  return `event ${row.event_id} (item ${JSON.stringify(row.item_id)}, seq ${row.item_seq})`;
}

export function decodeValue(row: EventRow): OutputValue {
  if (row.codec_version != null && row.codec_version > CODEC_VERSION) {
    throw new CorruptError(`${where(row)}: codec_version ${row.codec_version} is newer than this reader (${CODEC_VERSION}); upgrade dgcl`);
  }
  const kind = row.value_kind;
  if (kind !== null && row.field_type != null && FIELD_TYPES[kind] !== row.field_type) {
    throw new CorruptError(`${where(row)}: field_type ${JSON.stringify(row.field_type)} does not match value_kind ${kind}`);
  }
  switch (kind) {
    case 'int': {
      const raw = row.value_i64 as bigint | number | null;
      if (raw === null || raw === undefined) break;
      return outputInt(typeof raw === 'bigint' ? raw : BigInt(raw));
    }
    case 'float':
      if (typeof row.value_f64 !== 'number') break;
      return row.value_f64;
    case 'bool':
      if (typeof row.value_bool !== 'boolean') break;
      return row.value_bool;
    case 'str':
      if (typeof row.value_str !== 'string') break;
      return row.value_str;
    case 'json':
      if (typeof row.value_json !== 'string') break;
      try {
        return JSON.parse(row.value_json) as JsonValue;
      } catch (e) {
        throw new CorruptError(`${where(row)}: value_json is not valid JSON`, { cause: e });
      }
    case 'blob':
      if (row.payload_size == null || row.payload_checksum == null) break;
      return { $blobRef: { eventId: row.event_id, size: Number(row.payload_size), checksum: row.payload_checksum } };
    default:
      throw new CorruptError(
        kind === null ? `${where(row)}: has no value (not a field event)` : `${where(row)}: unknown value_kind ${JSON.stringify(kind)}`,
      );
  }
  throw new CorruptError(`${where(row)}: value_kind ${kind} but its value column is empty`);
}
