/**
 * Quotas as back-pressure, measured on the local platform (test/support/quota-run.ts): workspaces
 * each send an apply_patch, a command job and an open_pr, against a GitHub stand-in that refuses
 * pull requests beyond a rate with its secondary-limit answer (403, `retry-after`) and a build
 * quota of N concurrent builds. The capacity model (SCALE.md) quotes it: no job lost, none failed
 * because of a quota, builds held at N, pull requests held at the stand-in's rate. Emulated: the
 * waits go through fauxqs and the local pollers, not through AWS's SQS and Lambda.
 */
import { buildsAtOnce, busiestWindow, createsPerMinuteAtLimit, runUnderQuotas } from '../test/support/quota-run';
import { fmt, loadDuring, loadLine, quick, type Benchmark } from './harness';

const BUILD_QUOTA = 3;
const BUILD_SECONDS = 4;
/** The stand-in's secondary limit: 6 pull requests in any 10 s (36 a minute). */
const CONTENT_LIMIT = { creates: 6, windowMs: 10_000 };

export const bench: Benchmark = {
  name: 'quotas',
  async run() {
    const workspaces = quick() ? 12 : 30;
    const loadBefore = loadLine();
    const run = await runUnderQuotas({
      workspaces,
      buildQuota: BUILD_QUOTA,
      buildSeconds: BUILD_SECONDS,
      contentLimit: CONTENT_LIMIT,
    });
    const byStatus = new Map<string, number>();
    for (const job of run.jobs) byStatus.set(job.status, (byStatus.get(job.status) ?? 0) + 1);
    const onDlqs = Object.values(run.dlqMessages).reduce((a, b) => a + b, 0);
    const builds = buildsAtOnce(run.builds);
    const allowedPerMinute = (CONTENT_LIMIT.creates / CONTENT_LIMIT.windowMs) * 60_000;
    const prsPerMinute = createsPerMinuteAtLimit(run.pullRequestsCreated, CONTENT_LIMIT.creates);
    const statuses = [...byStatus].map(([status, n]) => `${n} ${status}`).join(', ');
    return {
      title: 'Quotas as back-pressure: a refusing GitHub and a build quota',
      description: [
        `${workspaces} workspaces on the local platform, each sending an apply_patch, a ${BUILD_SECONDS} s build and an open_pr at once (${run.jobs.length} jobs).`,
        `Quota stand-ins: the local test runner starts at most ${BUILD_QUOTA} builds at once and refuses the next start as CodeBuild refuses one`,
        `beyond the project's concurrent build limit; a loopback GitHub accepts ${CONTENT_LIMIT.creates} pull requests in any ${CONTENT_LIMIT.windowMs / 1000} s`,
        `(${allowedPerMinute} a minute) and answers the next with its secondary-limit 403 and \`retry-after\` (test/support/fake-github.ts).`,
        "Every refusal is a wait of the job (decisions §30): counted here, never a failure. Builds at once come from the builds' own",
        "clocks, which leave out each run's start and end (sandbox, checkout) that hold a slot too, so the mean reads low on a busy machine;",
        "pull requests a minute from the stand-in's: those after the first window's (which may go at once) over the time from the first",
        'to the last. SCALE.md quotes this run. Emulated: fauxqs and the local pollers stand in for',
        `SQS and Lambda. Command: \`npm run bench -- quotas\`. ${loadDuring(loadBefore)}`,
      ].join('\n'),
      rows: [
        { label: 'jobs by final status', value: statuses },
        { label: 'messages on the DLQs at the end', value: String(onDlqs) },
        { label: 'builds at once: most / quota', value: `${builds.max} / ${BUILD_QUOTA}` },
        {
          label: 'builds at once: mean while jobs waited (first start to last start) / quota',
          value: `${builds.meanWhileWaiting.toFixed(2)} / ${BUILD_QUOTA} (${fmt.ratio(builds.meanWhileWaiting / BUILD_QUOTA)})`,
        },
        { label: 'build starts refused by the quota (each a wait)', value: String(run.refusedBuildStarts) },
        {
          label: "pull requests a minute / the stand-in's rate",
          value: `${prsPerMinute.toFixed(1)} / ${allowedPerMinute} (${fmt.ratio(prsPerMinute / allowedPerMinute)})`,
        },
        {
          label: `pull requests in the busiest ${CONTENT_LIMIT.windowMs / 1000} s / the stand-in's limit`,
          value: `${busiestWindow(run.pullRequestsCreated, CONTENT_LIMIT.windowMs)} / ${CONTENT_LIMIT.creates}`,
        },
        {
          label: 'pull requests refused by the stand-in (403, retry-after; each a wait)',
          value: String(run.refusedCreates),
        },
        { label: "first send to the last job's end", value: `${(run.elapsedMs / 1000).toFixed(0)} s` },
      ],
      summary: [
        {
          measure: 'jobs lost or failed under quotas',
          value: String(run.jobs.filter((j) => j.status !== 'SUCCEEDED').length + onDlqs),
          goal: '0',
        },
        {
          measure: 'builds at once vs the quota (most, mean)',
          value: `${builds.max}, ${builds.meanWhileWaiting.toFixed(2)} of ${BUILD_QUOTA}`,
          goal: `${BUILD_QUOTA} (never more), the mean below it only by the runs' start and end`,
        },
        {
          measure: 'pull requests a minute vs a refusing GitHub',
          value: `${prsPerMinute.toFixed(1)} of ${allowedPerMinute}`,
          goal: `never above ${allowedPerMinute}, near it`,
        },
      ],
    };
  },
};
