import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseBatch } from '../../lib/batch.ts';
import { canonicalJson } from '../../lib/codec.ts';
import { InvalidInputError } from '../../lib/errors.ts';

let accepted = 0;

/** parseBatch either succeeds with a well-formed batch or throws InvalidInputError naming a field. */
function checkParse(input: unknown): void {
  let b;
  try {
    b = parseBatch(input);
  } catch (e) {
    if (!(e instanceof InvalidInputError)) throw e;
    expect(e.field === 'batch' || e.field!.startsWith('batch.') || e.field!.startsWith('batch[')).toBe(true);
    return;
  }
  accepted++;
  expect(b.events.length).toBeGreaterThan(0);
  expect(b.checkpointId).toMatch(/^[0-9a-f]{32}$/);
  const ids = b.events.map((e) => e.eventId);
  expect(new Set(ids).size).toBe(ids.length);
}

/** Reorders every object's keys with a seeded shuffle. */
function permuteKeys(v: unknown, seed: number): unknown {
  let s = seed >>> 0 || 1;
  const rnd = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
  const walk = (x: unknown): unknown => {
    if (Array.isArray(x)) return x.map(walk);
    if (x && typeof x === 'object') {
      const entries = Object.entries(x);
      for (let i = entries.length - 1; i > 0; i--) {
        const j = Math.floor(rnd() * (i + 1));
        [entries[i], entries[j]] = [entries[j]!, entries[i]!];
      }
      const out: Record<string, unknown> = {};
      for (const [k, val] of entries) Object.defineProperty(out, k, { value: walk(val), enumerable: true, writable: true, configurable: true });
      return out;
    }
    return x;
  };
  return walk(v);
}

const junk = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom(undefined, NaN, Infinity, -0, 2 ** 53, 1.5, -1, '', '\u0000', '\uD800'));
/** Mostly valid, sometimes junk, so both the success and the error paths are exercised. */
const mostly = <T,>(good: fc.Arbitrary<T>) => fc.oneof({ arbitrary: good, weight: 15 }, { arbitrary: junk, weight: 1 });
const name = fc.oneof(
  { arbitrary: fc.constantFrom('a', 'doc-17', 'x'.repeat(512)), weight: 12 },
  { arbitrary: fc.constantFrom('x'.repeat(513), '', 'a\nb'), weight: 1 },
  { arbitrary: fc.string({ maxLength: 20 }), weight: 2 },
);
const value = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.integer(),
  fc.string(),
  fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map((i) => ({ $int: i.toString() })),
  fc.uint8Array({ maxLength: 20 }).map((b) => ({ $blob: Buffer.from(b).toString('base64') })),
  fc.string({ maxLength: 8 }).map((s) => ({ $blob: s })),
  junk,
);
const fieldMap = (v: fc.Arbitrary<unknown>) => mostly(fc.dictionary(fc.oneof(name, fc.constantFrom('__proto__', '$int')), v, { maxKeys: 4 }));
const batchLike = fc.record(
  {
    itemId: mostly(name),
    runId: mostly(name),
    create: mostly(fc.record({ rootItemId: mostly(name), parentItemId: mostly(name) }, { requiredKeys: [] })),
    step: mostly(
      fc.record({ name: mostly(name), index: mostly(fc.nat()), instanceId: mostly(name), iteration: mostly(fc.nat()) }, { requiredKeys: ['name'] }),
    ),
    attempt: mostly(fc.integer({ min: -2, max: 2 ** 31 })),
    set: fieldMap(value),
    append: fieldMap(mostly(fc.array(value, { maxLength: 3 }))),
    complete: mostly(fc.boolean()),
    failed: mostly(fc.record({ errorType: mostly(name), errorDump: mostly(fc.string()), traceback: fc.string() }, { requiredKeys: ['errorType'] })),
    terminal: mostly(fc.constantFrom('completed', 'filtered', 'done')),
    queryTags: mostly(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 }))),
  },
  { requiredKeys: ['itemId', 'runId'] },
).chain((b) => fc.oneof({ arbitrary: fc.constant(b), weight: 19 }, { arbitrary: junk.map((extra) => ({ ...b, extra })), weight: 1 }));

/** Batches that are valid by construction. */
const validBatch = fc.record(
  {
    itemId: fc.constantFrom('doc-1', 'doc-2'),
    runId: fc.constant('run'),
    create: fc.record({ rootItemId: fc.constant('root'), parentItemId: fc.constant('p') }, { requiredKeys: [] }),
    step: fc.record({ name: fc.constant('gen'), index: fc.nat(5), instanceId: fc.constant('g#1'), iteration: fc.nat(3) }, { requiredKeys: ['name'] }),
    attempt: fc.integer({ min: 1, max: 4 }),
    set: fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }).filter((k) => !/[\u0000-\u001f\u007f-\u009f]/.test(k)), fc.jsonValue({ maxDepth: 3 }).filter((v) => v !== null && !(typeof v === 'number' && !Number.isSafeInteger(v) && Number.isInteger(v))), {
      minKeys: 1,
      maxKeys: 5,
    }),
    queryTags: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })),
  },
  { requiredKeys: ['itemId', 'runId', 'set'] },
);

describe('parseBatch fuzz', () => {
  it('throws nothing but InvalidInputError on arbitrary JSON', () => {
    fc.assert(fc.property(fc.jsonValue(), checkParse), { numRuns: 500 });
  });

  it('throws nothing but InvalidInputError on arbitrary JS values', () => {
    fc.assert(fc.property(fc.anything({ withNullPrototype: true, withBoxedValues: true, withMap: true, withSet: true, withBigInt: true, withDate: true, withTypedArray: true, withSparseArray: true }), checkParse), {
      numRuns: 500,
    });
  });

  it('throws nothing but InvalidInputError on batch-shaped input', () => {
    accepted = 0;
    fc.assert(fc.property(batchLike, checkParse), { numRuns: 3000 });
    // The generator must also reach the success path, or the property says little.
    expect(accepted).toBeGreaterThan(30);
  });

  it('gives the same ids to valid batches whatever their key order (and after a JSON round trip)', () => {
    fc.assert(
      fc.property(validBatch, fc.integer(), (b, seed) => {
        const a = parseBatch(b);
        const p = parseBatch(permuteKeys(b, seed));
        const j = parseBatch(JSON.parse(JSON.stringify(permuteKeys(b, seed + 1))));
        expect(p.checkpointId).toBe(a.checkpointId);
        expect(j.checkpointId).toBe(a.checkpointId);
        expect(p.events.map((e) => e.eventId)).toEqual(a.events.map((e) => e.eventId));
      }),
      { numRuns: 300 },
    );
  });
});

describe('canonicalJson fuzz', () => {
  it('is stable under key permutation', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer(), (v, seed) => {
        expect(canonicalJson(permuteKeys(v, seed))).toBe(canonicalJson(v));
      }),
      { numRuns: 500 },
    );
  });

  it('is a fixed point: canonical text re-canonicalizes to itself', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const c = canonicalJson(v);
        expect(canonicalJson(JSON.parse(c))).toBe(c);
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with a reference implementation', () => {
    // Written out by hand: JS objects put integer-like keys first, so a key-sorted copy would not do.
    const ref = (x: unknown): string =>
      Array.isArray(x)
        ? `[${x.map(ref).join(',')}]`
        : x && typeof x === 'object'
          ? `{${Object.keys(x)
              .sort()
              .map((k) => `${JSON.stringify(k)}:${ref((x as Record<string, unknown>)[k])}`)
              .join(',')}}`
          : JSON.stringify(x);
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(canonicalJson(v)).toBe(ref(v));
      }),
      { numRuns: 500 },
    );
  });
});
