import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { COMMAND_JOB_TYPES } from '../../contract/job-types';
import { enqueueAgentJobs, newJobId, type JobRequest } from '../../src/client';
import { localLedger } from '../../src/compose/local';
import type { JobRecord } from '../../src/core/ports';
import { createLocalClients, type LocalClients } from '../../tools/local/emulators';
import {
  readPlatformInfo,
  startPlatform,
  type LocalPlatform,
  type PlatformInfo,
  type PlatformOptions,
} from '../../tools/local/platform';
import { drain } from '../support/drive-queue';
import { eventually } from '../support/eventually';

const run = promisify(execFile);
const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@example.com',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@example.com',
};
const git = async (cwd: string, ...args: string[]) => (await run('git', args, { cwd, env: gitEnv })).stdout.trim();

/** Resolves true when something listens on the port, false when the connection is refused. */
function listening(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.once('connect', () => socket.destroy() && resolve(true)).once('error', () => resolve(false));
  });
}

/** The diff of a commit that adds `file` to the source repository (committed, so the next change builds on it). */
async function changeOf(src: string, file: string): Promise<string> {
  await writeFile(path.join(src, file), `${file}\n`);
  await git(src, 'add', '.');
  await git(src, 'commit', '--quiet', '-m', `add ${file}`);
  return `${await git(src, 'diff', 'HEAD~1', 'HEAD')}\n`;
}

// Five jobs through git, a child-process test run and the PR store: allow for a busy 2-core machine.
describe('local platform', () => {
  let work: string;
  /** Stopped after each test, whatever happened (stop() is idempotent). */
  let running: LocalPlatform | undefined;

  beforeEach(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'agent-jobs-platform-'));
  });
  afterEach(async () => {
    await running?.stop();
    await rm(work, { recursive: true, force: true });
  });

  /** Polls the ledger until `done` holds for every job. */
  async function settled(
    clients: LocalClients,
    info: PlatformInfo,
    jobIds: string[],
    done: (r: JobRecord) => boolean,
  ): Promise<JobRecord[]> {
    const records = () =>
      Promise.all(
        jobIds.map(
          async (jobId) =>
            (
              await clients.dynamodb.send(
                new GetCommand({ TableName: info.tableName, Key: { pk: `job#${jobId}` }, ConsistentRead: true }),
              )
            ).Item as JobRecord | undefined,
        ),
      );
    const all = await eventually(records, (seen) => seen.every((r) => r !== undefined && done(r)), {
      what: `jobs ${jobIds.join(', ')} to settle`,
      timeoutMs: 150_000,
    });
    return all as JobRecord[];
  }

  /** A source repository with `a.txt`, served by a fresh platform from its first commit. */
  async function platformWithRepo(
    options: Omit<PlatformOptions, 'stateDir' | 'output'> = {},
  ): Promise<{ src: string; repoUrl: string; platform: LocalPlatform }> {
    const src = path.join(work, 'src');
    await run('git', ['init', '--quiet', '--initial-branch=main', src]);
    await writeFile(path.join(src, 'a.txt'), 'one\n');
    await git(src, 'add', '.');
    await git(src, 'commit', '--quiet', '-m', 'initial');
    // The base branch of the test's pull request: like GitHub, the PR store refuses a missing one.
    await git(src, 'branch', 'release');
    const platform = (running = await startPlatform({ stateDir: path.join(work, 'state'), output: null, ...options }));
    await platform.git.createBareRepo('demo', { fromDir: src });
    return { src, repoUrl: platform.git.repoUrl('demo'), platform };
  }

  it('runs jobs sent with the producer, in order, through the same handlers as on AWS, then stops cleanly', async () => {
    // Prepare: three successive changes of the source repository.
    const { src, repoUrl, platform } = await platformWithRepo();

    const diffs: string[] = [];
    for (const [file, content] of [
      ['a.txt', 'two\n'],
      ['a.txt', 'three\n'],
      ['b.txt', 'new file\n'],
    ] as const) {
      await writeFile(path.join(src, file), content);
      await git(src, 'add', '.');
      await git(src, 'commit', '--quiet', '-m', `change ${file}`);
      diffs.push(`${await git(src, 'diff', 'HEAD~1', 'HEAD')}\n`);
    }

    // Act: a client finds the platform through platform.json and enqueues as against AWS.
    const info = await readPlatformInfo(path.join(work, 'state'));
    expect(info).toMatchObject({
      pid: process.pid,
      gitUrl: platform.git.url,
      queueUrls: { 'agent-jobs': expect.any(String) },
    });
    const clients = createLocalClients(info!.endpoints);
    const base = { workspaceId: 'ws-demo', tenantId: 'tenant-1' };
    const patches: JobRequest[] = diffs.map((diff, i) => ({
      ...base,
      jobId: newJobId(),
      type: 'apply_patch',
      payload: { repo: { url: repoUrl, branch: 'main' }, diff, message: `agent change ${i + 1}` },
    }));
    const tests: JobRequest = {
      ...base,
      jobId: newJobId(),
      type: 'run_tests',
      payload: { command: 'test "$(cat a.txt)" = three && test -f b.txt' },
    };
    const pr: JobRequest = {
      ...base,
      jobId: newJobId(),
      type: 'open_pr',
      payload: { baseBranch: 'release', title: 'Agent work' },
    };
    const jobs = [...patches, tests, pr];
    const outcomes = await enqueueAgentJobs(jobs, { sqs: clients.sqs, queueUrl: info!.queueUrls['agent-jobs']! });
    expect(outcomes.map((o) => o.status)).toEqual(jobs.map(() => 'SENT'));

    // Assess: the ledger, the repository and the stage results.
    const records = await settled(
      clients,
      info!,
      jobs.map((j) => j.jobId!),
      (r) => r.status === 'SUCCEEDED' || r.status === 'FAILED',
    );
    expect(records.map((r) => r.status)).toEqual(jobs.map(() => 'SUCCEEDED'));
    expect(records.map((r) => r.wsSeq)).toEqual([1, 2, 3, 4, 5]);

    const bare = platform.git.gitDir('demo');
    expect(await git(bare, 'rev-parse', 'main^{tree}')).toBe(await git(src, 'rev-parse', 'HEAD^{tree}'));
    const trailers = (await git(bare, 'log', '--format=%(trailers:key=Agent-Job-Id,valueonly)', 'main'))
      .split('\n')
      .filter(Boolean);
    expect(trailers).toEqual(patches.map((p) => p.jobId).reverse());
    const head = await git(bare, 'rev-parse', 'main');
    expect(records[2]?.result).toMatchObject({ commitSha: head });
    expect(records[3]).toMatchObject({ pin: { sha: head }, result: { verdict: 'passed', exitCode: 0, sha: head } });
    expect(records[4]?.result).toMatchObject({ number: 1 });

    const events = await readFile(info!.eventLog, 'utf8');
    expect(
      events
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).detail.jobId),
    ).toEqual(expect.arrayContaining(jobs.map((j) => j.jobId)));

    clients.destroy();
    await platform.stop();

    expect(await readPlatformInfo(path.join(work, 'state'))).toBeUndefined();
    for (const url of [info!.endpoints.sqs, info!.endpoints.dynamodb, info!.gitUrl])
      expect(await listening(url)).toBe(false);
  }, 180_000);

  it("ends a test run whose completion was lost with the platform's in-memory queue: at the next start, and live at the reconciler's next run", async () => {
    const { src, repoUrl, platform: first } = await platformWithRepo();
    const stateDir = path.join(work, 'state');
    const base = { workspaceId: 'ws-lost', tenantId: 'tenant-1' };
    const patch: JobRequest = {
      ...base,
      jobId: newJobId(),
      type: 'apply_patch',
      payload: { repo: { url: repoUrl, branch: 'main' }, diff: await changeOf(src, 'b.txt'), message: 'b' },
    };
    const tests = (): JobRequest => ({
      ...base,
      jobId: newJobId(),
      type: 'run_tests',
      payload: { command: 'test -f b.txt' },
    });
    const send = async (platform: LocalPlatform, jobs: JobRequest[]) => {
      const clients = createLocalClients(platform.info.endpoints);
      await enqueueAgentJobs(jobs, { sqs: clients.sqs, queueUrl: platform.info.queueUrls['agent-jobs']! });
      return clients;
    };
    const completionsLost = (platform: LocalPlatform) => {
      // Fault injection: the runner's completion never reaches the build-events queue (a failed
      // send, or a kill that empties the queues) while the run itself ended.
      const buildEvents = platform.emulators.topology.find((q) => q.role === 'buildEvents');
      const url = platform.info.queueUrls[buildEvents!.name];
      platform.emulators.clients.sqs.middlewareStack.add(
        (next) => async (args) => {
          if ((args.input as { QueueUrl?: string }).QueueUrl === url)
            throw Object.assign(new Error('injected: SendMessage failed'), { name: 'InternalError', $fault: 'server' });
          return next(args);
        },
        { step: 'initialize', name: 'loseCompletions' },
      );
    };

    // A run that ended while the platform lived, its completion lost; the reconciler waits hours.
    await first.stop();
    const second = (running = await startPlatform({ stateDir, output: null, reconcileIntervalMs: 3_600_000 }));
    completionsLost(second);
    const firstRun = tests();
    const clients = await send(second, [patch, firstRun]);
    await eventually(
      () => readFile(second.info.logFile, 'utf8'),
      (log) => log.includes('build completion not sent'),
      { what: 'the lost completion', timeoutMs: 60_000 },
    );
    await expect(settled(clients, second.info, [firstRun.jobId!], (r) => r.status === 'RUNNING')).resolves.toHaveLength(
      1,
    );
    clients.destroy();
    await second.stop();

    // The next start records its verdict before any worker runs.
    const third = (running = await startPlatform({ stateDir, output: null, reconcileIntervalMs: 200 }));
    const ledger = localLedger(third.emulators);
    expect(await ledger.getJob(firstRun.jobId!)).toMatchObject({
      status: 'SUCCEEDED',
      result: { verdict: 'passed' },
      reportedAt: expect.any(String),
    });

    // Live: the reconciler asks the runner about every RUNNING job, not only those past the build's timeout.
    completionsLost(third);
    const secondRun = tests();
    const again = await send(third, [secondRun]);
    const [record] = await settled(
      again,
      third.info,
      [secondRun.jobId!],
      (r) => r.status === 'SUCCEEDED' || r.status === 'FAILED',
    );
    expect(record).toMatchObject({ status: 'SUCCEEDED', result: { verdict: 'passed' } });
    const events = (await readFile(third.info.eventLog, 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(events.filter((e) => [firstRun.jobId, secondRun.jobId].includes(e.detail.jobId)).map((e) => e.type)).toEqual(
      ['AgentJobSucceeded', 'AgentJobSucceeded'],
    );
    again.destroy();
  }, 180_000);

  it('fences the workspace after a patch that does not apply and parks the later job on the DLQ', async () => {
    const { repoUrl, platform } = await platformWithRepo();
    const clients = createLocalClients(platform.info.endpoints);
    const patch = (diff: string): JobRequest => ({
      workspaceId: 'ws-fenced',
      tenantId: 'tenant-1',
      jobId: newJobId(),
      type: 'apply_patch',
      payload: { repo: { url: repoUrl, branch: 'main' }, diff, message: 'change' },
    });
    const bad = patch('diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-not what is there\n+two\n');
    const good = patch('diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n');
    await enqueueAgentJobs([bad, good], { sqs: clients.sqs, queueUrl: platform.info.queueUrls['agent-jobs']! });

    const records = await settled(clients, platform.info, [bad.jobId!, good.jobId!], (r) => r.status !== 'IN_FLIGHT');
    expect(records.map((r) => [r.status, r.error?.reason])).toEqual([
      ['FAILED', 'PATCH_DOES_NOT_APPLY'],
      ['SKIPPED', 'SKIPPED'],
    ]);
    expect(records[1]?.blockedBy).toBe(bad.jobId);

    // The ledger records SKIPPED before the worker moves the message to the DLQ: wait for the move.
    const dlqUrl = platform.info.dlqUrls['agent-jobs']!;
    const parked: (string | undefined)[][] = [];
    await eventually(
      async () => {
        parked.push(
          ...(await drain(clients.sqs, dlqUrl)).map((m) => [
            m.MessageAttributes?.jobId?.StringValue,
            m.MessageAttributes?.reason?.StringValue,
          ]),
        );
        return parked.length;
      },
      (count) => count >= 2,
      { what: 'both jobs on the DLQ', timeoutMs: 30_000 },
    );
    expect(parked).toEqual([
      [bad.jobId, 'PATCH_DOES_NOT_APPLY'],
      [good.jobId, 'SKIPPED'],
    ]);
    clients.destroy();
  }, 180_000);

  it('runs N + 5 command jobs against a build quota of N: the extra ones wait for a build to end, none fails, none reaches a DLQ', async () => {
    const quota = 2;
    const [type] = COMMAND_JOB_TYPES;
    if (type === undefined) return; // a catalog without command stages has no builds to limit
    // Short back-offs: a job refused by the quota comes back within seconds.
    const { src, repoUrl, platform } = await platformWithRepo({
      buildQuota: quota,
      backoff: { baseSeconds: 1, capSeconds: 2 },
    });
    const clients = createLocalClients(platform.info.endpoints);
    // One workspace (and branch) per job, so that every build could start at once.
    const workspaces = Array.from({ length: quota + 5 }, (_, i) => `ws-quota-${i}`);
    for (const ws of workspaces) await git(src, 'push', '--quiet', platform.git.gitDir('demo'), `main:${ws}`);
    const jobs = workspaces.flatMap((ws): JobRequest[] => [
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
      // Each build says when it started and ended (ms): the runs' overlap is measured from the builds' own clocks.
      {
        workspaceId: ws,
        tenantId: 'tenant-1',
        jobId: newJobId(),
        type,
        payload: { command: `test -f ${ws}.txt && echo "from $(date +%s%3N)" && sleep 2 && echo "to $(date +%s%3N)"` },
      },
    ]);
    await enqueueAgentJobs(jobs, { sqs: clients.sqs, queueUrl: platform.info.queueUrls['agent-jobs']! });

    const records = await settled(
      clients,
      platform.info,
      jobs.map((j) => j.jobId!),
      (r) => r.status !== 'IN_FLIGHT' && r.status !== 'RUNNING',
    );

    expect(records.map((r) => [r.type, r.status])).toEqual(jobs.map((j) => [j.type, 'SUCCEEDED']));
    const builds = records
      .filter((r) => r.type === type)
      .map((r) => {
        const tail = String(r.result?.['logTail']);
        return { from: Number(/from (\d+)/.exec(tail)?.[1]), to: Number(/to (\d+)/.exec(tail)?.[1]) };
      });
    // The most builds running at one time: the quota, reached and never passed.
    const running = (at: number) => builds.filter((b) => b.from <= at && at < b.to).length;
    expect(Math.max(...builds.map((b) => running(b.from)))).toBe(quota);
    for (const dlqUrl of Object.values(platform.info.dlqUrls)) {
      const { Attributes } = await clients.sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: dlqUrl,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      );
      expect({ dlqUrl, ...Attributes }).toEqual({
        dlqUrl,
        ApproximateNumberOfMessages: '0',
        ApproximateNumberOfMessagesNotVisible: '0',
      });
    }
    clients.destroy();
  }, 240_000);
});
