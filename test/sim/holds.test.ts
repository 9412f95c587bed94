/**
 * The scheduler's holds (test/sim/scheduler.ts `hold`, used by the relist focus's steering,
 * test/sim/steer.ts): a held actor's requests wait until what the hold waits for happened, or its
 * cap of steps passed; a hold outlasts the pauses when nothing else can run.
 */
import { describe, expect, it } from 'vitest';
import { Rng } from './prng.ts';
import { Scheduler } from './scheduler.ts';

function setup() {
  const sched = new Scheduler(new Rng(1), { faultRate: 0 });
  const op = (actor: string, kind: string, target = 'k') =>
    sched.run(actor, () => sched.op({ kind, target, mutating: false, faultable: false, run: () => Promise.resolve(kind), error: (m) => new Error(m) }));
  const eligible = () => sched.eligible().map((o) => `${o.actor} ${o.spec.kind}`);
  return { sched, op, eligible };
}

describe('scheduler holds', () => {
  it("keeps a held actor's requests back until what it waits for happened", () => {
    const { sched, op, eligible } = setup();
    let happened = false;
    void op('r1', 'obj.list');
    void op('w1', 'lance.add');
    sched.hold('r1', 'the commit', 100, () => happened);
    expect(eligible()).toEqual(['w1 lance.add']);
    happened = true;
    expect(eligible()).toEqual(['r1 obj.list', 'w1 lance.add']);
    expect(sched.trace.at(-1)).toBe('0 hold of r1 ends: the commit');
  });

  it('holds only the requests its filter accepts', () => {
    const { sched, op, eligible } = setup();
    void op('r1', 'obj.get', 'seal.e1');
    void op('r1', 'obj.list', 'meta');
    sched.hold('r1', 'a seal deleted', 100, () => false, (o) => o.spec.target.startsWith('seal.'));
    expect(eligible()).toEqual(['r1 obj.list']);
  });

  it('ends a hold once its cap of released steps passed', async () => {
    const { sched, op, eligible } = setup();
    void op('r1', 'obj.list');
    sched.hold('r1', 'never', 2, () => false);
    for (let i = 0; i < 2; i++) {
      void op('w1', `step${i}`);
      expect(eligible()).toEqual([`w1 step${i}`]);
      await sched.release(sched.eligible()[0]!, 'ok');
    }
    expect(eligible()).toEqual(['r1 obj.list']);
    expect(sched.trace.at(-1)).toBe('2 hold of r1 ends: waited long enough');
  });

  it('when nothing else can run, ends the pauses first and the holds only after', () => {
    const { sched, op, eligible } = setup();
    void op('r1', 'obj.list');
    void op('w1', 'lance.add');
    sched.hold('r1', 'the commit', 100, () => false);
    sched.pause('w1', 10);
    expect(eligible()).toEqual([]);
    expect(sched.hasPaused()).toBe(true);
    sched.unpauseAll();
    expect(eligible()).toEqual(['w1 lance.add']);
    sched.unpauseAll();
    expect(eligible()).toEqual(['r1 obj.list', 'w1 lance.add']);
    expect(sched.hasPaused()).toBe(false);
  });
});
