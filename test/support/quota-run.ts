/**
 * A load run of the local platform against quota stand-ins: a loopback GitHub that refuses pull
 * requests beyond a rate with its secondary-limit answer (403 and `retry-after`, fake-github.ts
 * `contentLimit`), and the local test runner's build quota (`buildQuota`: a start beyond N running
 * builds is refused as CodeBuild refuses one beyond the project's concurrent build limit). Each
 * workspace sends an apply_patch, a command job whose build stamps when it ran, and an open_pr.
 *
 * What it reports is what the capacity model (SCALE.md) needs from it: every job's end, what is
 * left on a DLQ, builds at once against N, pull requests created per minute against the stand-in's
 * rate, and how often each quota said no. bench/quotas.bench.ts prints it; a small run of it is
 * the correctness test (test/e2e/quotas.test.ts). Time is the caller's to judge: nothing here
 * asserts on it.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { Octokit } from '@octokit/core';
import { COMMAND_JOB_TYPES, type JobType } from '../../contract/job-types';
import { GitHubLimits } from '../../src/adapters/github-api';
import { GitHubPullRequestHost } from '../../src/adapters/github-pr-host';
import { systemClock } from '../../src/adapters/system';
import { enqueueAgentJobs, newJobId, type JobRequest } from '../../src/client';
import { localLedger } from '../../src/compose/local';
import { RetryAfterError } from '../../src/core/errors';
import type { JobRecord, TestRunner } from '../../src/core/ports';
import { createLocalClients } from '../../tools/local/emulators';
import { startPlatform } from '../../tools/local/platform';
import { eventually } from './eventually';
import { startFakeGitHub } from './fake-github';
import { git } from './git-fixtures';

export interface QuotaRunOptions {
  readonly workspaces: number;
  /** Builds the local test runner runs at once (the stand-in of CodeBuild's concurrent-build quota). */
  readonly buildQuota: number;
  /** How long each build's command runs. */
  readonly buildSeconds: number;
  /** The GitHub stand-in's secondary limit: creates in any window. */
  readonly contentLimit: { readonly creates: number; readonly windowMs: number };
  /** @default 600_000 */
  readonly timeoutMs?: number;
}

export interface QuotaRunResult {
  /** Every job's type and final status, in the order sent. */
  readonly jobs: readonly Pick<JobRecord, 'jobId' | 'type' | 'status'>[];
  /** Messages on any DLQ (visible or in flight), by DLQ URL, at the end. */
  readonly dlqMessages: Readonly<Record<string, number>>;
  /** Each build's run (epoch ms), from the build's own clock. */
  readonly builds: readonly { readonly from: number; readonly to: number }[];
  /** Starts the build quota refused (each a wait of its job). */
  readonly refusedBuildStarts: number;
  /** When each pull request was created on the stand-in (epoch ms). */
  readonly pullRequestsCreated: readonly number[];
  /** Creates the stand-in refused with its secondary-limit answer. */
  readonly refusedCreates: number;
  /** From the first send to the last job's end (ms). */
  readonly elapsedMs: number;
}

/** The command stage the run's builds belong to, and the pull-request stage: from the catalog. */
const COMMAND_TYPE = COMMAND_JOB_TYPES[0];
const PULL_REQUEST_TYPE = 'open_pr' satisfies JobType;
/** Where the stand-in keeps the pull requests of the platform's one repository. */
const GITHUB_REPO_URL = 'https://github.example/bench/demo.git';
const quietLog = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

export async function runUnderQuotas(options: QuotaRunOptions): Promise<QuotaRunResult> {
  if (COMMAND_TYPE === undefined)
    throw new Error('the catalog declares no command stage: there are no builds to put under a quota');
  const work = await mkdtemp(path.join(tmpdir(), 'agent-jobs-quotas-'));
  const github = await startFakeGitHub({ contentLimit: options.contentLimit });
  let refusedBuildStarts = 0;
  // GitHub's limits as the platform keeps to them: no pacing of its own here, so the stand-in's
  // refusals are what shapes the rate (on AWS each open_pr container keeps one of these).
  const limits = new GitHubLimits({ clock: systemClock });
  const pullRequests = new GitHubPullRequestHost(
    async () => new Octokit({ auth: 'stand-in-token', baseUrl: github.url, log: quietLog }),
    { limits },
  );
  const platform = await startPlatform({
    stateDir: path.join(work, 'state'),
    output: null,
    buildQuota: options.buildQuota,
    // Short back-offs: a job refused by the build quota comes back within seconds, as the quota wait's cap does on AWS within minutes.
    backoff: { baseSeconds: 1, capSeconds: 2 },
    decorateParts: (parts) => ({
      ...parts,
      testRunner: countingRefusals(parts.testRunner, () => (refusedBuildStarts += 1)),
      // The platform's repository is the stand-in's bench/demo: the pull requests go to the stand-in.
      prHost: { findOrCreate: (input) => pullRequests.findOrCreate({ ...input, repoUrl: GITHUB_REPO_URL }) },
    }),
  });
  const clients = createLocalClients(platform.info.endpoints);
  try {
    const src = path.join(work, 'src');
    await git(work, 'init', '--quiet', '--initial-branch=main', src);
    await writeFile(path.join(src, 'README.md'), 'quota run\n');
    await git(src, 'add', '.');
    await git(src, 'commit', '--quiet', '-m', 'initial');
    await platform.git.createBareRepo('demo', { fromDir: src });
    const repoUrl = platform.git.repoUrl('demo');
    const workspaces = Array.from({ length: options.workspaces }, (_, i) => `ws-quota-${i}`);
    for (const ws of workspaces) await git(src, 'push', '--quiet', platform.git.gitDir('demo'), `main:${ws}`);
    const requests = workspaces.flatMap((ws): JobRequest[] => [
      {
        workspaceId: ws,
        tenantId: 'tenant-1',
        jobId: newJobId(),
        type: 'apply_patch',
        payload: {
          repo: { url: repoUrl, branch: ws },
          diff: `diff --git a/${ws}.txt b/${ws}.txt\nnew file mode 100644\n--- /dev/null\n+++ b/${ws}.txt\n@@ -0,0 +1 @@\n+${ws}\n`,
          message: ws,
        },
      },
      // The build says when it started and ended (ms): builds at once are counted on the builds' own clocks.
      {
        workspaceId: ws,
        tenantId: 'tenant-1',
        jobId: newJobId(),
        type: COMMAND_TYPE,
        payload: {
          command: `test -f ${ws}.txt && echo "from $(date +%s%3N)" && sleep ${options.buildSeconds} && echo "to $(date +%s%3N)"`,
        },
      },
      {
        workspaceId: ws,
        tenantId: 'tenant-1',
        jobId: newJobId(),
        type: PULL_REQUEST_TYPE,
        payload: { baseBranch: 'main', title: `quota run ${ws}` },
      },
    ]);
    const started = Date.now();
    await enqueueAgentJobs(requests, { sqs: clients.sqs, queueUrl: platform.info.queueUrls['agent-jobs']! });
    const ledger = localLedger(platform.emulators);
    const ids = requests.map((r) => r.jobId!);
    const records = await eventually(
      () => Promise.all(ids.map((id) => ledger.getJob(id))),
      (seen) =>
        seen.every((r) => r !== undefined && !['IN_FLIGHT', 'RUNNING', 'FORWARDED', 'QUEUED'].includes(r.status)),
      { what: `${ids.length} jobs to end`, timeoutMs: options.timeoutMs ?? 600_000, intervalMs: 500 },
    );
    const elapsedMs = Date.now() - started;
    const dlqMessages: Record<string, number> = {};
    for (const dlqUrl of Object.values(platform.info.dlqUrls)) {
      const { Attributes } = await clients.sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: dlqUrl,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      );
      dlqMessages[dlqUrl] =
        Number(Attributes?.['ApproximateNumberOfMessages'] ?? 0) +
        Number(Attributes?.['ApproximateNumberOfMessagesNotVisible'] ?? 0);
    }
    const builds = records
      .filter((r) => r?.type === COMMAND_TYPE)
      .map((r) => {
        const tail = String(r?.result?.['logTail'] ?? '');
        return { from: Number(/from (\d+)/.exec(tail)?.[1]), to: Number(/to (\d+)/.exec(tail)?.[1]) };
      });
    return {
      jobs: records.map((r) => ({ jobId: r!.jobId, type: r!.type, status: r!.status })),
      dlqMessages,
      builds,
      refusedBuildStarts,
      pullRequestsCreated: [...github.creates],
      refusedCreates: github.refusedCreates,
      elapsedMs,
    };
  } finally {
    clients.destroy();
    await platform.stop();
    await github.close();
    await rm(work, { recursive: true, force: true });
  }
}

/** The runner, counting the starts its quota refuses (each is a RetryAfterError the job waits on). */
function countingRefusals<R extends TestRunner>(runner: R, refused: () => void): R {
  return Object.assign(Object.create(runner) as R, {
    start: async (...args: Parameters<TestRunner['start']>) => {
      try {
        return await runner.start(...args);
      } catch (error) {
        if (error instanceof RetryAfterError) refused();
        throw error;
      }
    },
  });
}

/**
 * The most builds running at one instant, and the mean number running from the first start to the
 * last start: until the last build started some job was waiting for a slot, so that mean against
 * the quota is how fully the waits kept the quota used (after it, the builds only drain).
 */
export function buildsAtOnce(builds: readonly { readonly from: number; readonly to: number }[]): {
  readonly max: number;
  readonly meanWhileWaiting: number;
} {
  const running = (at: number) => builds.filter((b) => b.from <= at && at < b.to).length;
  const max = Math.max(0, ...builds.map((b) => running(b.from)));
  const first = Math.min(...builds.map((b) => b.from));
  const last = Math.max(...builds.map((b) => b.from));
  const busy = builds.reduce((sum, b) => sum + Math.max(0, Math.min(b.to, last) - Math.max(b.from, first)), 0);
  return { max, meanWhileWaiting: last > first ? busy / (last - first) : 0 };
}

/**
 * Pull requests a minute once the limit holds: the creates after the window's first `allowed`
 * (which may go at once), over the time from the first create to the last. A limit of `allowed`
 * in any window lets at most that rate through however the creates fall.
 */
export function createsPerMinuteAtLimit(createdAt: readonly number[], allowed: number): number {
  const sorted = [...createdAt].sort((a, b) => a - b);
  if (sorted.length <= allowed) return 0;
  return ((sorted.length - allowed) / (sorted[sorted.length - 1]! - sorted[0]!)) * 60_000;
}

/** The most creates in any window of `windowMs` (a window starting at a create): never above the stand-in's limit. */
export function busiestWindow(createdAt: readonly number[], windowMs: number): number {
  return Math.max(
    0,
    ...createdAt.map((start) => createdAt.filter((at) => at >= start && at < start + windowMs).length),
  );
}
