/**
 * Seeds that reach a guard's window, by the guard they prove (lib/guards.ts). They run with every
 * guard on in every `npm run test:sim` and in sim.test.ts (they must pass), and
 * test/sim/mutants.test.ts asserts that each still fails with its guard switched off. A change to
 * the workload or the scheduler changes what a seed does: when one stops failing on its mutant,
 * replace it by a seed the mutants run finds (`npm run test:mutants -- --only GUARD`).
 */
import type { Guard } from '../../lib/guards.ts';
import type { Focus } from './config.ts';

export interface RegressionSeed {
  seed: number;
  /** The guard whose window it reaches (absent: a bug it found that no guard names). */
  guard?: Guard;
  /** The scenario generator it was found with (test/sim/config.ts). */
  focus: Focus;
  /** The window it reaches, in a few words. */
  name: string;
}

export const REGRESSION_SEEDS: readonly RegressionSeed[] = [
  // An append whose takeover sealed the previous epoch failed on a Lance error (fs.sync timed
  // out) and answered it raw, without a code (fixed: UNAVAILABLE; lib/log/seal.ts writeSeal).
  { seed: 154, focus: 'takeover', name: 'a takeover seal failing on a Lance error answered an append untyped' },
];
