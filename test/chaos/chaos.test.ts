/**
 * A small seed of the chaos harness (test/chaos/run.ts) in every test run: the platform in its own
 * process, faults at every boundary, one kill -9 and restart, then every invariant checked from the
 * outside. The big runs are in RELIABILITY.md (`npm run chaos`).
 */
import { runChaos } from './run';
import { summary } from './summary';

jest.setTimeout(420_000);

test('a small seed keeps every invariant through faults, a kill -9 and a restart', async () => {
  const report = await runChaos({ jobs: 40, workspaces: 4, seed: 'npm-test', kills: 1, stallMs: 150_000 });

  expect({ violations: report.violationCount, summary: summary(report) }).toEqual({ violations: 0, summary: expect.any(String) });
  expect(Object.values(report.faults).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
});
