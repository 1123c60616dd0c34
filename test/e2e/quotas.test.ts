/**
 * Quotas are waits, end to end on the local platform: workspaces whose pull requests meet a GitHub
 * that refuses them beyond its secondary limit (403 with retry-after) and whose builds meet a
 * quota of concurrent builds all end SUCCEEDED, with nothing on a DLQ. A small run of the load
 * run the capacity model quotes (bench/quotas.bench.ts); no assertion on time.
 */
import { buildsAtOnce, busiestWindow, runUnderQuotas } from '../support/quota-run';

describe('quotas on the local platform', () => {
  it('a refusing GitHub and a build quota delay jobs and fail none: every job succeeds, no DLQ holds a message', async () => {
    const contentLimit = { creates: 1, windowMs: 6_000 };
    const buildQuota = 2;

    const run = await runUnderQuotas({ workspaces: 3, buildQuota, buildSeconds: 2, contentLimit, timeoutMs: 100_000 });

    expect(run.jobs.map((j) => [j.type, j.status])).toEqual(run.jobs.map((j) => [j.type, 'SUCCEEDED']));
    expect(Object.values(run.dlqMessages).every((n) => n === 0)).toBe(true);
    // Both quotas did say no (else this shows nothing), and neither was passed.
    expect(run.refusedCreates).toBeGreaterThan(0);
    expect(run.refusedBuildStarts).toBeGreaterThan(0);
    expect(run.pullRequestsCreated).toHaveLength(3);
    expect(busiestWindow(run.pullRequestsCreated, contentLimit.windowMs)).toBe(contentLimit.creates);
    expect(buildsAtOnce(run.builds).max).toBe(buildQuota);
  }, 120_000);
});
