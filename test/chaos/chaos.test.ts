/**
 * A small seed of the chaos harness (test/chaos/run.ts) in every test run: the platform in its own
 * process, faults at every boundary, a kill -9 and restart at a random point (after damaged ledger
 * files refused a start) and one while a test command runs, a second start with --reset refused
 * while it runs, then every invariant checked from the outside. The big runs are in RELIABILITY.md
 * (`npm run chaos`). Nothing here is timed: a run that
 * stops making progress is reported as the `quiet` violation, with the last state it saw.
 */
import { runChaos } from './run';
import { summary } from './summary';

jest.setTimeout(600_000);

// Seed s10 draws every kind of item at this size: patches, test runs (two failing), pull requests,
// a hostile patch, poison, reused job ids, a cancellation and a late duplicate.
test('a small seed keeps every invariant through faults, kill -9 (once during a test run) and restarts', async () => {
  const report = await runChaos({
    jobs: 40,
    workspaces: 4,
    seed: 's10',
    kills: 1,
    killsDuringRuns: 1,
    stallMs: 150_000,
  });

  // The whole summary is the received value, so a failure shows every violation and fault count.
  expect(summary(report)).toMatch(/\nviolations: 0\n$/);
  expect(Object.keys(report.items).sort()).toEqual([
    'apply_patch',
    'conflict',
    'hostile_patch',
    'open_pr',
    'poison',
    'run_tests',
  ]);
  expect(report.lives).toBe(3);
  expect(report.faults['kill.during-run']).toBe(1);
  expect(Object.values(report.faults).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  // The state directory's faults: every restart met damaged ledger files first, and a second start
  // with --reset came while the platform ran (every life that does not end by a self-kill).
  expect(report.faults).toMatchObject({
    'ledger.damaged': report.lives - 1,
    'start.second-with-reset': expect.any(Number),
  });
});
