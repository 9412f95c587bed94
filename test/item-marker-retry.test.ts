/**
 * Item marker PUTs that fail transiently. S3 plain PUTs are sent once (lib/storage/s3.ts
 * sendOnce), so a transient failure of an item marker PUT (S3 SlowDown) failed the whole group;
 * the writer retries it with a new body each time (a body that failed is never trusted, so one
 * landing late is harmless). A retry of a group that fails on another item ends before the group
 * is answered.
 */
import { describe, expect, it } from 'vitest';
import { UnavailableError } from '../lib/errors.ts';
import { itemKey } from '../lib/log/layout.ts';
import { createBatch } from './support/batches.ts';
import { raceFixture } from './support/race-kit.ts';

const { setup } = raceFixture(60_000);

describe('a transient failure of an item marker PUT', () => {
  it('is retried with a new body, and the group is acked; three in a row fail it', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 1 });
    await A.log.append([createBatch('warm')]);
    const bodies: string[] = [];
    let refuse = 1;
    A.objects.tap.before = (op, key) => {
      if (op !== 'put' || key !== itemKey('x')) return;
      if (refuse-- > 0) throw new UnavailableError('SlowDown (refused by the test, nothing landed)');
    };
    A.objects.tap.after = (op, key) => {
      if (op === 'put' && key === itemKey('x')) bodies.push('landed');
    };
    const [ack] = await A.log.append([createBatch('x')]);
    expect(ack!.duplicate).toBe(false);
    expect(bodies).toEqual(['landed']);
    const marker = await A.objects.get(itemKey('x'));
    expect(marker, 'the marker names this writer').toMatch(new RegExp(`^${A.log.writerEpoch} `));
    expect((await A.log.fold('x')).lastSeq).toBe(ack!.lastSeq);

    A.objects.tap = {};
    refuse = 3;
    A.objects.tap.before = (op, key) => {
      if (op === 'put' && key === itemKey('z') && refuse-- > 0) throw new UnavailableError('SlowDown (refused by the test)');
    };
    const failed = await A.log.append([createBatch('z')]).catch((e: unknown) => e);
    expect(failed).toMatchObject({ code: 'UNAVAILABLE' });
    expect(refuse, 'three tries, each refused').toBe(0);
    A.objects.tap = {};
    const [retried] = await A.log.append([createBatch('z')]);
    expect(retried!.duplicate, 'nothing of z was committed').toBe(false);
  });
});

describe('a marker PUT retry of a group that fails on another item', () => {
  it('ends before the group is answered, so nothing is written after the answer or after close()', async () => {
    const { open } = setup();
    const A = open({ slot: 0, slots: 1 });
    await A.log.append([createBatch('warm')]);
    const order: string[] = [];
    let xTries = 0;
    let closed = false;
    A.objects.tap.before = (op, key) => {
      if (op !== 'put') return;
      if (key === itemKey('y')) throw new Error('AccessDenied (refused by the test): not retried, fails the group');
      if (key === itemKey('x') && ++xTries === 1) throw new UnavailableError('SlowDown (refused by the test, nothing landed)');
    };
    A.objects.tap.after = (op, key) => {
      if (op === 'put' && key === itemKey('x')) order.push(closed ? 'x landed after close' : 'x landed');
    };
    const answer = await A.log.append([createBatch('x'), createBatch('y')]).then(
      () => 'acked',
      (e: unknown) => String(e),
    );
    order.push('answered');
    expect(answer).toMatch(/AccessDenied/);
    await A.log.close();
    closed = true;
    await new Promise((r) => setTimeout(r, 50)); // a retry still under way would land now
    expect(xTries, 'x was tried twice').toBe(2);
    expect(order).toEqual(['x landed', 'answered']);
  });
});
