/**
 * The catalogue of guards in docs/design/invariants.md ("Guards") is the code's: every guard of
 * lib/guards.ts has one row, with the scenario generator and the proof status the mutants run
 * uses (test/sim/mutants.ts).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GUARDS } from '../../lib/guards.ts';
import { MUTANTS } from '../sim/mutants.ts';
import { REGRESSION_SEEDS } from '../sim/regressions.ts';

const doc = readFileSync(path.resolve(import.meta.dirname, '../../docs/design/invariants.md'), 'utf8');
const section = doc.slice(doc.indexOf('## Guards'), doc.indexOf('\n## ', doc.indexOf('## Guards') + 1));
const rows = [...section.matchAll(/^\| `([a-z-]+)` \|.*\| ([a-z-]+) \| (yes|not yet) \|$/gm)].map((m) => ({ guard: m[1]!, focus: m[2]!, proven: m[3] === 'yes' }));

describe('the catalogue of guards', () => {
  it('has one row per guard of lib/guards.ts, in its order', () => {
    expect(rows.map((r) => r.guard)).toEqual([...GUARDS]);
  });

  it('names the generator and the proof status the mutants run uses', () => {
    expect(rows).toEqual(MUTANTS.map((m) => ({ guard: m.guard, focus: m.focus, proven: m.proven })));
  });

  it('has a regression seed for every proven guard, found with its generator', () => {
    const proven = MUTANTS.filter((m) => m.proven);
    // Other seeds may name a guard too (a soak's find, with the generator it was found on).
    expect(proven.map((m) => REGRESSION_SEEDS.find((r) => r.guard === m.guard && r.focus === m.focus)?.focus ?? 'no seed')).toEqual(proven.map((m) => m.focus));
  });
});
