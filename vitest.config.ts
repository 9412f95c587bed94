import { defineConfig } from 'vitest/config';

// Two projects: `fast` (pure logic + embedded Lance in temp folders, no servers) for the inner
// loop, and `servers` (S3 on a local RGW, DynamoDB Local) started by scripts/test.sh.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'fast',
          include: ['test/**/*.test.ts'],
          exclude: ['test/**/*.servers.test.ts', 'node_modules/**'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          pool: 'forks',
        },
      },
      {
        test: {
          name: 'servers',
          include: ['test/**/*.servers.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          pool: 'forks',
          fileParallelism: false,
        },
      },
    ],
  },
});
