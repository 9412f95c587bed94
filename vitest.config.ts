import { defineConfig } from 'vitest/config';

// Five projects: `fast` (pure logic + embedded Lance in temp folders, no servers) for the inner
// loop, `package` (npm pack + install of the tarball into a temp project: about a minute, mostly
// npm), `sim` (the seeded interleaving simulation, test/sim/), and `servers` (S3 on a local RGW,
// DynamoDB Local) started by scripts/test.sh, and `langgraph` (LangGraph's checkpoint validation
// suite against the saver on a local root and on RGW: it needs the servers, and vitest globals,
// which the suite's spec files use without importing them).
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'fast',
          include: ['test/**/*.test.ts'],
          exclude: ['test/**/*.servers.test.ts', 'test/sim/**', 'test/langgraph/**', 'test/package.test.ts', 'node_modules/**'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          pool: 'forks',
        },
      },
      {
        test: {
          name: 'package',
          include: ['test/package.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 300_000,
          pool: 'forks',
        },
      },
      {
        // The seeded interleaving simulation (test/sim/) and its mutants: each file runs its own
        // worker processes on both cores, so the files run one after the other.
        test: {
          name: 'sim',
          include: ['test/sim/**/*.test.ts'],
          testTimeout: 3_600_000,
          pool: 'forks',
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'servers',
          include: ['test/**/*.servers.test.ts'],
          exclude: ['test/langgraph/**', 'node_modules/**'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          pool: 'forks',
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'langgraph',
          include: ['test/langgraph/**/*.test.ts'],
          globals: true,
          testTimeout: 120_000,
          hookTimeout: 120_000,
          pool: 'forks',
          fileParallelism: false,
        },
      },
    ],
  },
});
