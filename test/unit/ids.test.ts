import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DgclError } from '../../lib/errors.ts';
import { checkpointId, eventId, isId } from '../../lib/ids.ts';

const HEX32 = /^[0-9a-f]{32}$/;

describe('checkpointId', () => {
  it('is 32 lowercase hex chars, deterministic, and depends on the content', () => {
    const a = checkpointId('{"a":1}');
    expect(a).toMatch(HEX32);
    expect(checkpointId('{"a":1}')).toBe(a);
    expect(checkpointId('{"a":2}')).not.toBe(a);
    expect(checkpointId('')).toMatch(HEX32);
    expect(checkpointId('é')).not.toBe(checkpointId('e'));
  });

  it('is the first 128 bits of a domain-separated sha256 of the content', () => {
    const content = '{"itemId":"x"}';
    const want = createHash('sha256').update(`dgcl.checkpoint.v1\n${content}`).digest('hex').slice(0, 32);
    expect(checkpointId(content)).toBe(want);
    // Domain separation: not the plain hash of the content.
    expect(checkpointId(content)).not.toBe(createHash('sha256').update(content).digest('hex').slice(0, 32));
  });
});

describe('eventId', () => {
  it('is 32 lowercase hex chars, deterministic, distinct per index and per checkpoint', () => {
    const cp = checkpointId('batch');
    const ids = Array.from({ length: 10_000 }, (_, i) => eventId(cp, i));
    for (const id of ids.slice(0, 100)) expect(id).toMatch(HEX32);
    expect(new Set(ids).size).toBe(ids.length);
    expect(eventId(cp, 3)).toBe(ids[3]);
    expect(eventId(checkpointId('other'), 0)).not.toBe(ids[0]);
    expect(ids).not.toContain(cp);
    expect(eventId(cp, 0)).toBe(createHash('sha256').update(`dgcl.event.v1\n${cp}\n0`).digest('hex').slice(0, 32));
  });

  it('refuses a bad index', () => {
    for (const bad of [-1, 1.5, NaN, Infinity]) expect(() => eventId('c', bad)).toThrow(DgclError);
  });

  it('isId recognizes ids', () => {
    expect(isId(eventId(checkpointId('x'), 1))).toBe(true);
    expect(isId('A'.repeat(32))).toBe(false);
    expect(isId('a'.repeat(31))).toBe(false);
    expect(isId(5)).toBe(false);
  });
});
