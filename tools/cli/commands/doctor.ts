/** `doctor`: the post-deploy smoke check (the checks are in tools/cli/doctor.ts, loaded only by this command). */
import { setTimeout as sleep } from 'node:timers/promises';
import { numberOption, stringOption, type CommandSpec } from '../command';
import type { CliContext } from '../context';
import type { CheckResult, Clock } from '../doctor';
import { UsageError } from '../errors';
import { table } from '../output';
import { jobsQueue } from '../../operator/targets';

// require(), not import(): the bin runs through tsx's CommonJS hook, which does not serve import().
const loadDoctor = (): typeof import('../doctor') => require('../doctor');
const loadProducer = (): typeof import('../../../src/client/producer') => require('../../../src/client/producer');
const loadDiffStore = (): typeof import('../../../src/adapters/diff-store') =>
  require('../../../src/adapters/diff-store');

const PATH = ['doctor'] as const;
const DEFAULT_JOB_TIMEOUT_SECONDS = 900;
const systemClock: Clock = { now: () => Date.now(), sleep: (ms) => sleep(ms) };

export const doctor: CommandSpec<CliContext> = {
  path: PATH,
  summary:
    'smoke-check a deployed stack (outputs, an alarm notification, the secrets) or the local platform (test isolation), and one job end to end',
  options: {
    repo: {
      type: 'string',
      valueName: 'url',
      description: 'repository for the end-to-end job (the platform pushes to it)',
    },
    branch: {
      type: 'string',
      valueName: 'name',
      description:
        'a scratch branch of --repo: the job commits one file under .agent-jobs-doctor/ to it (default agent-jobs-doctor; the local platform creates it)',
    },
    timeout: {
      type: 'string',
      valueName: 'seconds',
      description: `how long the end-to-end job may take (default ${DEFAULT_JOB_TIMEOUT_SECONDS})`,
    },
    'skip-alarm': {
      type: 'boolean',
      description: "do not set an alarm to ALARM (its test notification reaches the topic's subscribers)",
    },
    'github-api': {
      type: 'string',
      valueName: 'url',
      description:
        "GitHub's REST API, where a GitHub App's installation on --repo is checked (default https://api.github.com)",
    },
  },
  notes: [
    'With --stack: every output answers, one alarm set to ALARM notifies the topic (then back to OK),',
    'every secret holds its documented shape (values are never printed), and a GitHub App in a secret is',
    'installed on --repo with contents: write and pull_requests: write. With --repo, also an apply_patch and a',
    'run_tests on a workspace of their own, on the scratch branch (the local platform creates it; on a stack the',
    'check says the command that creates it). Whatever the outcome, even after Ctrl-C, the run takes away what it',
    'left: a failed job is dismissed, a skipped one cancelled, a running run_tests cancelled (its build stopped),',
    'its workspace unblocked; a started apply_patch (cancel refuses it) is left to end, said so. On the local platform,',
    'how test commands are isolated (WARN below the full sandbox, naming what is missing). Exit code 1 when a check fails.',
    'Example: agent-jobs doctor --stack AgentJobs-prod --region eu-west-1 --repo https://github.com/acme/app.git',
  ],
  async run(ctx, { values }) {
    const repoUrl = stringOption(values, 'repo');
    if (repoUrl === undefined && values['branch'] !== undefined)
      throw new UsageError('--branch needs --repo (the repository the end-to-end job commits to)', PATH);
    const {
      checkJobEndToEnd,
      checkStack,
      checkTestIsolation,
      cleanUpScratchRun,
      DOCTOR_BRANCH,
      ensureLocalBranch,
      stackClients,
    } = loadDoctor();
    const branch = stringOption(values, 'branch') ?? DOCTOR_BRANCH;
    const timeoutSeconds = numberOption(values, 'timeout', PATH) ?? DEFAULT_JOB_TIMEOUT_SECONDS;
    const target = await ctx.target();
    const results: CheckResult[] = [];

    if (target.kind === 'stack' && target.stackName) {
      ctx.note(`checking ${target.label}: outputs, alarm notification, secrets`);
      const clients = stackClients(target.region, await ctx.clients());
      try {
        const githubApiUrl = stringOption(values, 'github-api');
        results.push(
          ...(await checkStack({
            stackName: target.stackName,
            clients,
            clock: systemClock,
            skipAlarm: values['skip-alarm'] === true,
            ...(repoUrl !== undefined && { repoUrl }),
            ...(githubApiUrl !== undefined && { githubApiUrl }),
          })),
        );
      } finally {
        clients.destroy();
      }
    } else {
      results.push({
        check: 'stack outputs, alarm notification, secrets',
        status: 'skip',
        detail: 'the local platform has none (pass --stack to check a deployed one)',
      });
      results.push(checkTestIsolation(target.local?.testIsolation));
    }

    if (repoUrl !== undefined) {
      const { sqs, s3 } = await ctx.clients();
      const diffStore = target.diffBucket ? new (loadDiffStore().S3DiffStore)(s3, target.diffBucket) : undefined;
      const ledger = await ctx.ledger();
      const { local } = target;
      // Ctrl-C ends the wait, not the process: the run then takes away what it left.
      const interrupt = new AbortController();
      void ctx.io.untilInterrupted().then(() => interrupt.abort());
      ctx.note(`sending one apply_patch and one run_tests to ${repoUrl} ${branch} (up to ${timeoutSeconds} s)`);
      results.push(
        await checkJobEndToEnd({
          repoUrl,
          branch,
          send: (job) => loadProducer().enqueueAgentJob(job, { sqs, queueUrl: jobsQueue(target).url, diffStore }),
          getJob: (jobId) => ledger.getJob(jobId),
          clock: { now: systemClock.now, sleep: (ms) => sleep(ms, undefined, { signal: interrupt.signal }) },
          ...(local && { prepare: () => ensureLocalBranch(local.stateDir, repoUrl, branch) }),
          cleanUp: (run) => cleanUpScratchRun(ctx, run),
          timeoutMs: timeoutSeconds * 1000,
        }),
      );
    } else {
      results.push({
        check: 'end-to-end job on a scratch workspace',
        status: 'skip',
        detail: 'pass --repo (and --branch, a scratch branch) to run one',
      });
    }

    const failed = results.filter((r) => r.status === 'fail').length;
    const text = [
      table(
        ['RESULT', 'CHECK', 'DETAIL'],
        results.map((r) => [r.status.toUpperCase(), r.check, r.detail]),
      ),
      failed ? `${failed} check(s) failed` : `every check passed or was skipped on ${target.label}`,
    ].join('\n');
    return { data: { target: target.label, passed: failed === 0, checks: results }, text, exitCode: failed ? 1 : 0 };
  },
};
