import { createHash, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CODEC_VERSION,
  FIELD_TYPES,
  INT64_MAX,
  INT64_MIN,
  blobChecksum,
  canonicalJson,
  decodeBase64Strict,
  decodeValue,
  encodeValue,
  valueColumns,
  verifyBlob,
} from '../../lib/codec.ts';
import { CorruptError, InvalidInputError } from '../../lib/errors.ts';
import { SCHEMA_VERSION, VALUE_KINDS, type EncodedValue, type EventRow } from '../../lib/types.ts';

function invalid(f: () => unknown): InvalidInputError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidInputError);
    return e as InvalidInputError;
  }
  throw new Error('expected InvalidInputError');
}

/** A light row holding an encoded value, the way a fold reads it (value_blob projected out). */
function rowOf(v: EncodedValue, eventId = 'e'.repeat(32)): EventRow {
  return {
    event_id: eventId,
    item_id: 'item',
    root_item_id: 'item',
    parent_item_id: null,
    item_seq: 7,
    checkpoint_id: 'c'.repeat(32),
    event_type: 'FIELD_SET',
    step_name: null,
    step_index: null,
    step_instance_id: null,
    iteration: null,
    attempt: 1,
    run_id: 'run',
    writer_epoch: 'w',
    field_name: 'f',
    ...valueColumns(v),
    value_blob: null,
    query_tags_json: null,
    terminal: null,
    error_type: null,
    error_dump: null,
    traceback: null,
    event_ts: 0,
    schema_version: SCHEMA_VERSION,
  };
}

const roundTrip = (input: unknown) => decodeValue(rowOf(encodeValue(input, 'v')));

describe('canonicalJson', () => {
  it('sorts keys recursively and has no whitespace', () => {
    const v = { b: [3, { z: 1, a: 'x y' }], a: { d: null, c: true } };
    expect(canonicalJson(v)).toBe('{"a":{"c":true,"d":null},"b":[3,{"a":"x y","z":1}]}');
  });

  it('is valid JSON that parses back to the value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(JSON.parse(canonicalJson(v))).toEqual(JSON.parse(JSON.stringify(v)));
      }),
    );
  });

  it('does not depend on key insertion order', () => {
    const a = canonicalJson({ x: 1, y: { p: 1, q: 2 }, z: [1, 2] });
    const b = canonicalJson({ z: [1, 2], y: { q: 2, p: 1 }, x: 1 });
    expect(a).toBe(b);
  });

  it('orders keys by UTF-16 code units and escapes like JSON.stringify', () => {
    expect(canonicalJson({ b: 1, B: 2, é: 3, '"': 4, '\n': 5 })).toBe(JSON.stringify({ '\n': 5, '"': 4, B: 2, b: 1, é: 3 }));
  });

  it('writes -0 as 0 and keeps floats exact', () => {
    expect(canonicalJson([-0, 0.1, 1e21, 5e-324])).toBe('[0,0.1,1e+21,5e-324]');
    expect(JSON.parse(canonicalJson(0.1 + 0.2))).toBe(0.1 + 0.2);
  });

  it('rejects non-JSON values naming the path', () => {
    expect(invalid(() => canonicalJson({ a: [1, NaN] }, 'batch.set.m')).field).toBe('batch.set.m.a[1]');
    expect(invalid(() => canonicalJson({ a: Infinity })).field).toBe('value.a');
    expect(invalid(() => canonicalJson({ a: undefined })).field).toBe('value.a');
    expect(invalid(() => canonicalJson({ 'odd key': () => 1 })).field).toBe('value["odd key"]');
    expect(invalid(() => canonicalJson({ n: 1n })).field).toBe('value.n');
    expect(invalid(() => canonicalJson({ d: new Date(0) })).field).toBe('value.d');
    expect(invalid(() => canonicalJson([Symbol('s')])).field).toBe('value[0]');
    expect(invalid(() => canonicalJson(undefined)).field).toBe('value');
  });

  it('rejects cycles, too-deep nesting and lone surrogates', () => {
    const cyc: Record<string, unknown> = { a: 1 };
    cyc.self = cyc;
    expect(invalid(() => canonicalJson(cyc)).message).toContain('circular');
    let deep: unknown = 1;
    for (let i = 0; i < 600; i++) deep = [deep];
    invalid(() => canonicalJson(deep));
    invalid(() => canonicalJson({ s: 'a\uD800b' }));
    invalid(() => canonicalJson({ ['k\uDC00']: 1 }));
    // A shared (non-cyclic) sub-object is fine.
    const shared = { k: 1 };
    expect(canonicalJson([shared, shared])).toBe('[{"k":1},{"k":1}]');
    // Well-formed astral characters are fine.
    expect(canonicalJson('😀')).toBe('"😀"');
  });
});

describe('encodeValue', () => {
  it('maps JSON values to kinds', () => {
    expect(encodeValue(3, 'v')).toEqual({ kind: 'int', i64: 3n });
    expect(encodeValue(-0, 'v')).toEqual({ kind: 'int', i64: 0n });
    expect(encodeValue(Number.MAX_SAFE_INTEGER, 'v')).toEqual({ kind: 'int', i64: 2n ** 53n - 1n });
    expect(encodeValue(-Number.MAX_SAFE_INTEGER, 'v')).toEqual({ kind: 'int', i64: -(2n ** 53n - 1n) });
    expect(encodeValue(0.8, 'v')).toEqual({ kind: 'float', f64: 0.8 });
    expect(encodeValue(true, 'v')).toEqual({ kind: 'bool', bool: true });
    expect(encodeValue('42', 'v')).toEqual({ kind: 'str', str: '42' });
    expect(encodeValue('', 'v')).toEqual({ kind: 'str', str: '' });
    expect(encodeValue({ k: [1, 2] }, 'v')).toEqual({ kind: 'json', json: '{"k":[1,2]}' });
    expect(encodeValue([{ b: 1, a: 2 }], 'v')).toEqual({ kind: 'json', json: '[{"a":2,"b":1}]' });
    expect(encodeValue({}, 'v')).toEqual({ kind: 'json', json: '{}' });
    expect(encodeValue([], 'v')).toEqual({ kind: 'json', json: '[]' });
  });

  it('rejects integers beyond 2^53 given as numbers, pointing at {"$int": ...}', () => {
    for (const n of [2 ** 53, -(2 ** 53), 2 ** 63, 1e300]) {
      const e = invalid(() => encodeValue(n, 'batch.set.n'));
      expect(e.field).toBe('batch.set.n');
      expect(e.message).toContain('$int');
    }
  });

  it('reads {"$int": "<decimal>"} exactly within signed int64', () => {
    const cases: [string, bigint][] = [
      ['9223372036854775807', INT64_MAX],
      ['-9223372036854775808', INT64_MIN],
      ['9007199254740993', 2n ** 53n + 1n],
      ['0', 0n],
      ['-1', -1n],
      ['007', 7n],
    ];
    for (const [s, want] of cases) expect(encodeValue({ $int: s }, 'v')).toEqual({ kind: 'int', i64: want });
    expect(INT64_MAX).toBe(2n ** 63n - 1n);
    expect(INT64_MIN).toBe(-(2n ** 63n));
  });

  it('rejects bad {"$int"} values', () => {
    expect(invalid(() => encodeValue({ $int: '9223372036854775808' }, 'batch.set.n')).field).toBe('batch.set.n.$int');
    expect(invalid(() => encodeValue({ $int: '-9223372036854775809' }, 'v')).message).toContain('64-bit');
    for (const bad of ['1.5', '1e3', 'abc', '', ' 1', '+1', '0x10', 5, null, '1'.repeat(30)]) invalid(() => encodeValue({ $int: bad }, 'v'));
    expect(invalid(() => encodeValue({ $int: '1', other: 2 }, 'v')).message).toContain('no other keys');
  });

  it('reads {"$blob": base64} into bytes with size and sha256 checksum', () => {
    const bytes = randomBytes(1000);
    const v = encodeValue({ $blob: bytes.toString('base64') }, 'v');
    expect(v.kind).toBe('blob');
    if (v.kind !== 'blob') return;
    expect(Buffer.from(v.bytes).equals(bytes)).toBe(true);
    expect(v.size).toBe(1000);
    expect(v.checksum).toBe(`sha256:${createHash('sha256').update(bytes).digest('hex')}`);
    const empty = encodeValue({ $blob: '' }, 'v');
    expect(empty).toMatchObject({ kind: 'blob', size: 0, checksum: `sha256:${createHash('sha256').digest('hex')}` });
  });

  it('validates base64 strictly', () => {
    // 'YQ==' is "a". Missing padding, junk, whitespace, url alphabet, non-zero pad bits: all rejected.
    expect(decodeBase64Strict('YQ==')).toEqual(new Uint8Array([97]));
    for (const bad of ['YQ', 'YQ=', 'Y Q==', 'YQ==\n', 'YR==', '-_8=', 'YQ==YQ==', '====', 'abc', '*AAA', 'YWJj\r\n']) {
      expect(decodeBase64Strict(bad)).toBeNull();
      const e = invalid(() => encodeValue({ $blob: bad }, 'batch.set.image'));
      expect(e.field).toBe('batch.set.image.$blob');
      expect(e.message).toContain('base64');
    }
    invalid(() => encodeValue({ $blob: 123 }, 'v'));
    invalid(() => encodeValue({ $blob: 'YQ==', name: 'x' }, 'v'));
  });

  it('accepts exactly what Buffer encodes (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (b) => {
        const v = encodeValue({ $blob: Buffer.from(b).toString('base64') }, 'v');
        expect(v.kind === 'blob' && Buffer.from(v.bytes).equals(Buffer.from(b))).toBe(true);
      }),
    );
  });

  it('rejects null, undefined, non-finite numbers, $blobRef and lone surrogates', () => {
    const n = invalid(() => encodeValue(null, 'batch.set.x'));
    expect(n.field).toBe('batch.set.x');
    expect(n.message).toContain('null');
    invalid(() => encodeValue(undefined, 'v'));
    invalid(() => encodeValue(NaN, 'v'));
    invalid(() => encodeValue(-Infinity, 'v'));
    invalid(() => encodeValue(() => 1, 'v'));
    invalid(() => encodeValue({ $blobRef: { eventId: 'x', size: 1, checksum: 'y' } }, 'v'));
    invalid(() => encodeValue('\uDFFF', 'v'));
    invalid(() => encodeValue({ a: NaN }, 'v'));
  });

  it('keeps reserved keys below the top level as plain json', () => {
    expect(encodeValue({ x: { $int: '5' } }, 'v')).toEqual({ kind: 'json', json: '{"x":{"$int":"5"}}' });
    expect(encodeValue([{ $blob: 'YQ==' }], 'v')).toEqual({ kind: 'json', json: '[{"$blob":"YQ=="}]' });
  });

  it('accepts bigint and Uint8Array from the TypeScript API', () => {
    expect(encodeValue(INT64_MIN, 'v')).toEqual({ kind: 'int', i64: INT64_MIN });
    invalid(() => encodeValue(INT64_MAX + 1n, 'v'));
    const v = encodeValue(new Uint8Array([1, 2, 3]), 'v');
    expect(v).toMatchObject({ kind: 'blob', size: 3, checksum: blobChecksum(new Uint8Array([1, 2, 3])) });
  });
});

describe('decodeValue', () => {
  it('round-trips int64 edge cases exactly', () => {
    expect(roundTrip(Number.MAX_SAFE_INTEGER)).toBe(Number.MAX_SAFE_INTEGER);
    expect(roundTrip(-Number.MAX_SAFE_INTEGER)).toBe(-Number.MAX_SAFE_INTEGER);
    expect(roundTrip({ $int: '9007199254740991' })).toBe(9007199254740991);
    expect(roundTrip({ $int: '9007199254740992' })).toEqual({ $int: '9007199254740992' });
    expect(roundTrip({ $int: '9007199254740993' })).toEqual({ $int: '9007199254740993' });
    expect(roundTrip({ $int: '-9007199254740992' })).toEqual({ $int: '-9007199254740992' });
    expect(roundTrip({ $int: (2n ** 63n - 1n).toString() })).toEqual({ $int: '9223372036854775807' });
    expect(roundTrip({ $int: (-(2n ** 63n)).toString() })).toEqual({ $int: '-9223372036854775808' });
  });

  it('round-trips every int64 (property)', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: INT64_MIN, max: INT64_MAX }), (i) => {
        const out = roundTrip({ $int: i.toString() });
        const back = typeof out === 'number' ? BigInt(out) : BigInt((out as { $int: string }).$int);
        expect(back).toBe(i);
        expect(typeof out === 'number').toBe(i >= -(2n ** 53n - 1n) && i <= 2n ** 53n - 1n);
        // What fold prints can be sent back and means the same integer.
        expect(encodeValue(out, 'v')).toEqual({ kind: 'int', i64: i });
      }),
    );
  });

  it('round-trips floats, bools, strings and json', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Number.isInteger(d)), (d) => {
        expect(roundTrip(d)).toBe(d);
      }),
    );
    expect(roundTrip(false)).toBe(false);
    expect(roundTrip('héllo 😀')).toBe('héllo 😀');
    fc.assert(
      fc.property(fc.oneof(fc.array(fc.jsonValue()), fc.dictionary(fc.string().filter((k) => !k.startsWith('$')), fc.jsonValue())), (v) => {
        expect(roundTrip(v)).toEqual(JSON.parse(JSON.stringify(v)));
      }),
    );
  });

  it('turns a blob into a $blobRef without touching value_blob', () => {
    const bytes = randomBytes(33);
    const row = rowOf(encodeValue({ $blob: bytes.toString('base64') }, 'v'), 'a'.repeat(32));
    Object.defineProperty(row, 'value_blob', {
      get() {
        throw new Error('value_blob was read');
      },
    });
    expect(decodeValue(row)).toEqual({ $blobRef: { eventId: 'a'.repeat(32), size: 33, checksum: blobChecksum(bytes) } });
  });

  it('accepts int64 columns that arrive as numbers', () => {
    const row = rowOf({ kind: 'int', i64: 5n });
    (row as unknown as { value_i64: number }).value_i64 = 5;
    expect(decodeValue(row)).toBe(5);
  });

  it('reports undecodable rows as CorruptError', () => {
    const json = rowOf({ kind: 'json', json: '{"a":1}' });
    expect(() => decodeValue({ ...json, value_json: '{nope' })).toThrow(CorruptError);
    expect(() => decodeValue({ ...json, value_json: null })).toThrow(CorruptError);
    expect(() => decodeValue({ ...json, value_kind: 'weird' as never, field_type: null })).toThrow(CorruptError);
    expect(() => decodeValue({ ...json, value_kind: null, field_type: null })).toThrow(CorruptError);
    expect(() => decodeValue({ ...json, field_type: FIELD_TYPES.str })).toThrow(CorruptError);
    expect(() => decodeValue({ ...json, codec_version: CODEC_VERSION + 1 })).toThrow(/codec_version/);
    const blob = rowOf({ kind: 'blob', bytes: new Uint8Array(), size: 0, checksum: blobChecksum(new Uint8Array()) });
    expect(() => decodeValue({ ...blob, payload_checksum: null })).toThrow(CorruptError);
  });
});

describe('valueColumns and codec ids', () => {
  it('has one distinct, versioned codec id per kind', () => {
    expect(Object.keys(FIELD_TYPES).sort()).toEqual([...VALUE_KINDS].sort());
    const ids = Object.values(FIELD_TYPES);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^dgcl\.[a-z0-9.]+\.v1$/);
    expect(CODEC_VERSION).toBe(1);
  });

  it('sets exactly the column of the kind', () => {
    const samples: EncodedValue[] = [
      encodeValue(1, 'v'),
      encodeValue(1.5, 'v'),
      encodeValue(true, 'v'),
      encodeValue('s', 'v'),
      encodeValue({ a: 1 }, 'v'),
      encodeValue({ $blob: 'AAEC' }, 'v'),
    ];
    const valueCols = ['value_i64', 'value_f64', 'value_bool', 'value_str', 'value_json', 'value_blob'] as const;
    samples.forEach((s, i) => {
      const c = valueColumns(s);
      expect(c.value_kind).toBe(s.kind);
      expect(c.field_type).toBe(FIELD_TYPES[s.kind]);
      expect(c.codec_version).toBe(CODEC_VERSION);
      valueCols.forEach((col, j) => expect(c[col] === null).toBe(i !== j));
      expect(c.payload_size === null).toBe(s.kind !== 'blob');
      expect(c.payload_checksum === null).toBe(s.kind !== 'blob');
    });
  });
});

describe('verifyBlob', () => {
  it('accepts matching bytes and rejects any change', () => {
    const bytes = randomBytes(100);
    const sum = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    expect(blobChecksum(bytes)).toBe(sum);
    expect(() => verifyBlob(bytes, sum)).not.toThrow();
    expect(() => verifyBlob(bytes, sum, 100)).not.toThrow();
    expect(() => verifyBlob(bytes, sum, 99)).toThrow(CorruptError);
    const flipped = Buffer.from(bytes);
    flipped[50] = flipped[50]! ^ 1;
    expect(() => verifyBlob(flipped, sum)).toThrow(CorruptError);
    expect(() => verifyBlob(bytes, `md5:${'0'.repeat(32)}`)).toThrow(CorruptError);
    expect(() => verifyBlob(bytes.subarray(1), sum, null, 'blob of event X')).toThrow(/blob of event X/);
  });
});
