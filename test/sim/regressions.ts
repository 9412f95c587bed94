/**
 * Seeds that found bugs, by name. They run on every `npm run test:sim` and in sim.test.ts, so
 * a fix that regresses shows at once. Add a seed when the harness finds a new bug.
 */
export const REGRESSION_SEEDS: ReadonlyArray<{ seed: number; name: string }> = [];
